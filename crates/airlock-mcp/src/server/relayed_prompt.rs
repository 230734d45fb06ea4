//! Relaying a prompt's upstream input requests to the client (docs/rules.md MCP-81): the
//! `prompts/get` side of a round, as `relayed` is the `tools/call` side.
//!
//! Guarantees:
//! - Only a 2026-07-28 `prompts/get` relays a round. The client's `requestState` and
//!   `inputResponses` never reach the host as params: the state is opened here, and the
//!   answers go upstream only through the round (MCP-70).
//! - The upstream's input requests reach the client as a tool round's do (read and rebuilt,
//!   MCP-73; refused with -32021 when they need a capability the client did not declare,
//!   MCP-80), with airlock's own state sealed to the prompt as `prompts/get <name>` (a name no
//!   tool has, so a tool's state never continues a prompt nor the reverse), its arguments and
//!   the get's row. A request airlock does not relay fails the get (-32603, MCP-61).
//! - A retry's state is checked as MCP-72 says before anything is recorded, and used once: the
//!   host records its use in the commit that records the next get (LEDGER-67).

use std::time::SystemTime;

use rmcp::ErrorData;
use rmcp::model::{GetPromptRequestParams, GetPromptResponse};
use serde_json::Value;

use super::convert::to_error_data;
use super::offered::{complete_result, from_value, not_declared, to_map};
use super::relayed::{Asking, Declared, Unrelayable, sealed};
use super::request::Admitted;
use super::request_state::{Asked, Binding, Refusal, RequestStates, arguments_digest, refused};
use crate::host::{CallerRefusal, HostError, PromptAnswer, RoundCall, ToolHost};
use crate::rounds::{self, Round, relaying_round};

/// What the endpoint request brings beside the host.
pub(super) struct Relaying<'a> {
    pub(super) states: Option<&'a RequestStates>,
    pub(super) admitted: &'a Admitted,
    /// What a 2026-07-28 request's client declared; `None` on the session-era revisions.
    pub(super) declared: Option<&'a Declared>,
}

/// `prompts/get`: the prompt, or its upstream's input requests relayed; a retry continues the
/// round its state was sealed for.
pub(super) async fn prompt(
    host: &dyn ToolHost,
    relaying: Relaying<'_>,
    mut request: GetPromptRequestParams,
) -> Result<GetPromptResponse, ErrorData> {
    let admitted = relaying.admitted;
    if !host.offers(&admitted.scope).prompts {
        return Err(not_declared("prompts/get"));
    }
    let state = request.request_state.take();
    let responses = request.input_responses.take();
    let responses = responses.map(|r| Value::Object(r.into_iter().collect()));
    let arguments = request.arguments.clone().map_or(Value::Null, Value::Object);
    let answer = match (state, relaying.declared) {
        (Some(state), Some(declared)) => {
            let retry = Retry {
                name: &request.name,
                arguments: &arguments,
                state: &state,
                responses,
                declared,
            };
            next_round(host, &relaying, retry).await?
        }
        // Only a 2026-07-28 request is ever given a state.
        (Some(_), None) => return Err(refused(Refusal::Tampered)),
        (None, declared) => {
            let params = to_map(&request)?;
            let got = host.get_prompt(&admitted.scope, &admitted.caller, params);
            let got = rounds::relaying_if_modern(declared, responses, got).await;
            got.map_err(to_error_data)?
        }
    };
    answered(&relaying, &request.name, arguments, answer)
}

/// What a retry brings.
struct Retry<'a> {
    name: &'a str,
    arguments: &'a Value,
    state: &'a str,
    responses: Option<Value>,
    declared: &'a Declared,
}

/// The next round of the get the retry's state was sealed for.
async fn next_round(
    host: &dyn ToolHost,
    relaying: &Relaying<'_>,
    retry: Retry<'_>,
) -> Result<PromptAnswer, ErrorData> {
    let admitted = relaying.admitted;
    // Without a key no state was ever issued: whatever is presented is not ours.
    let states = relaying.states.ok_or_else(|| refused(Refusal::Tampered))?;
    let opened = states
        .open(retry.state, SystemTime::now())
        .map_err(refused)?;
    let presented = Binding {
        principal: admitted.caller.principal.clone(),
        scope: admitted.scope.to_string(),
        tool: bound_name(retry.name),
        arguments: arguments_digest(retry.arguments),
        invocation: opened.binding.invocation.clone(),
        asked: Asked::Relay,
        upstream: None,
    };
    opened.binding.check(&presented).map_err(refused)?;
    let round = Round::new(retry.declared).answering(retry.responses, opened.binding.upstream);
    let next = RoundCall {
        state_id: opened.id,
        previous: opened.binding.invocation,
        tool: retry.name.to_owned(),
        arguments: retry.arguments.clone(),
    };
    let ran = relaying_round(
        round,
        host.continue_prompt(&admitted.scope, &admitted.caller, next),
    )
    .await;
    match ran {
        Ok(answer) => Ok(answer),
        Err(CallerRefusal::Replayed) => Err(refused(Refusal::Replayed)),
        Err(CallerRefusal::Host(err)) => Err(to_error_data(err)),
    }
}

/// The get's answer: the prompt, or its upstream's requests with a sealed state.
fn answered(
    relaying: &Relaying<'_>,
    name: &str,
    arguments: Value,
    answer: PromptAnswer,
) -> Result<GetPromptResponse, ErrorData> {
    let (invocation, requests, upstream_state) = match answer {
        PromptAnswer::Complete(prompt) => {
            return from_value(complete_result(prompt)).map(GetPromptResponse::Complete);
        }
        PromptAnswer::InputRequired {
            invocation_id,
            requests,
            upstream_state,
        } => (invocation_id, requests, upstream_state),
    };
    let (Some(states), Some(declared)) = (relaying.states, relaying.declared) else {
        return Err(ErrorData::internal_error(
            "the prompt's server asked for input, which this request cannot relay",
            None,
        ));
    };
    let asking = Asking {
        tool: bound_name(name),
        arguments,
        invocation,
        upstream_state,
    };
    match sealed(states, relaying.admitted, asking, &requests, declared) {
        Ok(relayed) => Ok(relayed.into()),
        Err(Unrelayable::Missing(missing)) => {
            Err(to_error_data(HostError::MissingClientCapabilities(missing)))
        }
        Err(Unrelayable::Malformed(message)) => Err(ErrorData::internal_error(message, None)),
    }
}

/// What a prompt's state is bound to in place of a tool: no tool name holds a space.
fn bound_name(prompt: &str) -> String {
    format!("prompts/get {prompt}")
}
