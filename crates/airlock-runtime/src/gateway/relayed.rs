//! Calls an upstream runs as a task of its own (docs/rules.md MCP-76 to MCP-79, LEDGER-64 to
//! LEDGER-66): the claimed row is handed to the upstream's task, followed when its client asks,
//! and settled once.
//!
//! Guarantees: the row stays `running` under the relay's lease while the upstream works, so any
//! replica can follow it after any restart; each `tasks/get` asks the upstream once (through the
//! egress guard, under the call's deadline) and, when the upstream's task has settled, finishes
//! the row with its result or error in one commit — of concurrent followers exactly one wins the
//! finish, the others read the row it left. An upstream that cannot be asked leaves the row as
//! it is. Each look that finds the task still working (or waiting for the client's input, whose
//! requests the look hands back, never stored: MCP-83) renews the relay lease; a task nobody
//! follows for [`RELAY_LEASE`] is left to the sweeper, as a call whose runner went away. The
//! client's answers go to the upstream's task by the id the row was handed (MCP-84), so the
//! client never sees nor names the upstream's id.

use std::time::Duration;

use airlock_ledger::{
    Invocation, InvocationId, InvocationState, LedgerError, RELAY_OWNER, ToolError, ToolErrorKind,
};
use airlock_mcp::{McpClient, McpTarget, UpstreamTask, UpstreamTaskState};
use serde_json::{Map, Value};

use super::{Gateway, GatewayError};
use crate::error::mcp_error;
use crate::execute::mcp;
use crate::outcome::Outcome;
use crate::session;

/// How long a relayed row's lease lasts past the last look that found its upstream's task still
/// working (docs/rules.md LEDGER-66, airlock's choice).
pub(crate) const RELAY_LEASE: Duration = Duration::from_secs(24 * 60 * 60);

/// How the stored error of a relayed call whose upstream task failed begins (MCP-78).
pub(crate) const TASK_FAILED: &str = "the upstream's task failed: ";

/// A relayed row as one look left it, with the input requests its upstream's task waits on.
pub(crate) type Followed = (Invocation, Option<Map<String, Value>>);

/// What became of the client's answers to a relayed task's input requests (MCP-84).
#[derive(Debug)]
pub(crate) enum Updated {
    /// The upstream took them.
    Sent,
    /// The row is not a call its upstream runs as a task.
    NotRelayed,
    /// The upstream could not be asked, or refused them.
    Refused,
}

/// Whether `row` is a call its upstream runs as a task that airlock follows.
pub(crate) fn is_relayed(row: &Invocation) -> bool {
    row.state == InvocationState::Running
        && row.lease.as_ref().is_some_and(|l| l.owner == RELAY_OWNER)
}

/// The upstream's message, when `row` is a relayed call whose upstream task failed at the
/// protocol level (MCP-78): a `failed` task to the endpoint, not a tool error.
pub(crate) fn task_failure(row: &Invocation) -> Option<&str> {
    let relayed = row.lease.as_ref().is_some_and(|l| l.owner == RELAY_OWNER);
    let error = row.error.as_ref().filter(|_| relayed)?;
    let failed = row.state == InvocationState::Failed && error.kind == ToolErrorKind::UpstreamError;
    failed
        .then(|| error.message.strip_prefix(TASK_FAILED))
        .flatten()
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

    /// Asks the upstream where the task of the relayed `row` stands and settles the row once the
    /// task has (MCP-78); a task waiting for input hands back its requests (MCP-83). Any other
    /// row is returned as it is.
    pub(crate) async fn follow_relayed(&self, row: Invocation) -> Result<Followed, GatewayError> {
        let Some((client, target, task)) = self.relayed_target(&row).await? else {
            return Ok((row, None));
        };
        match client.task_state(&target, &task).await {
            Ok(UpstreamTaskState::InputRequired(asks)) => {
                let renewed = self.renew_relay(row.id).await?;
                Ok((renewed, Some(asks)))
            }
            Ok(state) => Ok((self.settle_relayed(row, state).await?, None)),
            Err(error) => {
                tracing::warn!(invocation = %row.id, %error, "the upstream's task could not be read; it is asked again at the next tasks/get");
                Ok((row, None))
            }
        }
    }

    /// Sends the client's `responses` to the upstream's task of the relayed `row` (MCP-84).
    pub(crate) async fn update_relayed(
        &self,
        row: &Invocation,
        responses: &Map<String, Value>,
    ) -> Result<Updated, GatewayError> {
        let Some((client, target, task)) = self.relayed_target(row).await? else {
            return Ok(Updated::NotRelayed);
        };
        match client.update_task(&target, &task, responses).await {
            Ok(()) => Ok(Updated::Sent),
            Err(error) => {
                tracing::warn!(invocation = %row.id, %error, "the upstream did not take the answers to its task's input requests");
                Ok(Updated::Refused)
            }
        }
    }

    /// Forwards a cancel of the relayed `row` to its upstream, then follows the task, so the
    /// cancellation is recorded once the upstream reports it (MCP-79). Any other row is returned
    /// as it is.
    pub(crate) async fn cancel_relayed(&self, row: Invocation) -> Result<Invocation, GatewayError> {
        let Some((client, target, task)) = self.relayed_target(&row).await? else {
            return Ok(row);
        };
        if let Err(error) = client.cancel_task(&target, &task).await {
            tracing::warn!(invocation = %row.id, %error, "the upstream refused to cancel its task");
        }
        Ok(self.follow_relayed(row).await?.0)
    }

    /// Where the relayed `row`'s upstream is and its task id there; `None` for a row that is not
    /// relayed, or whose tool is no longer declared in its scope (its lease then lapses to the
    /// sweeper).
    async fn relayed_target(
        &self,
        row: &Invocation,
    ) -> Result<Option<(&McpClient, McpTarget, String)>, GatewayError> {
        if !is_relayed(row) {
            return Ok(None);
        }
        let Some(task) = self.store.relayed_task(row.id).await? else {
            return Ok(None);
        };
        let opened = self.store.get_session(row.session_id).await?;
        let Some(scope) = session::scope(&opened) else {
            return Ok(None);
        };
        let Ok((_, tool)) = self.resolve(&scope, &row.tool) else {
            return Ok(None);
        };
        let supplied = match self.supplied_for(&tool.spec, row).await {
            Ok(supplied) => supplied,
            Err(error) => {
                tracing::warn!(invocation = %row.id, %error, "the connection of a relayed task cannot be reached");
                return Ok(None);
            }
        };
        match self
            .executors
            .mcp_target(&tool.spec.source, supplied.as_deref())
        {
            Ok((client, target, _)) => Ok(Some((client, target, task))),
            Err(error) => {
                tracing::warn!(invocation = %row.id, %error, "the upstream of a relayed task cannot be reached as declared");
                Ok(None)
            }
        }
    }

    /// Settles the relayed `row` by its task's `state`, or renews the relay lease while it works.
    async fn settle_relayed(
        &self,
        row: Invocation,
        state: UpstreamTaskState,
    ) -> Result<Invocation, GatewayError> {
        let result = match state {
            UpstreamTaskState::Working | UpstreamTaskState::InputRequired(_) => {
                return self.renew_relay(row.id).await;
            }
            UpstreamTaskState::Completed(Ok(result)) => Ok(mcp::stored(&result)),
            UpstreamTaskState::Completed(Err(error)) => Err(mcp_error(error)),
            UpstreamTaskState::Failed(message) => Err(ToolError::new(
                ToolErrorKind::UpstreamError,
                format!("{TASK_FAILED}{message}"),
            )),
            UpstreamTaskState::Cancelled => Err(ToolError::new(
                ToolErrorKind::ToolFailed,
                "cancelled: the upstream's task was cancelled before it finished",
            )),
        };
        // Finished in the relay's name: of concurrent followers one wins the row's
        // compare-and-swap, and the others read what it left (LEDGER-65).
        let finished = self.store.finish(row.id, RELAY_OWNER, result).await;
        self.as_left(row.id, finished).await
    }

    /// Renews the relay lease of the row `id`, whose upstream's task is not done.
    async fn renew_relay(&self, id: InvocationId) -> Result<Invocation, GatewayError> {
        let renewed = self.store.renew_lease(id, RELAY_OWNER, RELAY_LEASE).await;
        self.as_left(id, renewed).await
    }

    /// The row a relay write left; if another follower (or the sweeper, or a person) changed it
    /// first, the row as it stands.
    async fn as_left(
        &self,
        id: InvocationId,
        written: Result<Invocation, LedgerError>,
    ) -> Result<Invocation, GatewayError> {
        match written {
            Ok(row) => Ok(row),
            Err(LedgerError::LeaseLost { .. } | LedgerError::AlreadyFinished { .. }) => {
                Ok(self.store.get(id).await?)
            }
            Err(e) => Err(e.into()),
        }
    }
}
