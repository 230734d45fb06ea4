//! The requests of a scope's offers whose upstream may ask the client for input, and what
//! they come to (docs/rules.md MCP-81): the vocabulary of [`crate::OfferHost`]'s relayed
//! rounds, airlock's own like the rest of the host port (no rmcp type).

use serde_json::{Map, Value};

/// A request of the scope's offers whose upstream may ask the client for input (MCP-81).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OfferRequest {
    /// `prompts/get`.
    Prompt,
    /// `resources/read`.
    Resource,
}

impl OfferRequest {
    /// The method, which is also the tool its ledger rows are recorded under (LEDGER-59).
    #[must_use]
    pub fn method(self) -> &'static str {
        match self {
            Self::Prompt => "prompts/get",
            Self::Resource => "resources/read",
        }
    }
}

/// What a `prompts/get` or `resources/read` came to.
#[derive(Debug, Clone, PartialEq)]
pub enum OfferAnswer {
    /// The prompt or the resource's contents, in their wire form.
    Complete(Map<String, Value>),
    /// Its upstream asks the client for input first (a relayed round, docs/rules.md MCP-81).
    InputRequired {
        /// The request's ledger row, which ended `input_required`.
        invocation_id: String,
        /// The upstream's `inputRequests`, as it sent them.
        requests: Map<String, Value>,
        /// The upstream's own `requestState`, never shown to the client bare.
        upstream_state: Option<String>,
    },
}
