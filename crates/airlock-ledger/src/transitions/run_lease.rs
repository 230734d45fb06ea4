//! The lease on an agent run being driven (docs/rules.md LEDGER-56..LEDGER-58).
//!
//! Guarantees:
//! - a `running` run started or resumed with a [`RunLease`] is held by its owner until the
//!   lease's deadline, written in the same commit as the status (LEDGER-56); parking or ending
//!   it clears the lease, so only a running run ever holds one;
//! - only the holder renews, and only while the run is running (LEDGER-57);
//! - once the deadline has passed by the ledger's clock, [`take_over`] hands the run to a new
//!   owner with a conditional update: of any number of takers, in this process or another,
//!   exactly one gets each run (LEDGER-58). Runs that no lease was ever written for (runs of
//!   the plain `create_run` API, nested runs driven by their root) are never taken over.
//!
//! The lease is not part of a run's hashed content and bumps no version: a renewal is not an
//! event of the run, and it never races the run's own status swaps.

use std::time::Duration;

use sqlx::AssertSqlSafe;
use time::OffsetDateTime;

use crate::sql::db::SqlValue;
use crate::sql::tx::LedgerTx;
use crate::transitions::batch::Batch;
use crate::vocabulary::clock::to_micros;
use crate::vocabulary::error::LedgerError;
use crate::vocabulary::ids::RunId;
use crate::vocabulary::model::RunLease;
use crate::vocabulary::state::RunStatus;

/// The lease columns (`lease_owner`, `lease_deadline`) a run is written with when it moves to
/// `status` at `now`: the lease while running, nothing otherwise.
pub(crate) fn columns(
    lease: Option<&RunLease>,
    status: RunStatus,
    now: OffsetDateTime,
) -> [SqlValue; 2] {
    match lease.filter(|_| status == RunStatus::Running) {
        Some(l) => [l.owner.clone().into(), to_micros(now + l.ttl).into()],
        None => [SqlValue::Null, SqlValue::NullInt],
    }
}

/// Extends `owner`'s lease on running run `id`. `Ok(false)` when another owner holds the run
/// now (it was taken over); a run that is not running any more holds no lease to lose.
pub(crate) async fn renew(
    tx: &mut LedgerTx,
    batch: &Batch,
    id: RunId,
    owner: &str,
    ttl: Duration,
) -> Result<bool, LedgerError> {
    let n = tx
        .inner
        .execute(
            "UPDATE runs SET lease_deadline = $3 \
             WHERE id = $1 AND lease_owner = $2 AND status = 'running'",
            &[
                id.to_string().into(),
                owner.into(),
                to_micros(batch.now + ttl).into(),
            ],
        )
        .await?;
    if n == 1 {
        return Ok(true);
    }
    let row = tx
        .inner
        .fetch_optional(
            "SELECT status, lease_owner FROM runs WHERE id = $1",
            &[id.to_string().into()],
        )
        .await?
        .ok_or(LedgerError::RunNotFound(id))?;
    let running = row.req_text("status")? == RunStatus::Running.as_str();
    let holder = row.text("lease_owner")?;
    Ok(!(running && holder.is_some_and(|h| h != owner)))
}

/// Running runs whose lease ended before `$1` and that `$3` does not hold (a process never takes
/// over a run it drives itself), oldest deadline first, at most `$2`.
pub(crate) const EXPIRED_RUN_LEASES: &str = "status = 'running' AND lease_deadline IS NOT NULL \
     AND lease_deadline < $1 AND lease_owner <> $3 ORDER BY lease_deadline LIMIT $2";

/// Takes over up to `limit` running runs whose lease has expired, under `lease`: the runs this
/// caller now holds (and is to drive).
pub(crate) async fn take_over(
    tx: &mut LedgerTx,
    batch: &Batch,
    lease: &RunLease,
    limit: u32,
) -> Result<Vec<RunId>, LedgerError> {
    let now = to_micros(batch.now);
    let rows = tx
        .inner
        .fetch_all(
            AssertSqlSafe(format!("SELECT id FROM runs WHERE {EXPIRED_RUN_LEASES}")),
            &[
                now.into(),
                i64::from(limit).into(),
                lease.owner.clone().into(),
            ],
        )
        .await?;
    let [owner, deadline] = columns(Some(lease), RunStatus::Running, batch.now);
    let mut taken = Vec::with_capacity(rows.len());
    for row in rows {
        let id = row.req_text("id")?;
        // Re-checked by the update itself: a concurrent taker that committed first leaves this
        // one nothing to update (PostgreSQL re-reads the row it waited for).
        let n = tx
            .inner
            .execute(
                "UPDATE runs SET lease_owner = $2, lease_deadline = $3 \
                 WHERE id = $1 AND status = 'running' AND lease_deadline < $4",
                &[
                    id.clone().into(),
                    owner.clone(),
                    deadline.clone(),
                    now.into(),
                ],
            )
            .await?;
        if n == 1 {
            taken.push(
                id.parse()
                    .map_err(|_| LedgerError::Invalid(format!("stored run id `{id}`")))?,
            );
        }
    }
    Ok(taken)
}
