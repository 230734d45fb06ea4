//! A call its upstream runs as a task, seen from the endpoint: one look at the upstream
//! (docs/rules.md MCP-78), with the input requests its task waits on (MCP-83), and the client's
//! answers to them (MCP-84).
//!
//! Guarantees: a look never waits (nothing would wake the wait); only the caller who made the
//! call, through the scope it was made in, may answer (as for `tasks/get`); the answers go to the upstream's task the row was handed, by the id
//! airlock keeps for it; a call whose upstream runs no task of its own, or whose upstream does
//! not take the answers, is refused with -32602 and nothing is recorded.
//!
//! Each `tasks/get` asks the upstream once (through the egress guard, under the call's
//! deadline) and, when the upstream's task has settled, finishes the row with its result or
//! error in one commit — of concurrent followers exactly one wins the finish, the others read
//! the row it left. An upstream that cannot be asked leaves the row as it is. Each look that
//! finds the task still working (or waiting for the client's input, whose requests the look
//! hands back, never stored: MCP-83) renews the relay lease.

use airlock_ledger::{
    Invocation, InvocationId, LedgerError, RELAY_OWNER, ToolError, ToolErrorKind,
};
use airlock_mcp::{Caller, HostCall, HostError, McpClient, McpTarget, UpstreamTaskState};
use airlock_spec::ScopeId;
use serde_json::{Map, Value};

use super::view::host_call;
use super::{McpHost, internal};
use crate::error::mcp_error;
use crate::execute::mcp;
use crate::gateway::{GatewayError, RELAY_LEASE};
use crate::outcome::Outcome;
use crate::session;

/// A relayed row as one look left it, with the input requests its upstream's task waits on.
type Followed = (Invocation, Option<Map<String, Value>>);

/// What became of the client's answers to a relayed task's input requests (MCP-84).
#[derive(Debug)]
enum Updated {
    /// The upstream took them.
    Sent,
    /// The row is not a call its upstream runs as a task.
    NotRelayed,
    /// The upstream could not be asked, or refused them.
    Refused,
}

impl McpHost {
    /// One look at the upstream of the relayed `row`: the call while its upstream's task runs,
    /// with the input requests it waits on; `Err` with the row once the look settled it.
    pub(super) async fn look_at_upstream_task(
        &self,
        row: Invocation,
    ) -> Result<Result<HostCall, Invocation>, HostError> {
        let (row, asks) = self
            .follow_upstream_task(row)
            .await
            .map_err(|e| internal(&e))?;
        if !row.runs_as_upstream_task() {
            return Ok(Err(row));
        }
        let call = host_call(&Outcome::from_row(row));
        Ok(Ok(HostCall {
            task_input: asks,
            ..call
        }))
    }

    pub(super) async fn mcp_update(
        &self,
        scope: &ScopeId,
        caller: &Caller,
        id: &str,
        responses: &Map<String, Value>,
    ) -> Result<(), HostError> {
        let row = self.mcp_row(scope, caller, id).await?;
        let updated = self
            .update_upstream_task(&row, responses)
            .await
            .map_err(|e| internal(&e))?;
        match updated {
            Updated::Sent => Ok(()),
            Updated::NotRelayed => Err(HostError::InvalidParams(format!(
                "task {id} does not wait for input"
            ))),
            Updated::Refused => Err(HostError::InvalidParams(format!(
                "the upstream of task {id} did not take the answers"
            ))),
        }
    }

    /// Asks the upstream where the task of the relayed `row` stands and settles the row once the
    /// task has (MCP-78); a task waiting for input hands back its requests (MCP-83). Any other
    /// row is returned as it is.
    async fn follow_upstream_task(&self, row: Invocation) -> Result<Followed, GatewayError> {
        let Some((client, target, task)) = self.upstream_task_target(&row).await? else {
            return Ok((row, None));
        };
        match client.task_state(&target, &task).await {
            Ok(UpstreamTaskState::InputRequired(asks)) => {
                let renewed = self.renew_relay(row.id).await?;
                Ok((renewed, Some(asks)))
            }
            Ok(state) => Ok((self.settle_upstream_task(row, state).await?, None)),
            Err(error) => {
                tracing::warn!(invocation = %row.id, %error, "the upstream's task could not be read; it is asked again at the next tasks/get");
                Ok((row, None))
            }
        }
    }

    /// Sends the client's `responses` to the upstream's task of the relayed `row` (MCP-84).
    async fn update_upstream_task(
        &self,
        row: &Invocation,
        responses: &Map<String, Value>,
    ) -> Result<Updated, GatewayError> {
        let Some((client, target, task)) = self.upstream_task_target(row).await? else {
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
    pub(super) async fn cancel_upstream_task(
        &self,
        row: Invocation,
    ) -> Result<Invocation, GatewayError> {
        let Some((client, target, task)) = self.upstream_task_target(&row).await? else {
            return Ok(row);
        };
        if let Err(error) = client.cancel_task(&target, &task).await {
            tracing::warn!(invocation = %row.id, %error, "the upstream refused to cancel its task");
        }
        Ok(self.follow_upstream_task(row).await?.0)
    }

    /// Where the relayed `row`'s upstream is and its task id there; `None` for a row that is not
    /// relayed, or whose tool is no longer declared in its scope (its lease then lapses to the
    /// sweeper).
    async fn upstream_task_target(
        &self,
        row: &Invocation,
    ) -> Result<Option<(&McpClient, McpTarget, String)>, GatewayError> {
        if !row.runs_as_upstream_task() {
            return Ok(None);
        }
        let Some(task) = self.gateway.store().relayed_task(row.id).await? else {
            return Ok(None);
        };
        let opened = self.gateway.store().get_session(row.session_id).await?;
        let Some(scope) = session::scope(&opened) else {
            return Ok(None);
        };
        let Ok((_, tool)) = self.gateway.resolve(&scope, &row.tool) else {
            return Ok(None);
        };
        let supplied = match self.gateway.supplied_for(&tool.spec, row).await {
            Ok(supplied) => supplied,
            Err(error) => {
                tracing::warn!(invocation = %row.id, %error, "the connection of a relayed task cannot be reached");
                return Ok(None);
            }
        };
        // Polling a relayed task serves no request: no caller's token comes with it.
        let downstream = airlock_mcp::Downstream::default();
        let (vault, connections) = (self.gateway.vault(), &self.gateway.executors.connections);
        let call = (&tool.spec, row);
        let carried = match crate::vault::carried(
            vault.map(AsRef::as_ref),
            connections,
            call,
            supplied.as_deref(),
            &downstream,
        )
        .await
        {
            Ok(carried) => carried,
            Err(unresolved) => {
                tracing::warn!(invocation = %row.id, ?unresolved, "the principal's credential for a relayed task is not there");
                return Ok(None);
            }
        };
        let reach = crate::execute::Reach {
            supplied: supplied.as_deref(),
            carried: carried.as_ref().map(|c| &c.pair),
            downstream: &downstream,
        };
        match self.gateway.executors.mcp_target(&tool.spec.source, reach) {
            Ok((client, target, _)) => Ok(Some((client, target, task))),
            Err(error) => {
                tracing::warn!(invocation = %row.id, %error, "the upstream of a relayed task cannot be reached as declared");
                Ok(None)
            }
        }
    }

    /// Settles the relayed `row` by its task's `state`, or renews the relay lease while it works.
    async fn settle_upstream_task(
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
            UpstreamTaskState::Failed(message) => {
                Err(ToolError::new(ToolErrorKind::TaskFailed, message))
            }
            UpstreamTaskState::Cancelled => Err(ToolError::new(
                ToolErrorKind::ToolFailed,
                "cancelled: the upstream's task was cancelled before it finished",
            )),
        };
        // Finished in the relay's name: of concurrent followers one wins the row's
        // compare-and-swap, and the others read what it left (LEDGER-65).
        let finished = self
            .gateway
            .store()
            .finish(row.id, RELAY_OWNER, result)
            .await;
        self.as_left(row.id, finished).await
    }

    /// Renews the relay lease of the row `id`, whose upstream's task is not done.
    async fn renew_relay(&self, id: InvocationId) -> Result<Invocation, GatewayError> {
        let renewed = self
            .gateway
            .store()
            .renew_lease(id, RELAY_OWNER, RELAY_LEASE)
            .await;
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
                Ok(self.gateway.store().get(id).await?)
            }
            Err(e) => Err(e.into()),
        }
    }
}
