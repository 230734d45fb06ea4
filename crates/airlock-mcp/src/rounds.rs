//! The client's side of a relayed input round (MCP 2026-07-28 `input_required`, docs/rules.md
//! MCP-68 to MCP-70): what the endpoint request a call serves lets its upstream ask, and what
//! it answers.
//!
//! Guarantees:
//! - Only calls whose target's [`crate::Downstream`] carries a round relay one: the endpoint
//!   makes one for a 2026-07-28 `tools/call`. Agent runs, boot discovery and calls an approver's
//!   decision runs later have none, so their upstreams are told airlock's own (empty) client
//!   capabilities and an `input_required` answer is a tool error.
//! - The upstream is told only the capabilities an input request can need (`elicitation`,
//!   `sampling`, `roots`), and only those the client declared, rebuilt from their objects.
//! - A retry's `inputResponses` and the upstream's own `requestState` go as the client and the
//!   sealed state hold them: they are the client's answers to the upstream's questions.
//! - An upstream that refuses a round (-32021) for one of those capabilities the client did not
//!   declare makes the endpoint's answer airlock's own -32021 naming them
//!   ([`HostError::MissingClientCapabilities`], MCP-80); any other refusal stays the call's.

use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Map, Value};

use crate::host::HostError;

/// JSON-RPC's "missing required client capability".
const MISSING_CAPABILITY: i64 = -32021;

/// The client capabilities an input request can need, by the method that needs each.
pub(crate) const NEEDED: [(&str, &str); 3] = [
    ("elicitation/create", "elicitation"),
    ("sampling/createMessage", "sampling"),
    ("roots/list", "roots"),
];

/// The capabilities among `elicitation`, `sampling` and `roots` in `declared`, as objects.
pub(crate) fn needed(declared: &Map<String, Value>) -> Map<String, Value> {
    NEEDED
        .iter()
        .filter_map(|(_, name)| {
            let object = declared.get(*name)?.as_object()?;
            Some(((*name).to_owned(), Value::Object(object.clone())))
        })
        .collect()
}

/// One round as the endpoint relays it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Round {
    /// The client capabilities stated to the upstream.
    pub(crate) capabilities: Map<String, Value>,
    /// The client's answers to the previous round's input requests.
    pub(crate) responses: Option<Value>,
    /// The upstream's own `requestState` of the previous round.
    pub(crate) upstream_state: Option<String>,
    /// The capabilities the upstream refused the round for, shared by every clone of the round
    /// (the endpoint reads them once its call is answered).
    refused: Arc<Mutex<Vec<String>>>,
}

impl Round {
    /// A round for a client that declared `declared`: only what an input request can need.
    pub(crate) fn new(declared: &Map<String, Value>) -> Self {
        Self {
            capabilities: needed(declared),
            ..Self::default()
        }
    }

    /// Notes an upstream's answer to this round: a -32021 naming capabilities an input request
    /// needs, and that the client did not declare, refuses the round for them.
    pub(crate) fn note(&self, answer: &Value) {
        let error = &answer["error"];
        if error["code"].as_i64() != Some(MISSING_CAPABILITY) {
            return;
        }
        let Some(required) = error["data"]["requiredCapabilities"].as_object() else {
            return;
        };
        let missing = NEEDED
            .iter()
            .map(|(_, name)| *name)
            .filter(|name| required.contains_key(*name) && !self.capabilities.contains_key(*name));
        let mut refused = self.refused.lock().unwrap_or_else(PoisonError::into_inner);
        for name in missing {
            if !refused.iter().any(|r| r == name) {
                refused.push(name.to_owned());
            }
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

/// A round for a 2026-07-28 client that declared `declared`, with the `responses` its request
/// carried; a session-era request (`None`) relays none.
pub(crate) fn round_if_modern(
    declared: Option<&Map<String, Value>>,
    responses: Option<Value>,
) -> Option<Round> {
    declared.map(|declared| Round::new(declared).answering(responses, None))
}

/// `answered`, the outcome of the call that relayed `round` — unless its upstream refused the
/// round for capabilities the client did not declare: then that refusal.
pub(crate) fn settled<T, E: From<HostError>>(
    round: Option<&Round>,
    answered: Result<T, E>,
) -> Result<T, E> {
    let Some(round) = round else {
        return answered;
    };
    let missing =
        std::mem::take(&mut *round.refused.lock().unwrap_or_else(PoisonError::into_inner));
    if missing.is_empty() {
        answered
    } else {
        Err(HostError::MissingClientCapabilities(missing).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refusal(required: &Value) -> Value {
        json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32021, "message": "no",
            "data": {"requiredCapabilities": required}}})
    }

    #[test]
    fn mcp_80_an_upstream_refusal_for_an_undeclared_capability_is_the_answer() {
        let declared = json!({"elicitation": {}});
        let round = round_if_modern(declared.as_object(), None).unwrap();
        // Declared, or not one the client answers: the call's own failure.
        round.note(&refusal(
            &json!({"elicitation": {}, "extensions": {"x": {}}}),
        ));
        assert_eq!(settled(Some(&round), Ok::<_, HostError>(1)), Ok(1));
        let round = round_if_modern(declared.as_object(), None).unwrap();
        round
            .clone()
            .note(&refusal(&json!({"sampling": {}, "roots": {}})));
        assert_eq!(
            settled(Some(&round), Ok::<_, HostError>(1)),
            Err(HostError::MissingClientCapabilities(vec![
                "sampling".into(),
                "roots".into()
            ]))
        );
        assert!(
            round_if_modern(None, None).is_none(),
            "a session-era request relays none"
        );
    }
}
