//! Escalations (docs/rules.md LEDGER-78): a call still waiting for a person when its tool's
//! `escalate.after` has passed is escalated to more deciders, once.
//!
//! Guarantees: the escalation is one row keyed by the call, inserted only if absent, in the
//! transaction that writes its notices and a compare-and-swap of the call's row (a new
//! version, still waiting), so of any number of replicas noticing it at once exactly one
//! escalates it and its people are told once. The time is the ledger's clock.

use std::time::Duration;

use crate::sql::tx::LedgerTx;
use crate::transitions::batch::Batch;
use crate::transitions::expiry::load_current;
use crate::vocabulary::clock::to_micros;
use crate::vocabulary::error::LedgerError;
use crate::vocabulary::ids::InvocationId;
use crate::vocabulary::state::InvocationState as S;

/// Escalates `id` to `to` if it has waited `after` and was not escalated yet; whether it was
/// escalated now.
pub(crate) async fn escalate(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    id: InvocationId,
    after: Duration,
    to: &[String],
) -> Result<bool, LedgerError> {
    let inv = load_current(tx, batch, id).await?;
    let due = time::Duration::try_from(after)
        .ok()
        .and_then(|after| inv.created_at.checked_add(after))
        .is_some_and(|due| due <= batch.now);
    if !matches!(inv.state, S::AwaitingApproval | S::Proposed) || !due {
        return Ok(false);
    }
    let inserted = tx
        .inner
        .execute(
            "INSERT INTO escalations (invocation_id, escalated_to, at) VALUES ($1, $2, $3) \
             ON CONFLICT (invocation_id) DO NOTHING",
            &[
                id.to_string().into(),
                serde_json::to_string(to).unwrap_or_default().into(),
                to_micros(batch.now).into(),
            ],
        )
        .await?;
    if inserted == 0 {
        return Ok(false);
    }
    let Some(saved) = batch.save(tx, &inv, inv.clone()).await? else {
        return Err(LedgerError::Database(crate::support::deferred::lost_race()));
    };
    batch.notice_escalation(&saved, to);
    Ok(true)
}

/// Whether `id` was escalated.
pub(crate) async fn escalated(
    pool: &crate::sql::db::DbPool,
    id: InvocationId,
) -> Result<bool, LedgerError> {
    let row = pool
        .fetch_optional(
            "SELECT invocation_id FROM escalations WHERE invocation_id = $1",
            &[id.to_string().into()],
        )
        .await?;
    Ok(row.is_some())
}
