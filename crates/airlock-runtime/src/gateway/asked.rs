//! A request an upstream sends during a call, relayed to the MCP client on its call's stream,
//! as a ledger row (docs/rules.md MCP-96, LEDGER-87).
//!
//! Guarantees: the row is recorded and claimed by this process before the request is sent to
//! the client, under the caller's principal, on channel `mcp` in a session of the request's
//! scope, with call id [`RELAYED_CALL_ID`], the method as its tool and the request's params (and
//! the call that asked) as its arguments. The client's answer settles it wherever it arrives
//! (`Store::answer_relayed`); the process that relayed it learns the answer through the
//! ledger's change notifications, renewing the row's lease while it waits, so a live wait is
//! never taken for a crash. A wait that ends unanswered — the call's session is over — fails
//! the row; a process that dies while it waits leaves it to the sweeper, in doubt.

use std::future::Future;

use airlock_ledger::{Invocation, InvocationId, InvocationState, RELAYED_CALL_ID};
use airlock_spec::ScopeId;
use serde_json::Value;

use super::{Gateway, GatewayError, reads};
use crate::error::{ToolError, ToolErrorKind};

/// The relayed requests' side of the gateway.
pub(crate) struct Asked<'g>(&'g Gateway);

impl Gateway {
    /// The relayed requests' side of the gateway.
    pub(crate) fn asked(&self) -> Asked<'_> {
        Asked(self)
    }
}

impl Asked<'_> {
    /// Records and claims the row of `method` with `arguments` (the request's params, the call
    /// that asked, the client's session), relayed to `principal`'s client, in a session of
    /// `scope`.
    pub(crate) async fn record(
        &self,
        (scope, principal): (&ScopeId, &str),
        method: &str,
        arguments: Value,
    ) -> Result<InvocationId, GatewayError> {
        let who = (scope, principal);
        let (opened, new) = reads::endpoint_row(self.0, who, (RELAYED_CALL_ID, method), arguments)?;
        let row = reads::record_with_session(self.0, opened, new).await?;
        Ok(row.id)
    }

    /// Waits for the relayed request `id` to be answered and returns its row as the answer
    /// left it; when `gone` resolves first (nobody waits for the answer any more), the row is
    /// failed and returned so.
    pub(crate) async fn answered(
        &self,
        id: InvocationId,
        gone: impl Future<Output = ()>,
    ) -> Result<Invocation, GatewayError> {
        tokio::pin!(gone);
        let gateway = self.0;
        let mut row = gateway.store.get(id).await?;
        while row.state == InvocationState::Running {
            let renew_at = tokio::time::Instant::now() + gateway.lease / 3;
            tokio::select! {
                changed = gateway.store.wait_for_change(id, Some(row.version), renew_at) => {
                    row = changed?;
                    if row.state == InvocationState::Running
                        && tokio::time::Instant::now() >= renew_at
                    {
                        gateway.renew(id).await;
                    }
                }
                () = &mut gone => {
                    let unanswered = ToolError::new(
                        ToolErrorKind::Timeout,
                        "the call ended before its client answered",
                    );
                    return gateway.finish(id, Err(unanswered)).await;
                }
            }
        }
        Ok(row)
    }
}
