//! The client's answers to the input requests of a call its upstream runs as a task
//! (docs/rules.md MCP-84).
//!
//! Guarantees: only the caller who made the call, through the scope it was made in, may answer
//! (as for `tasks/get`); the answers go to the upstream's task the row was handed, by the id
//! airlock keeps for it; a call whose upstream runs no task of its own, or whose upstream does
//! not take the answers, is refused with -32602 and nothing is recorded.

use airlock_mcp::{Caller, HostError};
use airlock_spec::ScopeId;
use serde_json::{Map, Value};

use super::internal;
use crate::gateway::{Gateway, Updated};

impl Gateway {
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
