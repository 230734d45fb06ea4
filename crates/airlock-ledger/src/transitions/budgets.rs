//! Budgets (docs/rules.md LEDGER-74): a call's shares of its tool's limits, judged and reserved
//! in the transaction that records the call — no commit and no row of their own.
//!
//! Guarantees: of any number of concurrent calls against one limit, on any number of replicas,
//! the ones recorded as able to run never add up past it within any span of its window: on
//! PostgreSQL the database's budget lock is held for the rest of the recording transaction
//! before a use is read (SQLite has one writer). A call's shares ride on its own row
//! (`invocations.budget`, written by the insert that records it); a limit's use is kept per key
//! and bucket of time (`budget_buckets`, migration 0027) by the database's triggers, in the
//! transaction of every write that changes it: a share adds to its bucket when its row is
//! inserted and leaves it when its call stops counting — denied, expired, given up, or failed
//! before anything was sent. A bucket counts until its end is a window old, so a share counts
//! for its whole window and at most a sixtieth of it longer, never shorter. So judging reads
//! one key's buckets, no transition writes the budget itself, and a crash leaves nothing to
//! clean: a call in doubt keeps its share until a person settles it.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::sql::db::{DbPool, DbRow, DbTx};
use crate::sql::tx::LedgerTx;
use crate::transitions::batch::Batch;
use crate::vocabulary::budget::{BudgetShare, BudgetUse, LimitUsage, OverLimit};
use crate::vocabulary::clock::to_micros;
use crate::vocabulary::error::LedgerError;
use crate::vocabulary::ids::InvocationId;

/// What a call's shares come to.
#[derive(Debug)]
pub(crate) enum Judged {
    /// Every share fits.
    Within(Vec<BudgetUse>),
    /// A `deny` limit is over: the call fails with this message.
    Denied(String),
    /// Only `approval` limits are over: the call waits for a person.
    Approval(Vec<BudgetUse>),
}

/// Judges `shares` against what their limits hold now: their buckets still in a window, plus the
/// shares this batch added — each key read once a batch, or assumed from what this process knew
/// (`budget_memo`). An assumption that would judge a call over is read instead before it counts.
/// On PostgreSQL the budget lock is held until the transaction ends.
pub(crate) async fn judge(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    shares: &[BudgetShare],
) -> Result<Judged, LedgerError> {
    lock(tx).await?;
    let mut uses = count(tx, batch, shares).await?;
    let unread: Vec<&str> = uses
        .iter()
        .filter(|u| u.over && batch.budgets.unread(&u.key))
        .map(|u| u.key.as_str())
        .collect();
    if !unread.is_empty() {
        // The shares the batch queued must be in the buckets the read sums.
        batch.flush(tx).await?;
        let now = to_micros(batch.now);
        for key in unread {
            let read = used_within(tx, key, now).await?;
            batch.budgets.refresh(key, read);
        }
        uses = count(tx, batch, shares).await?;
    }
    let over = |mode| {
        uses.iter()
            .zip(shares)
            .find(|(u, s)| u.over && s.over == mode)
            .map(|(u, _)| u.clone())
    };
    Ok(match (over(OverLimit::Deny), over(OverLimit::Approval)) {
        (Some(first), _) => {
            let message = format!(
                "over the limit {}: nothing was sent ({} left before this call)",
                first.figures(),
                first.left()
            );
            Judged::Denied(message)
        }
        (None, Some(_)) => Judged::Approval(uses),
        (None, None) => Judged::Within(uses),
    })
}

/// Each share against what its key holds as the batch counts it (read the first time).
async fn count(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    shares: &[BudgetShare],
) -> Result<Vec<BudgetUse>, LedgerError> {
    let mut uses = Vec::with_capacity(shares.len());
    for share in shares {
        let used = match batch.budgets.counted(&share.key) {
            Some(used) => used,
            None => {
                let read = used_within(tx, &share.key, to_micros(batch.now)).await?;
                batch.budgets.start(&share.key, read);
                read
            }
        };
        uses.push(BudgetUse {
            key: share.key.clone(),
            label: share.label.clone(),
            unit: share.unit.clone(),
            share: share.share,
            used_before: used,
            cap: share.cap,
            window: share.window,
            over: used.saturating_add(share.share) > share.cap,
        });
    }
    Ok(uses)
}

/// On PostgreSQL, the database's budget lock until the transaction ends. One lock for every
/// budget of the database, not one a key: a batch judges the calls of several jobs, and locks
/// taken key by key in each job's order could deadlock two lanes. The triggers that keep the
/// buckets take the same one (migrations 0020, 0027).
async fn lock(tx: &mut LedgerTx) -> Result<(), LedgerError> {
    if matches!(tx.inner, DbTx::Postgres(_)) {
        tx.inner.execute("SELECT budget_lock()", &[]).await?;
    }
    Ok(())
}

/// What `key`'s buckets still in a window hold at `now` (microseconds).
async fn used_within(tx: &mut LedgerTx, key: &str, now: i64) -> Result<i64, LedgerError> {
    let row = tx
        .inner
        .fetch_optional(
            "SELECT CAST(COALESCE(SUM(used), 0) AS BIGINT) AS used FROM budget_buckets \
             WHERE limit_key = $1 AND until > $2",
            &[key.to_owned().into(), now.into()],
        )
        .await?;
    Ok(row
        .map(|r| r.int("used"))
        .transpose()?
        .flatten()
        .unwrap_or(0))
}

/// Buckets per window: a share counts at most a sixtieth of its window longer than the window.
const BUCKETS_PER_WINDOW: i64 = 60;

/// A window in microseconds; a window longer than the calendar counts every share.
fn window_us(window: Duration) -> i64 {
    i64::try_from(window.as_micros()).unwrap_or(i64::MAX)
}

/// The bucket a share taken at `at` falls in, and when that bucket leaves every window of
/// `window_us` (both in microseconds): computed as migration 0027's `budget_bucket` and
/// `budget_until` compute them for the shares it carries over.
fn bucket(at: i64, window_us: i64) -> (i64, i64) {
    let width = (window_us / BUCKETS_PER_WINDOW).max(1);
    let start = at - at.rem_euclid(width);
    let until = if window_us >= i64::MAX - at - width {
        i64::MAX
    } else {
        start + width + window_us
    };
    (start, until)
}

/// A share as `invocations.budget` holds it: as judged, with its bucket.
#[derive(Serialize, Deserialize)]
struct StoredShare {
    key: String,
    label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    unit: Option<String>,
    share: i64,
    used_before: i64,
    cap: i64,
    window_us: i64,
    over: bool,
    at: i64,
    bucket: i64,
    until: i64,
}

/// The judged `uses` as the new row's `budget` column holds them (none without a share).
pub(crate) fn stored(uses: &[BudgetUse], now: time::OffsetDateTime) -> Option<String> {
    if uses.is_empty() {
        return None;
    }
    let at = to_micros(now);
    let shares: Vec<StoredShare> = uses
        .iter()
        .map(|u| {
            let window_us = window_us(u.window);
            let (bucket, until) = bucket(at, window_us);
            StoredShare {
                key: u.key.clone(),
                label: u.label.clone(),
                unit: u.unit.clone(),
                share: u.share,
                used_before: u.used_before,
                cap: u.cap,
                window_us,
                over: u.over,
                at,
                bucket,
                until,
            }
        })
        .collect();
    serde_json::to_string(&shares).ok()
}

/// The shares row `id` reserved, as they were judged. A row the previous release recorded
/// during a rolling upgrade keeps them in `budget_shares` (migration 0019).
pub(crate) async fn of(pool: &DbPool, id: InvocationId) -> Result<Vec<BudgetUse>, LedgerError> {
    let budget = pool
        .fetch_optional(
            "SELECT budget FROM invocations WHERE id = $1",
            &[id.to_string().into()],
        )
        .await?
        .map(|r| r.text("budget"))
        .transpose()?
        .flatten();
    let Some(budget) = budget else {
        return of_previous_release(pool, id).await;
    };
    let shares: Vec<StoredShare> =
        serde_json::from_str(&budget).map_err(|e| LedgerError::Corrupt {
            entity: "invocation",
            id: id.to_string(),
            reason: format!("column budget: {e}"),
        })?;
    let mut uses: Vec<BudgetUse> = shares
        .into_iter()
        .map(|s| BudgetUse {
            key: s.key,
            label: s.label,
            unit: s.unit,
            share: s.share,
            used_before: s.used_before,
            cap: s.cap,
            window: micros(s.window_us),
            over: s.over,
        })
        .collect();
    uses.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(uses)
}

async fn of_previous_release(
    pool: &DbPool,
    id: InvocationId,
) -> Result<Vec<BudgetUse>, LedgerError> {
    let rows = pool
        .fetch_all(
            "SELECT limit_key, label, unit, share, used_before, cap, window_us, over_cap \
             FROM budget_shares WHERE invocation_id = $1 ORDER BY limit_key",
            &[id.to_string().into()],
        )
        .await?;
    rows.iter().map(read_use).collect()
}

/// Every limit with a share still counting in its window, and what it holds now; its label,
/// unit, cap and window as its newest bucket carries them.
pub(crate) async fn usage(
    pool: &DbPool,
    now: time::OffsetDateTime,
) -> Result<Vec<LimitUsage>, LedgerError> {
    let rows = pool
        .fetch_all(
            "SELECT b.limit_key, b.label, b.unit, b.cap, b.window_us, t.used \
             FROM (SELECT limit_key, MAX(bucket) AS newest, \
                          CAST(SUM(used) AS BIGINT) AS used \
                   FROM budget_buckets WHERE until > $1 GROUP BY limit_key) AS t \
             JOIN budget_buckets b ON b.limit_key = t.limit_key AND b.bucket = t.newest \
             WHERE t.used > 0 ORDER BY b.limit_key",
            &[to_micros(now).into()],
        )
        .await?;
    rows.iter()
        .map(|row| {
            Ok(LimitUsage {
                key: row.req_text("limit_key")?,
                label: row.req_text("label")?,
                unit: row.text("unit")?,
                used: row.req_int("used")?,
                cap: row.req_int("cap")?,
                window: micros(row.req_int("window_us")?),
            })
        })
        .collect()
}

/// Deletes the buckets no window reaches at `now` (the sweep's, LEDGER-74). On PostgreSQL under
/// the budget lock, taken before any bucket row as everywhere else.
pub(crate) async fn forget_past(tx: &mut LedgerTx, now: i64) -> Result<(), LedgerError> {
    lock(tx).await?;
    tx.inner
        .execute(
            "DELETE FROM budget_buckets WHERE until <= $1",
            &[now.into()],
        )
        .await?;
    Ok(())
}

fn micros(us: i64) -> Duration {
    Duration::from_micros(u64::try_from(us).unwrap_or(0))
}

fn read_use(row: &DbRow) -> Result<BudgetUse, LedgerError> {
    Ok(BudgetUse {
        key: row.req_text("limit_key")?,
        label: row.req_text("label")?,
        unit: row.text("unit")?,
        share: row.req_int("share")?,
        used_before: row.req_int("used_before")?,
        cap: row.req_int("cap")?,
        window: micros(row.req_int("window_us")?),
        over: row.req_int("over_cap")? != 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_counts_its_whole_window_and_at_most_a_sixtieth_longer() {
        let hour = 3_600_000_000;
        for at in [0, 1, 59_999_999, 60_000_000, 1_765_000_123_456_789] {
            let (start, until) = bucket(at, hour);
            assert!(start <= at && at - start < hour / 60, "{at}: {start}");
            assert!(until > at + hour - 1, "counts for the whole window: {at}");
            assert!(
                until <= at + hour + hour / 60,
                "at most a bucket longer: {at}"
            );
        }
        assert_eq!(bucket(1_765_000_000_000_000, i64::MAX).1, i64::MAX);
        assert_eq!(
            bucket(5, 30),
            (5, 36),
            "a window under 60 µs has 1 µs buckets"
        );
    }
}
