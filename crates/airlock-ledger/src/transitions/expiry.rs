//! Expiry, enforced on every read and decision: a row parked for a person past its
//! `expires_at` becomes `expired` the moment anything looks at it, and its run fails with
//! `approval_expired`. That write is the point, so it happens even when the caller's own
//! transition is then refused.

use time::OffsetDateTime;

use crate::sql::tx::LedgerTx;
use crate::transitions::batch::Batch;
use crate::transitions::runs;
use crate::vocabulary::error::LedgerError;
use crate::vocabulary::ids::InvocationId;
use crate::vocabulary::model::Invocation;
use crate::vocabulary::state::InvocationState as S;

/// Expires `inv` if it is parked past its `expires_at` (and fails its run with
/// `approval_expired`); returns the row as it now stands.
pub(crate) async fn settle_expiry(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    inv: Invocation,
    now: OffsetDateTime,
) -> Result<Invocation, LedgerError> {
    let overdue = inv.state.is_parked() && inv.expires_at.is_some_and(|at| at <= now);
    if !overdue {
        return Ok(inv);
    }
    let mut next = inv.clone();
    next.state = S::Expired;
    let Some(saved) = batch.save(tx, &inv, next).await? else {
        return batch.load_required(tx, inv.id).await;
    };
    if let Some(run_id) = saved.run_id {
        runs::fail_open_run(tx, batch, run_id, "approval_expired").await?;
    }
    Ok(saved)
}

/// Loads a row and applies expiry.
pub(crate) async fn load_current(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    id: InvocationId,
) -> Result<Invocation, LedgerError> {
    let inv = batch.load_required(tx, id).await?;
    let now = batch.now;
    settle_expiry(tx, batch, inv, now).await
}
