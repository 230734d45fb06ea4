//! Calls an upstream runs as a task of its own (docs/rules.md MCP-76 to MCP-79, LEDGER-64 to
//! LEDGER-66): the claimed row is handed to the upstream's task; the MCP endpoint follows it
//! when its client asks and settles it once (`mcp_host::upstream_task`).
//!
//! Guarantees: the row stays `running` under the relay's lease while the upstream works, so any
//! replica can follow it after any restart; a task nobody follows for [`RELAY_LEASE`] is left
//! to the sweeper, as a call whose runner went away. The client's answers go to the upstream's
//! task by the id the row was handed (MCP-84), so the client never sees nor names the
//! upstream's id.

use std::time::Duration;

use airlock_ledger::ToolErrorKind;
use airlock_ledger::{Invocation, InvocationId, InvocationState, LedgerError};
use airlock_mcp::UpstreamTask;

use super::{Gateway, GatewayError};
use crate::outcome::Outcome;

/// How long a relayed row's lease lasts past the last look that found its upstream's task still
/// working (docs/rules.md LEDGER-66, airlock's choice).
pub(crate) const RELAY_LEASE: Duration = Duration::from_secs(24 * 60 * 60);

/// The upstream's message, when `row` is a relayed call whose upstream task failed at the
/// protocol level (MCP-78): a `failed` task to the endpoint, not a tool error.
pub(crate) fn task_failure(row: &Invocation) -> Option<&str> {
    let error = row.error.as_ref()?;
    let failed = row.state == InvocationState::Failed && error.kind == ToolErrorKind::TaskFailed;
    failed.then_some(error.message.as_str())
}

impl Gateway {
    /// Hands the row this gateway claimed to the upstream's `task` (LEDGER-64). A lease lost
    /// meanwhile (a stall the sweeper saw) leaves the row as the sweeper or a person left it.
    pub(super) async fn relay(
        &self,
        id: InvocationId,
        task: UpstreamTask,
    ) -> Result<Outcome, GatewayError> {
        let relayed = self
            .store
            .relay_task(id, &self.owner, task.id, RELAY_LEASE)
            .await;
        match relayed {
            Ok(row) => Ok(Outcome::from_row(row)),
            Err(LedgerError::LeaseLost { .. }) => Ok(Outcome::from_row(self.store.get(id).await?)),
            Err(e) => Err(e.into()),
        }
    }
}
