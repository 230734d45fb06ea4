//! The part of the port between airlock's MCP endpoint and the runtime for the requests an
//! upstream sends to the client during a call (docs/rules.md MCP-94 to MCP-97): each one a
//! ledger row the host records, waits on and settles with the client's answer, wherever that
//! answer arrives.
//!
//! Guarantees: these are airlock's own types, as [`crate::ToolHost`]'s are; every method has a
//! default that keeps no ledger and relays nothing, so a host without one implements it with an
//! empty `impl`, and its upstreams are asked nothing.

use airlock_spec::ScopeId;
use futures::future::BoxFuture;
use serde_json::Value;

use super::{Caller, HostError};

/// A request an upstream sends to the client during a call, as it is relayed (MCP-94).
#[derive(Debug, Clone, PartialEq)]
pub struct ClientQuestion {
    /// `elicitation/create`, `sampling/createMessage` or `roots/list`.
    pub method: String,
    /// Its params, as relayed.
    pub params: Value,
    /// The invocation id of the call that asked, when known.
    pub call: Option<String>,
    /// The session the request was asked in (the key of its session id, MCP-95): only an
    /// answer carrying the same session's id settles it.
    pub session: Option<String>,
}

/// A client's JSON-RPC answer to a relayed request: its `result`, or its `error` object.
pub type ClientAnswer = Result<Value, Value>;

/// The requests an upstream sends to the client during a call, as the host keeps them.
pub trait AskHost {
    /// Records a request the upstream of the caller's call sends to the caller's client
    /// (`question`), before the endpoint relays it on the call's stream (docs/rules.md MCP-96):
    /// the row's id, which names the request to the client. The default keeps no ledger and
    /// relays nothing: [`HostError::NotFound`].
    fn ask_client<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        question: ClientQuestion,
    ) -> BoxFuture<'a, Result<String, HostError>> {
        let _ = (scope, caller);
        let refused = HostError::NotFound(format!("a place to record {}", question.method));
        Box::pin(std::future::ready(Err(refused)))
    }

    /// Waits for the client's answer to the caller's relayed request `id`, wherever it arrived
    /// (MCP-96); when `gone` resolves first — nobody waits for the answer any more — the
    /// request is recorded unanswered and the wait ends with an error.
    fn client_answer<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        id: &'a str,
        gone: BoxFuture<'a, ()>,
    ) -> BoxFuture<'a, Result<ClientAnswer, HostError>> {
        let _ = (scope, caller, gone);
        Box::pin(std::future::ready(Err(HostError::NotFound(format!(
            "request {id}"
        )))))
    }

    /// The caller's relayed request `id`, still waiting for its client's answer: what the
    /// answer is checked against. Anything else — unknown, another principal's, from another
    /// endpoint URL, answered already — is [`HostError::NotFound`].
    fn client_question<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        id: &'a str,
    ) -> BoxFuture<'a, Result<ClientQuestion, HostError>> {
        let _ = (scope, caller);
        Box::pin(std::future::ready(Err(HostError::NotFound(format!(
            "request {id}"
        )))))
    }

    /// Settles the caller's relayed request `id` with its client's `answer` (MCP-96); visibility
    /// as for [`AskHost::client_question`].
    fn answer_client<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        id: &'a str,
        answer: ClientAnswer,
    ) -> BoxFuture<'a, Result<(), HostError>> {
        let _ = (scope, caller, answer);
        Box::pin(std::future::ready(Err(HostError::NotFound(format!(
            "request {id}"
        )))))
    }
}
