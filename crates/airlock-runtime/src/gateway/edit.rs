//! Judging the arguments a person edits into an approval (docs/rules.md DECIDE-20, DECIDE-21)
//! before the ledger records it.
//!
//! Guarantees: an edited approval is recorded only when its arguments pass every check that
//! reads arguments when a call is recorded — the tool's input schema (with its defaults), a
//! proposal's size bound, and the tool's limits, whose shares must stay what the proposed
//! arguments reserved (the budgets were judged and reserved when the call was recorded, and
//! are not judged again). The checks that do not read arguments (access, approval policy,
//! rate limit) stand as they were; a freeze is judged at the decision as for any approval. A
//! row that cannot take an approval is left to the ledger, which refuses it by its state.

use airlock_ledger::{InvocationId, InvocationState};
use serde_json::Value;

use super::{Gateway, GatewayError, budget, validate};
use crate::error::ToolError;
use crate::session;

impl Gateway {
    /// Refuses `arguments` as the edit of row `id`'s approval when they fail a check
    /// (DECIDE-21); nothing is recorded either way.
    ///
    /// # Errors
    /// [`GatewayError::BadEdit`] naming what is wrong; the ledger's, reading the row.
    pub(crate) async fn judge_edit(
        &self,
        id: InvocationId,
        arguments: &Value,
    ) -> Result<(), GatewayError> {
        let row = self.store.get(id).await?;
        let approvable = matches!(
            row.state,
            InvocationState::AwaitingApproval | InvocationState::Proposed
        );
        if !approvable {
            return Ok(());
        }
        let opened = self.store.get_session(row.session_id).await?;
        let tool = session::scope(&opened).and_then(|s| self.resolve(&s, &row.tool).ok());
        let problem = match tool {
            Some((_, tool)) => validate(tool, arguments)
                .or_else(|| budget::edit_refusal(&tool.spec, &row.arguments, arguments)),
            None => Some(ToolError::bad_declaration(format!(
                "tool `{}` is no longer declared in this call's scope",
                row.tool
            ))),
        };
        match problem {
            Some(error) => Err(GatewayError::BadEdit { id, error }),
            None => Ok(()),
        }
    }
}
