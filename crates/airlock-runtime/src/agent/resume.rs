//! The resume worker of a serving process (docs/rules.md AGENT-7): resumes parked runs whose
//! last waiting call was decided — from the HTTP API, the CLI, an inbox, this process or
//! another — including runs parked before a restart.
//!
//! Woken at start, whenever the ledger signals that a run's call was settled by a person (or
//! became approved, or expired: `Reads::approvals`), and by a slow safety-net poll
//! ([`SAFETY_NET`]) for a signal that never arrived. It lists parked root runs and asks the
//! ledger to resume each; exactly once comes from `resume_run`'s compare-and-swap: of every
//! worker, in every process, one caller gets `Resumed` and drives the run. On stop it resumes
//! nothing new and lets the runs it drives reach their next stop. With `[telemetry]` each run
//! it drives begins a trace of its own, its `invoke_agent` span (docs/rules.md OPS-82).
//!
//! It also takes over runs left `running` by a process that died (docs/rules.md AGENT-59):
//! every half lease it asks the ledger for running runs whose lease ran out; the ledger hands
//! each to exactly one taker, which drives it from its stored steps as a resumed run.

use std::collections::HashSet;
use std::time::Duration;

use airlock_ledger::{ResumeOutcome, RunId, RunLease};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::Agents;

/// How often the worker looks without being signalled.
pub const SAFETY_NET: Duration = Duration::from_secs(30);
/// The shortest period between looks for runs to take over.
const TAKEOVER_MIN: Duration = Duration::from_millis(100);
/// The most parked runs looked at per wake.
const BATCH: u32 = 64;

/// Runs until `stop` is cancelled, then waits for the runs it resumed. Spawn it once per
/// process.
pub async fn work(agents: Agents, stop: CancellationToken) {
    work_polling_every(agents, stop, SAFETY_NET).await;
}

/// [`work`] with the safety-net poll every `safety_net`.
pub async fn work_polling_every(agents: Agents, stop: CancellationToken, safety_net: Duration) {
    let mut signal = agents.store().approvals();
    let mut tick = tokio::time::interval(safety_net);
    let lease = agents.gateway().run_lease();
    let mut takeover = tokio::time::interval((lease.ttl / 2).min(safety_net).max(TAKEOVER_MIN));
    takeover.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut running: JoinSet<RunId> = JoinSet::new();
    let mut driving: HashSet<RunId> = HashSet::new();
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            Some(done) = running.join_next() => {
                if let Ok(id) = done {
                    driving.remove(&id);
                }
                continue;
            }
            _ = takeover.tick() => {
                let taken = taken_over(&agents, &lease).await;
                drive_all(&agents, taken, &mut running, &mut driving);
                continue;
            }
            _ = tick.tick() => {}
            // A closed signal (its store gone) leaves the poll.
            Ok(()) = signal.changed() => {}
        }
        // Seen before the listing: a decision committed after this line signals again.
        signal.borrow_and_update();
        let resumed = resumable(&agents, &driving).await;
        drive_all(&agents, resumed, &mut running, &mut driving);
    }
    while running.join_next().await.is_some() {}
}

/// Drives each of `ids` (resumed or taken over by this caller) in a task of its own.
fn drive_all(
    agents: &Agents,
    ids: Vec<RunId>,
    running: &mut JoinSet<RunId>,
    driving: &mut HashSet<RunId>,
) {
    for id in ids {
        driving.insert(id);
        let agents = agents.clone();
        running.spawn(async move {
            if let Err(error) = agents.continue_resumed(id).await {
                tracing::error!(run = %id, %error, "a resumed run failed");
            }
            id
        });
    }
}

/// The runs this caller just took over from a driver whose lease ran out (AGENT-59).
async fn taken_over(agents: &Agents, lease: &RunLease) -> Vec<RunId> {
    match agents.store().take_over_runs(lease.clone(), BATCH).await {
        Ok(ids) => {
            for id in &ids {
                tracing::warn!(target: crate::EVENTS, run = %id, "run taken over: its driver's lease ran out (a crash or a stall); resuming it from its stored steps");
            }
            ids
        }
        Err(error) => {
            tracing::error!(%error, "taking over runs failed");
            Vec::new()
        }
    }
}

/// The parked runs this caller just resumed (and is to drive).
async fn resumable(agents: &Agents, driving: &HashSet<RunId>) -> Vec<RunId> {
    let store = agents.store();
    let parked = match store.parked_root_runs(BATCH).await {
        Ok(ids) => ids,
        Err(error) => {
            tracing::error!(%error, "listing parked runs failed");
            return Vec::new();
        }
    };
    let mut resumed = Vec::new();
    for id in parked.into_iter().filter(|id| !driving.contains(id)) {
        match store
            .resume_run_leased(id, agents.gateway().run_lease())
            .await
        {
            Ok(ResumeOutcome::Resumed) => {
                tracing::info!(target: crate::EVENTS, run = %id, "run resumed");
                resumed.push(id);
            }
            Ok(ResumeOutcome::StillWaiting | ResumeOutcome::NotParked(_)) => {}
            Err(error) => tracing::error!(run = %id, %error, "resuming a run failed"),
        }
    }
    resumed
}
