//! The sweep: leases past their deadline and parked rows past their expiry, found by query
//! rather than by someone reading them.
//!
//! An expired lease of an idempotent call goes back to `approved` (it re-runs with the same
//! idempotency key); any other goes to `in_doubt` for a person, since the call may have run and
//! must never re-run on its own.

use airlock_spec::Effect;
use sqlx::AssertSqlSafe;
use time::OffsetDateTime;

use crate::sql::row::{INVOCATION_COLUMNS, InvocationRow, open_rows};
use crate::sql::tx::LedgerTx;
use crate::transitions::batch::Batch;
use crate::transitions::budgets;
use crate::transitions::expiry::settle_expiry;
use crate::vocabulary::clock::to_micros;
use crate::vocabulary::error::LedgerError;
use crate::vocabulary::model::{Invocation, SweepReport};
use crate::vocabulary::state::InvocationState as S;

/// Running rows whose lease ended before `$1`, oldest first, at most `$2`.
pub(crate) const EXPIRED_LEASES: &str = concat!(
    "state = 'running' AND lease_deadline < $1 AND ",
    open_rows!(),
    " ORDER BY lease_deadline LIMIT $2"
);

/// Parked rows whose wait ended at or before `$1`, oldest first, at most `$2`.
pub(crate) const EXPIRED_WAITS: &str = concat!(
    "state IN ('awaiting_approval', 'awaiting_answer', 'awaiting_credential', 'in_doubt') AND expires_at <= $1 AND ",
    open_rows!(),
    " ORDER BY expires_at LIMIT $2"
);

/// Leases past their deadline, then parked rows past their expiry.
pub(crate) async fn sweep(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    now: OffsetDateTime,
    limit: i64,
) -> Result<SweepReport, LedgerError> {
    let mut report = SweepReport::default();
    batch.flush(tx).await?;
    let now_us = to_micros(now);
    // First: the budget lock comes before any row the releases below touch (LEDGER-74).
    budgets::forget_past(tx, now_us).await?;
    let rows = tx
        .inner
        .fetch_all(
            AssertSqlSafe(format!(
                "SELECT {INVOCATION_COLUMNS} FROM invocations WHERE {EXPIRED_LEASES}"
            )),
            &[now_us.into(), limit.into()],
        )
        .await?;
    for r in rows {
        let inv = Invocation::try_from(InvocationRow::read(&r)?)?;
        let mut next = inv.clone();
        if inv.effect == Effect::Idempotent {
            // Safe to repeat: back to approved, re-run with the same idempotency key.
            next.state = S::Approved;
            next.lease = None;
        } else {
            // It may have run: never re-run automatically; park it for a person.
            next.state = S::InDoubt;
            next.expires_at = Some(now + batch.approval_ttl);
        }
        if let Some(saved) = batch.save(tx, &inv, next).await? {
            match saved.state {
                S::Approved => report.retried.push(saved.id),
                _ => report.in_doubt.push(saved.id),
            }
        }
    }
    let rows = tx
        .inner
        .fetch_all(
            AssertSqlSafe(format!(
                "SELECT {INVOCATION_COLUMNS} FROM invocations WHERE {EXPIRED_WAITS}"
            )),
            &[now_us.into(), limit.into()],
        )
        .await?;
    for r in rows {
        let inv = Invocation::try_from(InvocationRow::read(&r)?)?;
        let settled = settle_expiry(tx, batch, inv, now).await?;
        if settled.state == S::Expired {
            report.expired.push(settled.id);
        }
    }
    Ok(report)
}
