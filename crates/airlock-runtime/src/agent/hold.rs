//! The lease on a root run this process drives (docs/rules.md AGENT-57, AGENT-58).
//!
//! Guarantees:
//! - while this process drives a root run it renews the run's lease every third of its length,
//!   so a live driver is never taken for a dead one;
//! - once the ledger says another process holds the run (it took the run over after the lease
//!   ran out: this process stalled), this process stops driving it at once, writing nothing
//!   more for it: exactly one process drives a run at a time (AGENT-58). What was cut off is
//!   settled as after a crash — the new driver replays the run from the ledger.

use std::future::Future;
use std::time::Duration;

use airlock_ledger::{RunId, RunLease, Store};

use super::Agents;
use super::types::AgentError;

/// The shortest renewal period (a lease of a few milliseconds in a test still renews sanely).
const MIN_PERIOD: Duration = Duration::from_millis(10);

/// Runs `driving` (the driving of root run `run`) while this process holds the run's lease,
/// renewing it; `Ok(())` without finishing `driving` when the lease was lost.
pub(super) async fn while_held<F>(agents: &Agents, run: RunId, driving: F) -> Result<(), AgentError>
where
    F: Future<Output = Result<(), AgentError>>,
{
    let lease = agents.gateway().run_lease();
    tokio::select! {
        biased;
        driven = driving => driven,
        () = renew_until_lost(agents.store(), run, &lease) => {
            tracing::warn!(target: crate::EVENTS, %run, "the run's lease was lost: another process drives it now; this one stops");
            Ok(())
        }
    }
}

/// Renews `lease` on `run` every third of its length; returns once another owner holds it. A
/// failed renewal (the database unreachable for a moment) is tried again at the next tick:
/// only the ledger's answer that someone else holds the run ends the hold.
async fn renew_until_lost(store: &dyn Store, run: RunId, lease: &RunLease) {
    let mut tick = tokio::time::interval((lease.ttl / 3).max(MIN_PERIOD));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first tick is immediate; the lease was just granted.
    tick.tick().await;
    loop {
        tick.tick().await;
        match store.renew_run_lease(run, &lease.owner, lease.ttl).await {
            Ok(true) => {}
            Ok(false) => return,
            Err(error) => {
                tracing::warn!(%run, %error, "renewing the run's lease failed; retrying at the next tick");
            }
        }
    }
}
