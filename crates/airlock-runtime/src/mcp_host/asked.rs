//! Requests an upstream sends to the caller's client during a call, relayed on the call's
//! stream (docs/rules.md MCP-96, LEDGER-87): each one a ledger row, answered from any replica.
//!
//! Guarantees: only the caller's own relayed request, made through the MCP endpoint of the same
//! scope and still waiting, can be answered (anything else is not found); the answer is the
//! row's outcome — the client's result as it succeeded, the client's JSON-RPC error as it
//! failed, its error object kept whole as the row's message so the upstream gets it back
//! unchanged. The relaying process reads the answer from the row, never from the answering
//! request.

use airlock_ledger::{Invocation, InvocationState, LedgerError};
use airlock_mcp::{AskHost, Caller, ClientAnswer, ClientQuestion, HostError};
use airlock_spec::ScopeId;
use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::{McpHost, internal};
use crate::error::{ToolError, ToolErrorKind};
use airlock_ledger::{RELAYED_CALL_ID, RELAYED_METHODS};

impl AskHost for McpHost {
    fn ask_client<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        question: ClientQuestion,
    ) -> BoxFuture<'a, Result<String, HostError>> {
        Box::pin(self.mcp_ask_client(scope, caller, question))
    }

    fn client_answer<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        id: &'a str,
        gone: BoxFuture<'a, ()>,
    ) -> BoxFuture<'a, Result<ClientAnswer, HostError>> {
        Box::pin(self.mcp_client_answer(scope, caller, id, gone))
    }

    fn client_question<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        id: &'a str,
    ) -> BoxFuture<'a, Result<ClientQuestion, HostError>> {
        Box::pin(self.mcp_client_question(scope, caller, id))
    }

    fn answer_client<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        id: &'a str,
        answer: ClientAnswer,
    ) -> BoxFuture<'a, Result<(), HostError>> {
        Box::pin(self.mcp_answer_client(scope, caller, id, answer))
    }
}

impl McpHost {
    async fn mcp_ask_client(
        &self,
        scope: &ScopeId,
        caller: &Caller,
        question: ClientQuestion,
    ) -> Result<String, HostError> {
        if !RELAYED_METHODS.contains(&question.method.as_str()) {
            return Err(HostError::InvalidParams(format!(
                "{} is not a request a client answers",
                question.method
            )));
        }
        let ClientQuestion {
            method,
            params,
            call,
            session,
        } = question;
        let arguments = json!({"params": params, "call": call, "session": session});
        let who = (scope, caller.principal.as_str());
        let id = self.gateway.asked().record(who, &method, arguments).await;
        id.map(|id| id.to_string()).map_err(|e| internal(&e))
    }

    async fn mcp_client_answer(
        &self,
        scope: &ScopeId,
        caller: &Caller,
        id: &str,
        gone: BoxFuture<'_, ()>,
    ) -> Result<ClientAnswer, HostError> {
        let row = self.asked_row(scope, caller, id).await?;
        let row = self.gateway.asked().answered(row.id, gone).await;
        Ok(answer_of(&row.map_err(|e| internal(&e))?))
    }

    async fn mcp_client_question(
        &self,
        scope: &ScopeId,
        caller: &Caller,
        id: &str,
    ) -> Result<ClientQuestion, HostError> {
        let row = self.asked_row(scope, caller, id).await?;
        if row.state != InvocationState::Running {
            return Err(HostError::NotFound(format!(
                "request {id} is answered already"
            )));
        }
        Ok(ClientQuestion {
            method: row.tool.clone(),
            params: row.arguments["params"].clone(),
            call: row.arguments["call"].as_str().map(str::to_owned),
            session: row.arguments["session"].as_str().map(str::to_owned),
        })
    }

    async fn mcp_answer_client(
        &self,
        scope: &ScopeId,
        caller: &Caller,
        id: &str,
        answer: ClientAnswer,
    ) -> Result<(), HostError> {
        let row = self.asked_row(scope, caller, id).await?;
        let outcome = answer.map_err(|error| {
            // The error object whole, so the upstream gets back what the client said.
            ToolError::new(ToolErrorKind::BadRequest, error.to_string())
        });
        let answered = self
            .gateway
            .store()
            .answer_relayed(row.id, &caller.principal, outcome);
        match answered.await {
            Ok(_) => Ok(()),
            Err(LedgerError::AlreadyFinished { .. } | LedgerError::LeaseLost { .. }) => Err(
                HostError::NotFound(format!("request {id} is answered already")),
            ),
            Err(e) => Err(internal(&e.into())),
        }
    }

    /// The row of the caller's relayed request `id`, seen from `scope`.
    async fn asked_row(
        &self,
        scope: &ScopeId,
        caller: &Caller,
        id: &str,
    ) -> Result<Invocation, HostError> {
        let row = self.mcp_row(scope, caller, id).await?;
        if row.call_id != RELAYED_CALL_ID {
            return Err(HostError::NotFound(format!(
                "request {id} was not relayed to a client"
            )));
        }
        Ok(row)
    }
}

/// What the upstream is handed for the settled row: the client's result, the client's error,
/// or an error saying nobody answered.
fn answer_of(row: &Invocation) -> ClientAnswer {
    match (row.state, &row.result, &row.error) {
        (InvocationState::Succeeded, Some(result), _) => Ok(result.clone()),
        (InvocationState::Failed, _, Some(error)) if error.kind == ToolErrorKind::BadRequest => {
            match serde_json::from_str::<Value>(&error.message) {
                Ok(object @ Value::Object(_)) => Err(object),
                _ => Err(json!({"code": -32603, "message": error.message})),
            }
        }
        (_, _, error) => {
            let why = error
                .as_ref()
                .map_or("the client did not answer", |e| e.message.as_str());
            Err(json!({"code": -32603, "message": why}))
        }
    }
}
