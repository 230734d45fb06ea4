//! Relaying the input requests of a prompt's or a resource's upstream to the client
//! (docs/rules.md MCP-81): the `prompts/get` and `resources/read` side of a round, as
//! `relayed` is the `tools/call` side.
//!
//! Guarantees:
//! - Only a 2026-07-28 request relays a round. The client's `requestState` and
//!   `inputResponses` never reach the host as params: the state is opened here, and the
//!   answers go upstream only through the round (MCP-70).
//! - The upstream's input requests reach the client as a tool round's do (read and rebuilt,
//!   MCP-73; refused with -32021 when they need a capability the client did not declare,
//!   MCP-80), with airlock's own state sealed to `prompts/get <name>` or `resources/read <uri>`
//!   (names no tool has, so a tool's state never continues a prompt or a read, nor the
//!   reverse), the prompt's arguments and the request's row. A request airlock does not relay
//!   fails the request (-32603, MCP-61).
//! - A retry's state is checked as MCP-72 says, and its answers against the elicitations they
//!   answer (MCP-87), before anything is recorded; it is used once: the host records its use
//!   in the commit that records the next request (LEDGER-67).

use std::time::SystemTime;

use rmcp::ErrorData;
use rmcp::model::{GetPromptRequestParams, GetPromptResponse, InputResponses};
use rmcp::model::{ReadResourceRequestParams, ReadResourceResponse};
use serde_json::{Map, Value};

use super::convert::to_error_data;
use super::elicited;
use super::offered::{complete_result, from_value, not_declared, to_map};
use super::request::Admitted;
use super::request_state::{Asked, Binding, Refusal, RequestStates, arguments_digest, refused};
use super::tool_rounds::{Asking, Declared, Unrelayable, sealed};
use crate::host::{CallerRefusal, HostError, OfferAnswer, OfferRequest, RoundCall, ToolHost};
use crate::rounds::{self, Round};

/// What the endpoint request brings beside the host.
pub(super) struct Relaying<'a> {
    pub(super) states: Option<&'a RequestStates>,
    pub(super) admitted: &'a Admitted,
    /// What a 2026-07-28 request's client declared; `None` on the session-era revisions.
    pub(super) declared: Option<&'a Declared>,
}

/// One request as relayed: what it asks for and what the client sent beside it.
struct Offer {
    request: OfferRequest,
    /// The served prompt name, or the URI as asked.
    name: String,
    /// The prompt's arguments (`null` for a read or none).
    arguments: Value,
    state: Option<String>,
    responses: Option<InputResponses>,
}

/// `prompts/get`: the prompt, or its upstream's input requests relayed; a retry continues the
/// round its state was sealed for.
pub(super) async fn prompt(
    host: &dyn ToolHost,
    relaying: Relaying<'_>,
    mut request: GetPromptRequestParams,
) -> Result<GetPromptResponse, ErrorData> {
    if !host.offers(&relaying.admitted.scope).prompts {
        return Err(not_declared("prompts/get"));
    }
    let offer = Offer {
        request: OfferRequest::Prompt,
        name: request.name.clone(),
        arguments: request.arguments.clone().map_or(Value::Null, Value::Object),
        state: request.request_state.take(),
        responses: request.input_responses.take(),
    };
    let params = to_map(&request)?;
    match relay(host, &relaying, offer, params).await? {
        Relayed::Complete(prompt) => {
            from_value(complete_result(prompt)).map(GetPromptResponse::Complete)
        }
        Relayed::Asked(asked) => Ok(asked.into()),
    }
}

/// `resources/read`: the contents, or its upstream's input requests relayed, as [`prompt`].
pub(super) async fn read(
    host: &dyn ToolHost,
    relaying: Relaying<'_>,
    mut request: ReadResourceRequestParams,
) -> Result<ReadResourceResponse, ErrorData> {
    if !host.offers(&relaying.admitted.scope).resources {
        return Err(not_declared("resources/read"));
    }
    let offer = Offer {
        request: OfferRequest::Resource,
        name: request.uri.clone(),
        arguments: Value::Null,
        state: request.request_state.take(),
        responses: request.input_responses.take(),
    };
    match relay(host, &relaying, offer, Map::new()).await? {
        Relayed::Complete(mut read) => {
            // The upstream's caching hints were not written for a list filtered per caller:
            // the endpoint sets its own (MCP-58).
            for hint in ["ttlMs", "cacheScope"] {
                read.remove(hint);
            }
            from_value(complete_result(read)).map(ReadResourceResponse::Complete)
        }
        Relayed::Asked(asked) => Ok(asked.into()),
    }
}

/// What a relayed request came to.
enum Relayed {
    Complete(Map<String, Value>),
    Asked(rmcp::model::InputRequiredResult),
}

/// The request's answer: a first request (`params` for a prompt), or the retry its state
/// continues.
async fn relay(
    host: &dyn ToolHost,
    relaying: &Relaying<'_>,
    mut offer: Offer,
    params: Map<String, Value>,
) -> Result<Relayed, ErrorData> {
    let admitted = relaying.admitted;
    let responses = offer.responses.take();
    let responses = responses.map(|r| Value::Object(r.into_iter().collect()));
    let answer = match (offer.state.take(), relaying.declared) {
        (Some(state), Some(declared)) => {
            next_round(host, relaying, &offer, &state, responses, declared).await?
        }
        // Only a 2026-07-28 request is ever given a state.
        (Some(_), None) => return Err(refused(Refusal::Tampered)),
        (None, declared) => {
            let round = rounds::round_if_modern(declared, responses);
            let serving = admitted.relaying(round.clone());
            let (scope, caller) = (&serving.scope, &serving.caller);
            let asked = match offer.request {
                OfferRequest::Prompt => host.get_prompt(scope, caller, params).await,
                OfferRequest::Resource => host.read_resource(scope, caller, &offer.name).await,
            };
            rounds::settled(round.as_ref(), asked).map_err(to_error_data)?
        }
    };
    answered(relaying, offer, answer)
}

/// The next round of the request the retry's state was sealed for.
async fn next_round(
    host: &dyn ToolHost,
    relaying: &Relaying<'_>,
    offer: &Offer,
    state: &str,
    responses: Option<Value>,
    declared: &Declared,
) -> Result<OfferAnswer, ErrorData> {
    let admitted = relaying.admitted;
    // Without a key no state was ever issued: whatever is presented is not ours.
    let states = relaying.states.ok_or_else(|| refused(Refusal::Tampered))?;
    let opened = states.open(state, SystemTime::now()).map_err(refused)?;
    let presented = Binding {
        principal: admitted.caller.principal.clone(),
        scope: admitted.scope.to_string(),
        tool: bound_name(offer),
        arguments: arguments_digest(&offer.arguments),
        invocation: opened.binding.invocation.clone(),
        asked: Asked::Relay,
        upstream: None,
        schemas: Map::new(),
    };
    opened.binding.check(&presented).map_err(refused)?;
    // Answers that do not match what was asked never go upstream (MCP-87).
    let answers = responses.as_ref().and_then(Value::as_object);
    elicited::check(&opened.binding.schemas, answers.into_iter().flatten())?;
    let round = Round::new(declared).answering(responses, opened.binding.upstream);
    let next = RoundCall {
        state_id: opened.id,
        previous: opened.binding.invocation,
        tool: offer.name.clone(),
        arguments: offer.arguments.clone(),
    };
    let serving = admitted.relaying(Some(round.clone()));
    let (scope, caller) = (&serving.scope, &serving.caller);
    let asked = host
        .continue_offer(scope, caller, offer.request, next)
        .await;
    match rounds::settled(Some(&round), asked) {
        Ok(answer) => Ok(answer),
        Err(CallerRefusal::Replayed) => Err(refused(Refusal::Replayed)),
        Err(CallerRefusal::Host(err)) => Err(to_error_data(err)),
    }
}

/// The answer as the client gets it: complete, or its upstream's requests with a sealed state.
fn answered(
    relaying: &Relaying<'_>,
    offer: Offer,
    answer: OfferAnswer,
) -> Result<Relayed, ErrorData> {
    let (invocation, requests, upstream_state) = match answer {
        OfferAnswer::Complete(complete) => return Ok(Relayed::Complete(complete)),
        OfferAnswer::InputRequired {
            invocation_id,
            requests,
            upstream_state,
        } => (invocation_id, requests, upstream_state),
    };
    let (Some(states), Some(declared)) = (relaying.states, relaying.declared) else {
        return Err(ErrorData::internal_error(
            "the upstream asked for input, which this request cannot relay",
            None,
        ));
    };
    let asking = Asking {
        tool: bound_name(&offer),
        arguments: offer.arguments,
        invocation,
        upstream_state,
    };
    match sealed(states, relaying.admitted, asking, &requests, declared) {
        Ok(relayed) => Ok(Relayed::Asked(relayed)),
        Err(Unrelayable::Missing(missing)) => {
            Err(to_error_data(HostError::MissingClientCapabilities(missing)))
        }
        Err(Unrelayable::Malformed(message)) => Err(ErrorData::internal_error(message, None)),
    }
}

/// What a state is bound to in place of a tool: the method and the name, which no tool name
/// can spell (it holds a space).
fn bound_name(offer: &Offer) -> String {
    format!("{} {}", offer.request.method(), offer.name)
}
