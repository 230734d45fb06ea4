//! A call its upstream runs as a task, seen from the endpoint: one look at the upstream
//! (docs/rules.md MCP-78), with the input requests its task waits on (MCP-83), and the client's
//! answers to them (MCP-84).
//!
//! Guarantees: a look never waits (nothing would wake the wait); only the caller who made the
//! call, through the scope it was made in, may answer (as for `tasks/get`); the answers go to the upstream's task the row was handed, by the id
//! airlock keeps for it; a call whose upstream runs no task of its own, or whose upstream does
//! not take the answers, is refused with -32602 and nothing is recorded.

use airlock_ledger::Invocation;
use airlock_mcp::{Caller, HostCall, HostError};
use airlock_spec::ScopeId;
use serde_json::{Map, Value};

use super::{host_call, internal};
use crate::gateway::{Gateway, Updated, is_relayed};
use crate::outcome::Outcome;

impl Gateway {
    /// One look at the upstream of the relayed `row`: the call while its upstream's task runs,
    /// with the input requests it waits on; `Err` with the row once the look settled it.
    pub(super) async fn look_relayed(
        &self,
        row: Invocation,
    ) -> Result<Result<HostCall, Invocation>, HostError> {
        let (row, asks) = self.follow_relayed(row).await.map_err(|e| internal(&e))?;
        if !is_relayed(&row) {
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
            .update_relayed(&row, responses)
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
}
