//! The resume worker of a serving process (docs/rules.md AGENT-7): resumes parked runs whose
//! last waiting call was decided — from the HTTP API, the CLI, an inbox, this process or
//! another — including runs parked before a restart.
//!
//! Woken at start, whenever the ledger signals that a run's call was settled by a person (or
//! became approved, or expired: `Store::approvals`), and by a slow safety-net poll
//! ([`SAFETY_NET`]) for a signal that never arrived. It lists parked root runs and asks the
//! ledger to resume each; exactly once comes from `resume_run`'s compare-and-swap: of every
//! worker, in every process, one caller gets `Resumed` and drives the run. On stop it resumes
//! nothing new and lets the runs it drives reach their next stop.

use std::collections::HashSet;
use std::time::Duration;

use airlock_ledger::{ResumeOutcome, RunId};
use tokio::sync::oneshot;
use tokio::task::JoinSet;

use super::Agents;

/// How often the worker looks without being signalled.
pub const SAFETY_NET: Duration = Duration::from_secs(30);
/// The most parked runs looked at per wake.
const BATCH: u32 = 64;

/// Runs until `stop` fires, then waits for the runs it resumed. Spawn it once per process.
pub async fn work(agents: Agents, stop: oneshot::Receiver<()>) {
    work_polling_every(agents, stop, SAFETY_NET).await;
}

/// [`work`] with the safety-net poll every `safety_net`.
pub async fn work_polling_every(
    agents: Agents,
    mut stop: oneshot::Receiver<()>,
    safety_net: Duration,
) {
    let mut signal = agents.store().approvals();
    let mut tick = tokio::time::interval(safety_net);
    let mut running: JoinSet<RunId> = JoinSet::new();
    let mut driving: HashSet<RunId> = HashSet::new();
    loop {
        tokio::select! {
            _ = &mut stop => break,
            Some(done) = running.join_next() => {
                if let Ok(id) = done {
                    driving.remove(&id);
                }
                continue;
            }
            _ = tick.tick() => {}
            // A closed signal (its store gone) leaves the poll.
            Ok(()) = signal.changed() => {}
        }
        // Seen before the listing: a decision committed after this line signals again.
        signal.borrow_and_update();
        for id in resumable(&agents, &driving).await {
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
    while running.join_next().await.is_some() {}
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
        match store.resume_run(id).await {
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
