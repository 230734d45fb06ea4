//! Decisions, shared by every surface (HTTP API, CLI, the MCP endpoint's inbox): one ledger
//! transition by a named person, then — for an approval — the call runs through the gateway's
//! claim in a background task, never inside the person's request. Whoever claims first runs
//! it exactly once. What waits for a person is listed by [`pending`]; approvals nobody
//! waits for are run by the [`worker`].

pub mod pending;
pub mod worker;

use std::sync::Arc;

use airlock_ledger::{Decision, Invocation, InvocationId, InvocationState};

use crate::gateway::{Gateway, GatewayError};

/// Records `decision` on `id` by `decider`; an approved row is then run in the background.
///
/// # Errors
/// The ledger's refusal: a second decision (naming the first), a wrong state, an expired row.
pub async fn decide(
    gateway: &Arc<Gateway>,
    id: InvocationId,
    decider: &str,
    decision: Decision,
) -> Result<Invocation, GatewayError> {
    let row = gateway.store().decide(id, decider, decision).await?;
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
