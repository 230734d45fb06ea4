//! Decisions, shared by every surface (HTTP API, CLI, the MCP endpoint's inbox): one ledger
//! transition by a named person, then — for an approval — the call runs through the gateway's
//! claim in a background task, never inside the person's request. Whoever claims first runs
//! it exactly once. What waits for a person is listed by [`pending`]; approvals nobody
//! waits for are run by the [`worker`].

pub mod pending;
pub mod worker;

use std::sync::Arc;

use airlock_ledger::{Decision, Invocation, InvocationId, InvocationState, LedgerError, Store};

use crate::gateway::{EVENTS, Gateway, GatewayError};

/// Records `decision` on `id` by `decider`, taken on `surface` (`api`, `cli`, `mcp`); an
/// approved row is then run in the background.
///
/// # Errors
/// The ledger's refusal: a second decision (naming the first), a wrong state, an expired row.
pub async fn decide(
    gateway: &Arc<Gateway>,
    id: InvocationId,
    decider: &str,
    decision: Decision,
    surface: &'static str,
) -> Result<Invocation, GatewayError> {
    let row = record(gateway.store().as_ref(), id, decider, decision, surface).await?;
    if row.state == InvocationState::Approved {
        let gateway = Arc::clone(gateway);
        tokio::spawn(async move {
            if let Err(error) = gateway.continue_approved(id).await {
                tracing::error!(%id, %error, "running an approved call failed");
            }
        });
    }
    Ok(row)
}

/// The ledger transition of every decision, wherever it is taken (a process without a
/// gateway, like the CLI, too), logged once as `decided` (docs/rules.md OPS-11): who, what,
/// from which surface — never a reason's, an answer's or a note's text.
///
/// # Errors
/// The ledger's refusal, as [`decide`].
pub async fn record(
    store: &dyn Store,
    id: InvocationId,
    decider: &str,
    decision: Decision,
    surface: &'static str,
) -> Result<Invocation, LedgerError> {
    let (what, resolution) = match &decision {
        Decision::Approve => ("approve", None),
        Decision::Deny { .. } => ("deny", None),
        Decision::Answer { .. } => ("answer", None),
        Decision::Resolve { resolution, .. } => ("resolve", Some(resolution.as_str())),
        Decision::Record { .. } => ("record", None),
    };
    let row = store.decide(id, decider, decision).await?;
    tracing::info!(
        target: EVENTS,
        %id,
        tool = row.tool,
        by = decider,
        decision = what,
        resolution,
        state = row.state.as_str(),
        surface,
        "decided"
    );
    // OPS-29: counted by the process that took it (a CLI decision: the CLI's own process).
    metrics::counter!("airlock_decisions_total", "surface" => surface, "decision" => what)
        .increment(1);
    Ok(row)
}
