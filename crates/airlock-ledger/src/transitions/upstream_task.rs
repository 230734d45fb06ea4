//! Calls an upstream runs as a task of its own (docs/rules.md LEDGER-64 to LEDGER-66).
//!
//! Guarantees: a running row is handed to its upstream's task only by the lease owner that ran
//! the call, in one commit that moves its lease to [`RELAY_OWNER`] (whose deadline is the relay
//! lease) and stores the upstream's task id beside it, so any replica, after any restart, can
//! follow the task: read the id ([`upstream_task`]), renew the relay lease, or finish the row as
//! [`RELAY_OWNER`] — the ordinary finish, whose compare-and-swap lets exactly one of concurrent
//! finishers settle it. Until the relay lease lapses the sweeper leaves the row alone; after, it
//! treats the row as any call whose runner went away (LEDGER-8).

use std::time::Duration;

use crate::sql::db::DbPool;
use crate::sql::tx::LedgerTx;
use crate::transitions::batch::Batch;
use crate::transitions::lease::lease_lost;
use crate::vocabulary::clock::to_micros;
use crate::vocabulary::error::LedgerError;
use crate::vocabulary::ids::InvocationId;
use crate::vocabulary::model::{Invocation, Lease};
use crate::vocabulary::state::InvocationState as S;

/// The lease owner of a row whose call runs as its upstream's task: not a process, so whoever
/// follows the task may renew the lease and finish the row.
pub const RELAY_OWNER: &str = "upstream-task";

/// Moves the running row `id` held by `owner` to the relay's lease, until `lease` from now, and
/// records `task` as the upstream's task that runs it.
pub(crate) async fn relay(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    id: InvocationId,
    owner: &str,
    task: &str,
    lease: Duration,
) -> Result<Invocation, LedgerError> {
    let inv = batch.load_required(tx, id).await?;
    let held = inv.lease.as_ref().is_some_and(|l| l.owner == owner);
    if inv.state != S::Running || !held {
        return Err(lease_lost(&inv, owner));
    }
    let mut next = inv.clone();
    next.lease = Some(Lease {
        owner: RELAY_OWNER.to_owned(),
        deadline: batch.now + lease,
    });
    let saved = batch
        .save_or(tx, &inv, next, |now| lease_lost(now, owner))
        .await?;
    // A re-run of an idempotent row (LEDGER-8) replaces the task its earlier run was handed to.
    tx.inner
        .execute(
            "INSERT INTO relayed_tasks (invocation_id, upstream_task, relayed_at) \
             VALUES ($1, $2, $3) ON CONFLICT (invocation_id) DO UPDATE SET \
             upstream_task = $2, relayed_at = $3",
            &[
                id.to_string().into(),
                task.to_owned().into(),
                to_micros(batch.now).into(),
            ],
        )
        .await?;
    Ok(saved)
}

/// The upstream task row `id` was handed to, if it was.
pub(crate) async fn upstream_task(
    pool: &DbPool,
    id: InvocationId,
) -> Result<Option<String>, LedgerError> {
    let row = pool
        .fetch_optional(
            "SELECT upstream_task FROM relayed_tasks WHERE invocation_id = $1",
            &[id.to_string().into()],
        )
        .await?;
    Ok(row.map(|r| r.req_text("upstream_task")).transpose()?)
}
