//! Budgets (docs/rules.md LEDGER-74): a call's shares of its tool's limits, judged and reserved
//! in the transaction that records the call — no commit of their own.
//!
//! Guarantees: of any number of concurrent calls against one limit, on any number of replicas,
//! the ones recorded as able to run never add up past it: on PostgreSQL the database's budget
//! lock is held for the rest of the recording transaction before a use is read (SQLite has one
//! writer). A limit's use is its key's running total (`budget_totals`), kept by the database's
//! triggers (migration 0020) in the transaction of every write that changes it: a share adds to
//! it when reserved and leaves it when its call stops counting — denied, expired, given up, or
//! failed before anything was sent — or when it is found outside its window here. So judging
//! reads one row a limit whatever the number of shares, no transition writes the budget itself,
//! and a crash leaves nothing to clean: a call in doubt keeps its share until a person settles it.

use std::time::Duration;

use crate::sql::db::{DbPool, DbRow, DbTx, SqlValue};
use crate::sql::tx::LedgerTx;
use crate::support::deferred::{QueuedShare, SHARE_COLUMNS};
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

/// Judges `shares` against what their limits hold now: the running totals, plus the shares
/// this batch has queued and not yet written. On PostgreSQL the budget lock is held until the
/// transaction ends.
pub(crate) async fn judge(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    shares: &[BudgetShare],
) -> Result<Judged, LedgerError> {
    if matches!(tx.inner, DbTx::Postgres(_)) {
        // One lock for every budget of the database, not one a key: a batch judges the calls of
        // several jobs, and locks taken key by key in each job's order could deadlock two lanes.
        // The triggers that keep the totals take the same one (migration 0020).
        tx.inner.execute("SELECT budget_lock()", &[]).await?;
    }
    let mut uses = Vec::with_capacity(shares.len());
    for share in shares {
        let queued = batch
            .deferred
            .as_ref()
            .map_or(0, |d| d.queued_share(&share.key));
        let written = used_within(tx, &share.key, since(batch.now, share.window)).await?;
        let used = written.saturating_add(queued);
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

/// What `key` holds within a window starting after `since`: its running total, once the open
/// shares that left the window are closed (which the triggers take off the total).
async fn used_within(tx: &mut LedgerTx, key: &str, since: i64) -> Result<i64, LedgerError> {
    let Some((used, oldest)) = total(tx, key).await? else {
        return Ok(0);
    };
    if oldest.is_none_or(|oldest| oldest > since) {
        return Ok(used);
    }
    tx.inner
        .execute(
            "UPDATE budget_shares SET open = 0 WHERE limit_key = $1 AND open = 1 AND at <= $2",
            &[key.to_owned().into(), since.into()],
        )
        .await?;
    Ok(total(tx, key).await?.map_or(0, |(used, _)| used))
}

/// The running total of `key` and its oldest open share's time.
async fn total(tx: &mut LedgerTx, key: &str) -> Result<Option<(i64, Option<i64>)>, LedgerError> {
    let row = tx
        .inner
        .fetch_optional(
            "SELECT used, oldest FROM budget_totals WHERE limit_key = $1",
            &[key.to_owned().into()],
        )
        .await?;
    row.map(|r| Ok((r.req_int("used")?, r.int("oldest")?)))
        .transpose()
}

/// The start of a window ending `now`, in microseconds; a window longer than the calendar
/// reaches back to the first share.
fn since(now: time::OffsetDateTime, window: Duration) -> i64 {
    time::Duration::try_from(window)
        .ok()
        .and_then(|w| now.checked_sub(w))
        .map_or(i64::MIN, to_micros)
}

/// Reserves the judged `uses` for the row `id` just recorded: queued with the batch's other
/// writes when it queues them (the row's own insert is queued too), else written at once.
pub(crate) async fn reserve(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    id: InvocationId,
    uses: &[BudgetUse],
) -> Result<(), LedgerError> {
    for u in uses {
        let binds: Vec<SqlValue> = vec![
            id.to_string().into(),
            u.key.clone().into(),
            u.label.clone().into(),
            u.unit.clone().into(),
            u.share.into(),
            u.used_before.into(),
            u.cap.into(),
            i64::try_from(u.window.as_micros())
                .unwrap_or(i64::MAX)
                .into(),
            i64::from(u.over).into(),
            to_micros(batch.now).into(),
        ];
        match batch.deferred.as_mut() {
            Some(deferred) => deferred.push_share(QueuedShare {
                key: u.key.clone(),
                share: u.share,
                binds,
            }),
            None => {
                let sql = format!(
                    "INSERT INTO budget_shares ({SHARE_COLUMNS}) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
                );
                tx.inner.execute(sqlx::AssertSqlSafe(sql), &binds).await?;
            }
        }
    }
    Ok(())
}

/// The shares row `id` reserved, as they were judged.
pub(crate) async fn of(pool: &DbPool, id: InvocationId) -> Result<Vec<BudgetUse>, LedgerError> {
    let rows = pool
        .fetch_all(
            "SELECT limit_key, label, unit, share, used_before, cap, window_us, over_cap \
             FROM budget_shares WHERE invocation_id = $1 ORDER BY limit_key",
            &[id.to_string().into()],
        )
        .await?;
    rows.iter().map(read_use).collect()
}

/// Every limit with a share recorded within its window, and what it holds now.
pub(crate) async fn usage(
    pool: &DbPool,
    now: time::OffsetDateTime,
) -> Result<Vec<LimitUsage>, LedgerError> {
    let latest = pool
        .fetch_all(
            "SELECT s.limit_key, s.label, s.unit, s.cap, s.window_us FROM budget_shares s \
             WHERE s.at = (SELECT MAX(t.at) FROM budget_shares t WHERE t.limit_key = s.limit_key) \
             ORDER BY s.limit_key",
            &[],
        )
        .await?;
    let mut out = Vec::new();
    for row in &latest {
        let key = row.req_text("limit_key")?;
        if out.iter().any(|u: &LimitUsage| u.key == key) {
            continue;
        }
        let window = Duration::from_micros(u64::try_from(row.req_int("window_us")?).unwrap_or(0));
        let since = since(now, window);
        let used = pool
            .fetch_optional(
                "SELECT CAST(COALESCE(SUM(share), 0) AS BIGINT) AS used FROM budget_shares \
                 WHERE limit_key = $1 AND open = 1 AND at > $2",
                &[key.clone().into(), since.into()],
            )
            .await?
            .map(|r| r.int("used"))
            .transpose()?
            .flatten()
            .unwrap_or(0);
        if used == 0 {
            continue;
        }
        out.push(LimitUsage {
            key,
            label: row.req_text("label")?,
            unit: row.text("unit")?,
            used,
            cap: row.req_int("cap")?,
            window,
        });
    }
    Ok(out)
}

fn read_use(row: &DbRow) -> Result<BudgetUse, LedgerError> {
    let window_us = row.req_int("window_us")?;
    Ok(BudgetUse {
        key: row.req_text("limit_key")?,
        label: row.req_text("label")?,
        unit: row.text("unit")?,
        share: row.req_int("share")?,
        used_before: row.req_int("used_before")?,
        cap: row.req_int("cap")?,
        window: Duration::from_micros(u64::try_from(window_us).unwrap_or(0)),
        over: row.req_int("over_cap")? != 0,
    })
}
