//! An upstream's requests to the client during a call, for a session-era client that takes them
//! on its call's own event stream (docs/rules.md MCP-94 to MCP-97): the part shared by the
//! upstream session that receives them and the endpoint request that relays them.
//!
//! Guarantees:
//! - Only calls whose target's [`crate::Downstream`] carries an [`Asker`] can ask: the endpoint
//!   makes one for a session-era `tools/call` whose client declared, in its `initialize`,
//!   `elicitation`, `sampling` or `roots` (carried in its sealed session id). Everything else —
//!   agent runs, approvers' decisions, boot discovery, 2026-07-28 requests — carries none, so
//!   its upstream is told airlock's own (empty) client capabilities and asks nothing.
//! - The upstream is told exactly the capabilities among those three that the client declared,
//!   and a request for one it did not declare is refused (-32601) without reaching the client.
//! - Each request waits for its answer at most as long as the call's session lives: when the
//!   session ends (its deadline, the call's end), the waiting side is told ([`Question::gone`]).

use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::rounds;

/// How many requests may wait to be relayed at once; an upstream asks one at a time.
const WAITING: usize = 4;

/// The client's JSON-RPC answer to one relayed request: its `result`, or its `error` object.
pub(crate) type ClientAnswer = Result<Value, Value>;

/// One request of the upstream, waiting for the client's answer.
#[derive(Debug)]
pub(crate) struct Question {
    /// `elicitation/create`, `sampling/createMessage` or `roots/list`.
    pub(crate) method: &'static str,
    /// Its params, as the MCP SDK read them from the upstream (rebuilt, never passed through).
    pub(crate) params: Value,
    /// The idempotency key of the call that asked (its invocation id), when it went with one.
    pub(crate) call: Option<String>,
    answer: oneshot::Sender<ClientAnswer>,
}

impl Question {
    /// Splits the question into what to relay and where its answer goes.
    pub(crate) fn into_parts(self) -> (&'static str, Value, Option<String>, Answering) {
        (self.method, self.params, self.call, Answering(self.answer))
    }
}

/// Where the answer to one relayed request goes.
#[derive(Debug)]
pub(crate) struct Answering(oneshot::Sender<ClientAnswer>);

impl Answering {
    /// Hands the client's answer back (a session already gone drops it).
    pub(crate) fn send(self, answer: ClientAnswer) {
        let _ = self.0.send(answer);
    }

    /// Whether nobody waits for the answer any more.
    pub(crate) fn is_gone(&self) -> bool {
        self.0.is_closed()
    }

    /// Resolves once nobody waits for the answer any more: the call's session ended.
    pub(crate) async fn gone(&mut self) {
        self.0.closed().await;
    }
}

/// What lets the upstream calls of one endpoint request ask its client.
#[derive(Debug, Clone)]
pub(crate) struct Asker {
    /// The capabilities among `elicitation`, `sampling` and `roots` the client declared.
    capabilities: Map<String, Value>,
    sink: mpsc::Sender<Question>,
}

impl Asker {
    /// An asker for a client that declared `declared`, and the receiving end of its requests;
    /// `None` when it declared none of the capabilities a request can need.
    pub(crate) fn new(declared: &Map<String, Value>) -> Option<(Self, mpsc::Receiver<Question>)> {
        let capabilities = rounds::needed(declared);
        if capabilities.is_empty() {
            return None;
        }
        let (sink, questions) = mpsc::channel(WAITING);
        Some((Self { capabilities, sink }, questions))
    }

    /// The client capabilities the upstream is told.
    pub(crate) fn capabilities(&self) -> &Map<String, Value> {
        &self.capabilities
    }

    /// Relays `method` with `params` to the client and waits for its answer. A method whose
    /// capability the client did not declare is refused here, -32601 as MCP says.
    pub(crate) async fn ask(
        &self,
        method: &'static str,
        params: Value,
        call: Option<String>,
    ) -> ClientAnswer {
        let declared = rounds::NEEDED
            .iter()
            .any(|(m, name)| *m == method && self.capabilities.contains_key(*name));
        if !declared {
            return Err(
                json!({"code": -32601, "message": format!("the client does not take {method}")}),
            );
        }
        let (answer, answered) = oneshot::channel();
        let question = Question {
            method,
            params,
            call,
            answer,
        };
        if self.sink.send(question).await.is_err() {
            return Err(gone());
        }
        answered.await.unwrap_or_else(|_| Err(gone()))
    }
}

/// The error an upstream gets when the client's request went away before it answered.
fn gone() -> Value {
    json!({"code": -32603, "message": "the client's request ended before it answered"})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn mcp_94_only_declared_capabilities_are_asked_and_answers_come_back() {
        let declared = json!({"elicitation": {}, "experimental": {}});
        let (asker, mut questions) = Asker::new(declared.as_object().unwrap()).unwrap();
        assert_eq!(
            Value::Object(asker.capabilities().clone()),
            json!({"elicitation": {}})
        );
        let refused = asker
            .ask("sampling/createMessage", json!({}), None)
            .await
            .unwrap_err();
        assert_eq!(refused["code"], -32601);
        assert!(questions.try_recv().is_err(), "nothing reached the client");
        let asking = tokio::spawn({
            let asker = asker.clone();
            async move {
                asker
                    .ask(
                        "elicitation/create",
                        json!({"message": "?"}),
                        Some("c1".into()),
                    )
                    .await
            }
        });
        let (method, _, call, answering) = questions.recv().await.unwrap().into_parts();
        assert_eq!(
            (method, call.as_deref()),
            ("elicitation/create", Some("c1"))
        );
        answering.send(Ok(json!({"action": "decline"})));
        assert_eq!(asking.await.unwrap(), Ok(json!({"action": "decline"})));
        let none = json!({"experimental": {}});
        assert!(Asker::new(none.as_object().unwrap()).is_none());
    }

    #[tokio::test]
    async fn a_question_nobody_relays_fails_the_upstream_request() {
        let declared = json!({"roots": {}});
        let (asker, questions) = Asker::new(declared.as_object().unwrap()).unwrap();
        drop(questions);
        let failed = asker.ask("roots/list", json!({}), None).await.unwrap_err();
        assert_eq!(failed["code"], -32603);
        let (asker, mut questions) = Asker::new(declared.as_object().unwrap()).unwrap();
        let asking = tokio::spawn(async move { asker.ask("roots/list", json!({}), None).await });
        let (_, _, _, mut answering) = questions.recv().await.unwrap().into_parts();
        asking.abort();
        // The session that asked is gone: the relaying side learns it.
        answering.gone().await;
        assert!(answering.is_gone());
    }
}
