//! The operator's log of a call (docs/rules.md OPS-11): one `tracing` event where each step
//! happens — received, parked (with how to decide it), proposed, executed, failed, in doubt.
//!
//! Guarantees: events carry names, ids, states, kinds and durations only — never an argument's
//! value, a result, an error's text (it may quote an upstream's body) or a credential.

use std::sync::Arc;
use std::time::Duration;

use airlock_ledger::{Invocation, InvocationState};

use super::CallContext;

/// The target of every event here, of `decided` and of the sweeper's `in doubt`, the same
/// whichever module (or crate) emits it:
/// `AIRLOCK_LOG=warn,airlock::events=info` shows the calls and nothing else.
pub const TARGET: &str = "airlock::events";

/// How an operator decides a parked row — the command and the route, as the binary that serves
/// knows them (its directory, its routes); logged with every park. Returns `None` for a row it
/// has nothing to say about.
pub type HowToDecide = Arc<dyn Fn(&Invocation) -> Option<String> + Send + Sync>;

/// A call arrived on the one path, before anything is recorded.
pub(super) fn received(ctx: &CallContext, tool: &str) {
    let (scope, principal) = (&ctx.scope, ctx.principal.as_deref());
    tracing::info!(
        target: TARGET,
        tool,
        %scope,
        principal,
        channel = ctx.channel,
        "call received"
    );
}

/// A row just recorded (or parked for its principal's credential): parked for a person (with
/// how to decide it) or kept as a proposal.
/// Other states are told by the steps that follow (executed, failed).
pub(super) fn recorded(row: &Invocation, how: Option<&HowToDecide>) {
    let (id, tool, state) = (&row.id, row.tool.as_str(), row.state.as_str());
    match row.state {
        InvocationState::AwaitingApproval | InvocationState::AwaitingAnswer => {
            let decide = how.and_then(|how| how(row));
            let decide = decide.as_deref();
            let principal = row.principal.as_deref();
            tracing::info!(target: TARGET, %id, tool, principal, state, decide, "parked");
        }
        InvocationState::Proposed => {
            tracing::info!(target: TARGET, %id, tool, "proposed: nothing ran");
        }
        // CALL-12: nothing was sent; its principal must provide their credential.
        InvocationState::AwaitingCredential => {
            let principal = row.principal.as_deref();
            let how = row.error.as_ref().map(|e| e.message.as_str());
            tracing::info!(target: TARGET, %id, tool, principal, state, how, "parked");
        }
        _ => {}
    }
}

/// Why an in-doubt row needs a person, in its log line.
const IN_DOUBT: &str =
    "no answer to an at-most-once call: it may have run; settle it with `airlock resolve`";

/// A claimed row finished after `took` of execution: executed, failed (by kind) or in doubt.
pub(super) fn ran(row: &Invocation, took: Duration) {
    let (id, tool, state) = (&row.id, row.tool.as_str(), row.state.as_str());
    let duration_ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
    let kind = row.error.as_ref().map(|e| e.kind.as_str());
    match row.state {
        InvocationState::Succeeded => {
            let outcome = "succeeded";
            tracing::info!(target: TARGET, %id, tool, outcome, duration_ms, "executed");
        }
        InvocationState::Failed => {
            tracing::info!(target: TARGET, %id, tool, kind, duration_ms, "failed");
        }
        InvocationState::InDoubt => {
            let why = IN_DOUBT;
            tracing::warn!(target: TARGET, %id, tool, kind, duration_ms, why, "in doubt");
        }
        // The run's answer lost to a person's settlement meanwhile (LEDGER-20): that decision
        // was logged where it was taken.
        _ => tracing::debug!(target: TARGET, %id, tool, state, duration_ms, "run superseded"),
    }
}

/// A row refused before it ran (bad arguments, rate limit, a stale approval, a tool gone).
pub(super) fn refused(row: &Invocation) {
    let (id, tool) = (&row.id, row.tool.as_str());
    let kind = row.error.as_ref().map(|e| e.kind.as_str());
    tracing::info!(target: TARGET, %id, tool, kind, ran = false, "failed");
}
