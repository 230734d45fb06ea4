//! The client's side of a relayed input round (MCP 2026-07-28 `input_required`, docs/rules.md
//! MCP-68 to MCP-70): what the endpoint request a call serves lets its upstream ask, and what
//! it answers.
//!
//! Guarantees:
//! - Only calls made inside [`relaying_round`] carry a round: the endpoint wraps the one host
//!   call of a 2026-07-28 `tools/call`. Agent runs, boot discovery and calls an approver's
//!   decision runs later have none, so their upstreams are told airlock's own (empty) client
//!   capabilities and an `input_required` answer is a tool error.
//! - The upstream is told only the capabilities an input request can need (`elicitation`,
//!   `sampling`, `roots`), and only those the client declared, rebuilt from their objects.
//! - A retry's `inputResponses` and the upstream's own `requestState` go as the client and the
//!   sealed state hold them: they are the client's answers to the upstream's questions.

use serde_json::{Map, Value};

/// The client capabilities an input request can need, by the method that needs each.
pub(crate) const NEEDED: [(&str, &str); 3] = [
    ("elicitation/create", "elicitation"),
    ("sampling/createMessage", "sampling"),
    ("roots/list", "roots"),
];

/// One round as the endpoint relays it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Round {
    /// The client capabilities stated to the upstream.
    pub(crate) capabilities: Map<String, Value>,
    /// The client's answers to the previous round's input requests.
    pub(crate) responses: Option<Value>,
    /// The upstream's own `requestState` of the previous round.
    pub(crate) upstream_state: Option<String>,
}

impl Round {
    /// A round for a client that declared `declared`: only what an input request can need.
    pub(crate) fn new(declared: &Map<String, Value>) -> Self {
        let capabilities = NEEDED
            .iter()
            .filter_map(|(_, name)| {
                let object = declared.get(*name)?.as_object()?;
                Some(((*name).to_owned(), Value::Object(object.clone())))
            })
            .collect();
        Self {
            capabilities,
            responses: None,
            upstream_state: None,
        }
    }

    /// This round continuing the upstream's `upstream_state` with the client's `responses`.
    pub(crate) fn answering(
        mut self,
        responses: Option<Value>,
        upstream_state: Option<String>,
    ) -> Self {
        self.responses = responses;
        self.upstream_state = upstream_state;
        self
    }
}

tokio::task_local! {
    static ROUND: Round;
}

/// Runs `call` with every upstream call it makes from this task relaying `round`.
pub(crate) async fn relaying_round<F: Future>(round: Round, call: F) -> F::Output {
    ROUND.scope(round, call).await
}

/// Runs `call` relaying a round for a 2026-07-28 client that declared `declared`, with the
/// `responses` its request carried; a session-era request (`None`) relays none.
pub(crate) async fn relaying_if_modern<F: Future>(
    declared: Option<&Map<String, Value>>,
    responses: Option<Value>,
    call: F,
) -> F::Output {
    match declared {
        Some(declared) => {
            let round = Round::new(declared).answering(responses, None);
            relaying_round(round, call).await
        }
        None => call.await,
    }
}

/// The round of the endpoint request this call serves, if it relays one.
pub(crate) fn current() -> Option<Round> {
    ROUND.try_with(Clone::clone).ok()
}
