//! The background worker of a serving gateway: runs approved calls nobody has claimed —
//! approved from the CLI or another process, or left approved when a process restarted — so
//! an approval runs even if no client ever comes back. An agent run's approved calls are left
//! to the run, which claims them when it resumes (docs/rules.md AGENT-12).
//!
//! Woken at start, whenever the ledger signals that a row became approved (in this process or
//! another: `Reads::approvals`, DECIDE-13), and by a slow safety-net poll ([`SAFETY_NET`]) for
//! a signal that never arrived, it lists approved-but-unclaimed rows and runs each through
//! [`Gateway::continue_approved`]. Exactly once comes from the ledger's claim: a waiter,
//! another process's worker or this one may race for a row, and only one runs it. On stop it
//! claims nothing new and lets the calls it started finish. An approved call a freeze holds
//! back (POLICY-53) is set aside until a freeze is lifted, and each look lists that many more
//! rows, so held calls never crowd out the approvals behind them. With `[telemetry]` each call
//! it runs begins a trace of its own (docs/rules.md OPS-82); a look starts no span.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use crate::gateway::Gateway;
use crate::outcome::OutcomeKind;
use airlock_egress::trace::{child_span, within};
use airlock_ledger::{InvocationId, InvocationState};
use opentelemetry::KeyValue;
use opentelemetry::trace::SpanKind;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// How often the worker looks for approved rows without being signalled: only a signal lost
/// on the way (a dropped `LISTEN` connection, a full wake socket) waits this long.
pub const SAFETY_NET: Duration = Duration::from_secs(30);
/// The most rows picked up per look.
const BATCH: u32 = 64;

/// Runs until `stop` is cancelled, then waits for the calls it started. Spawn it once per
/// process.
pub async fn work(gateway: Arc<Gateway>, stop: CancellationToken) {
    work_polling_every(gateway, stop, SAFETY_NET).await;
}

/// [`work`] with the safety-net poll every `safety_net` (tests: a long one shows the signal,
/// not the poll, woke the worker).
pub async fn work_polling_every(
    gateway: Arc<Gateway>,
    stop: CancellationToken,
    safety_net: Duration,
) {
    let mut approvals = gateway.store().approvals();
    let mut lifted = gateway.freezes().lifted();
    let mut tick = tokio::time::interval(safety_net);
    let mut running = JoinSet::new();
    let mut tasks: HashMap<tokio::task::Id, InvocationId> = HashMap::new();
    let mut in_flight: HashSet<InvocationId> = HashSet::new();
    let mut held: HashSet<InvocationId> = HashSet::new();
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            Some(done) = running.join_next_with_id() => {
                let (task, frozen) = match done {
                    Ok((task, frozen)) => (task, frozen),
                    Err(error) => (error.id(), false),
                };
                if let Some(id) = tasks.remove(&task) {
                    in_flight.remove(&id);
                    if frozen {
                        held.insert(id);
                    }
                }
                continue;
            }
            _ = tick.tick() => {}
            // A closed signal (its store gone) leaves the poll.
            Ok(()) = approvals.changed() => {}
            // Approved calls a freeze held back run once it is lifted (POLICY-53).
            Ok(()) = lifted.changed() => held.clear(),
        }
        // Seen before the listing: an approval committed after this line signals again.
        approvals.borrow_and_update();
        let limit = BATCH.saturating_add(u32::try_from(held.len()).unwrap_or(u32::MAX));
        let rows = match gateway.store().approved_unclaimed(limit).await {
            Ok(rows) => rows,
            Err(error) => {
                tracing::error!(%error, "listing approved calls failed");
                continue;
            }
        };
        // A held call no longer listed was decided otherwise (denied, expired, claimed).
        held.retain(|id| rows.iter().any(|row| row.id == *id));
        for row in rows {
            if !held.contains(&row.id) && in_flight.insert(row.id) {
                let gateway = Arc::clone(&gateway);
                let handle = running.spawn(run_one(gateway, row.id));
                tasks.insert(handle.id(), row.id);
            }
        }
    }
    while running.join_next().await.is_some() {}
}

/// Runs the approved call `id`, each in a trace of its own (`run approved call`, docs/rules.md
/// OPS-82: one span per call, none per look); whether a freeze held it back (it is still
/// approved).
async fn run_one(gateway: Arc<Gateway>, id: InvocationId) -> bool {
    let cx = gateway.trace_parent().and_then(|parent| {
        let attributes = vec![KeyValue::new("airlock.invocation.id", id.to_string())];
        child_span(&parent, "run approved call", SpanKind::Internal, attributes)
    });
    let outcome = match within(cx.as_ref(), gateway.continue_approved(id)).await {
        Ok(outcome) => outcome,
        Err(error) => {
            tracing::error!(%id, %error, "running an approved call failed");
            return false;
        }
    };
    let row = outcome.invocation();
    match outcome.kind() {
        OutcomeKind::Completed
        | OutcomeKind::Denied
        | OutcomeKind::Expired
        | OutcomeKind::Abandoned
        | OutcomeKind::InputRequired => {
            // The run itself is logged where it finished (executed, failed, in doubt).
            tracing::debug!(%id, tool = %row.tool, state = %row.state, "worker ran an approved call");
        }
        OutcomeKind::Parked | OutcomeKind::Proposed => {
            tracing::debug!(%id, state = %row.state, "approved call not run by the worker");
        }
    }
    row.state == InvocationState::Approved
}
