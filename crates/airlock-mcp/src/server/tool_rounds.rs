//! Relaying a tool's upstream input requests to the client (MCP 2026-07-28 `input_required`,
//! docs/rules.md MCP-68 to MCP-75): the server's side of a round.
//!
//! Guarantees:
//! - Only a 2026-07-28 `tools/call` relays a round; the upstream is told the capabilities this
//!   client declared (`rounds`), and a round whose requests need one it did not declare is never
//!   relayed: it is refused with -32021 naming each missing capability (MCP-80).
//! - Each relayed input request is read as one of the three MCP allows (elicitation, sampling,
//!   roots) and sent as rebuilt from that reading; anything else is a tool error.
//! - The upstream's `requestState` never reaches the client bare: it is sealed inside airlock's
//!   own state with the round's invocation (`request_state`), under the same bindings and
//!   refusals as airlock's own input request, and opened only by the retry that continues it.
//! - A retry's state is used once: the host records its use in the commit that records and
//!   claims the next round (`ToolHost::continue_round`); a retry whose answers do not match the
//!   elicitations it answers is refused before that (`elicited`, MCP-87), as is a `tasks/update`
//!   whose answers do not match what its upstream's task waits on.

use std::time::{Duration, SystemTime};

use rmcp::ErrorData;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock};
use rmcp::model::{InputRequest, InputRequests};
use rmcp::model::{InputRequiredResult, InputResponses};
use serde_json::{Map, Value};

use super::convert::{from_host_error, to_call_result, to_error_data};
use super::elicited;
use super::request::Admitted;
use super::request_state::{
    Asked, Binding, Opened, Refusal, RequestStates, arguments_digest, refused,
};
use super::tasks;
use crate::host::{CallerRefusal, HostCall, HostError, HostOutcome, RoundCall, ToolHost};
use crate::rounds::{self, NEEDED, Round};

/// What the client of this request declared it can do (its `clientCapabilities`).
pub(super) type Declared = Map<String, Value>;

/// The call's answer: its input requests relayed with a sealed state when its round needs the
/// client's input, its own result otherwise; -32021 when the round needs a capability the
/// client did not declare. For a client that follows tasks (`wants_task`), a round its
/// upstream answered with a task is airlock's task (MCP-82).
pub(super) fn answer(
    states: Option<&RequestStates>,
    admitted: &Admitted,
    call: HostCall,
    tool: &str,
    arguments: &Map<String, Value>,
    declared: &Declared,
    wants_task: bool,
) -> Result<CallToolResponse, ErrorData> {
    if wants_task && call.is_parked() {
        return Ok(CallToolResponse::Task(tasks::created(&call)));
    }
    let HostOutcome::InputRequired {
        requests,
        upstream_state,
    } = call.outcome
    else {
        return Ok(to_call_result(call.outcome).into());
    };
    let Some(states) = states else {
        return Ok(to_call_result(HostOutcome::InputRequired {
            requests,
            upstream_state,
        })
        .into());
    };
    let asking = Asking {
        tool: tool.to_owned(),
        arguments: Value::Object(arguments.clone()),
        invocation: call.invocation_id,
        upstream_state,
    };
    match sealed(states, admitted, asking, &requests, declared) {
        Ok(relayed) => Ok(relayed.into()),
        Err(Unrelayable::Missing(missing)) => {
            Err(to_error_data(HostError::MissingClientCapabilities(missing)))
        }
        Err(Unrelayable::Malformed(message)) => {
            Ok(CallToolResult::error(vec![ContentBlock::text(message)]).into())
        }
    }
}

/// The round that asked: what its state is bound to.
pub(super) struct Asking {
    /// The tool, or for a prompt `prompts/get <name>` (never a tool's name).
    pub(super) tool: String,
    pub(super) arguments: Value,
    /// The round's row.
    pub(super) invocation: String,
    pub(super) upstream_state: Option<String>,
}

/// `requests` as relayed, with airlock's state sealed for the round `asking` (MCP-71).
pub(super) fn sealed(
    states: &RequestStates,
    admitted: &Admitted,
    asking: Asking,
    requests: &Map<String, Value>,
    declared: &Declared,
) -> Result<InputRequiredResult, Unrelayable> {
    let requests = relayable(requests, declared)?;
    let schemas = elicited::asked(&requests);
    let binding = Binding {
        principal: admitted.caller.principal.clone(),
        scope: admitted.scope.to_string(),
        tool: asking.tool,
        arguments: arguments_digest(&asking.arguments),
        invocation: asking.invocation,
        asked: Asked::Relay,
        upstream: asking.upstream_state,
        schemas,
    };
    let state = states.seal(binding, SystemTime::now());
    Ok(InputRequiredResult::new(Some(requests), Some(state)))
}

/// Why a round is not relayed.
#[derive(Debug)]
pub(super) enum Unrelayable {
    /// A request is not one MCP allows, or does not read as its method's: the tool error's
    /// message (MCP-73).
    Malformed(String),
    /// The client capabilities the requests need and the client did not declare (MCP-80).
    Missing(Vec<String>),
}

/// The input requests `asks` an upstream's task waits on, as `tasks/get` relays them (MCP-83):
/// read as a round's are. `None` when one is not relayable to this client: the task then reads
/// `working`, as nothing here could answer it.
pub(super) fn task_input(asks: &Map<String, Value>, declared: &Declared) -> Option<InputRequests> {
    relayable(asks, declared)
        .inspect_err(|why| {
            tracing::warn!(
                ?why,
                "an upstream's task waits for input this client cannot give"
            )
        })
        .ok()
}

/// Checks a `tasks/update`'s answers against the elicitations the task's upstream waits on now
/// (MCP-87), as `tasks/get` would relay them, before they are relayed (MCP-84). A task that
/// cannot be read, or waits on nothing, is left to the update to refuse.
///
/// # Errors
/// -32602 naming the answer and the field that does not match.
pub(super) async fn check_task_answers(
    host: &dyn ToolHost,
    admitted: &Admitted,
    task: &str,
    declared: &Declared,
    responses: &Map<String, Value>,
) -> Result<(), ErrorData> {
    let read = host
        .await_decision(&admitted.scope, &admitted.caller, task, Duration::ZERO)
        .await;
    let asks = read.ok().and_then(|call| call.task_input);
    match asks.and_then(|asks| task_input(&asks, declared)) {
        Some(asked) => elicited::check(&elicited::asked(&asked), responses),
        None => Ok(()),
    }
}

/// `requests` as relayed: each read as an input request MCP allows, and each needing only a
/// capability the client declared.
fn relayable(
    requests: &Map<String, Value>,
    declared: &Declared,
) -> Result<InputRequests, Unrelayable> {
    let mut relayed = InputRequests::new();
    let mut missing = Vec::new();
    for (key, request) in requests {
        let method = request.get("method").and_then(Value::as_str).unwrap_or("");
        let Some((_, capability)) = NEEDED.iter().find(|(m, _)| *m == method) else {
            return Err(Unrelayable::Malformed(format!(
                "the tool's server sent an input request airlock does not relay (`{}` under `{}`); it did not finish",
                airlock_spec::visible_text(method),
                airlock_spec::visible_text(key)
            )));
        };
        let read: InputRequest = serde_json::from_value(request.clone()).map_err(|_| {
            Unrelayable::Malformed(format!(
                "the tool's server sent a malformed {method} input request; it did not finish"
            ))
        })?;
        if !declared.contains_key(*capability) && !missing.iter().any(|m| m == capability) {
            missing.push((*capability).to_owned());
        }
        relayed.insert(key.clone(), read);
    }
    if missing.is_empty() {
        Ok(relayed)
    } else {
        Err(Unrelayable::Missing(missing))
    }
}

/// The retry of a relayed round: the next round, run with the client's responses and the
/// upstream's own state, answered as [`answer`] answers a call.
pub(super) async fn next_round(
    host: &dyn ToolHost,
    states: &RequestStates,
    admitted: &Admitted,
    opened: Opened,
    call: Next<'_>,
) -> Result<CallToolResponse, ErrorData> {
    // Answers that do not match what was asked never go upstream (MCP-87).
    elicited::check(
        &opened.binding.schemas,
        call.responses.into_iter().flatten(),
    )?;
    let responses = call
        .responses
        .map(|r| Value::Object(r.iter().map(|(k, v)| (k.clone(), v.clone())).collect()));
    let round = Round::new(call.declared).answering(responses, opened.binding.upstream);
    let next = RoundCall {
        state_id: opened.id,
        previous: opened.binding.invocation,
        tool: call.tool.to_owned(),
        arguments: Value::Object(call.arguments.clone()),
    };
    let serving = admitted.relaying(Some(round.clone()));
    let continued = host
        .continue_round(&serving.scope, &serving.caller, next)
        .await;
    let ran = rounds::settled(Some(&round), continued);
    match ran {
        Ok(done) => answer(
            Some(states),
            admitted,
            done,
            call.tool,
            call.arguments,
            call.declared,
            call.wants_task,
        ),
        Err(CallerRefusal::Replayed) => Err(refused(Refusal::Replayed)),
        Err(CallerRefusal::Host(err)) => from_host_error(err).map(Into::into),
    }
}

/// What a retry of a relayed round brings.
pub(super) struct Next<'a> {
    pub(super) tool: &'a str,
    pub(super) arguments: &'a Map<String, Value>,
    pub(super) responses: Option<&'a InputResponses>,
    pub(super) declared: &'a Declared,
    pub(super) wants_task: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ErrorCode;
    use serde_json::json;

    fn requests(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    #[test]
    fn mcp_80_a_request_needing_an_undeclared_capability_is_refused_with_32021() {
        let asked = requests(json!({
            "user_name": {"method": "elicitation/create", "params": {"message": "Name?",
                "requestedSchema": {"type": "object", "properties": {}}}},
            "greeting": {"method": "sampling/createMessage", "params": {"messages": [],
                "maxTokens": 5}},
        }));
        let sampling_only = requests(json!({"sampling": {}}));
        let Err(Unrelayable::Missing(missing)) = relayable(&asked, &sampling_only) else {
            panic!("relayed without elicitation");
        };
        assert_eq!(missing, ["elicitation"]);
        let refused = to_error_data(HostError::MissingClientCapabilities(missing));
        assert_eq!(refused.code, ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY);
        assert_eq!(
            refused.data,
            Some(json!({"requiredCapabilities": {"elicitation": {}}}))
        );
        let both = requests(json!({"sampling": {}, "elicitation": {}}));
        assert_eq!(relayable(&asked, &both).unwrap().len(), 2);
    }

    #[test]
    fn mcp_73_only_the_three_input_request_methods_are_relayed() {
        let declared = requests(json!({"sampling": {}, "elicitation": {}, "roots": {}}));
        let ping = requests(json!({"p": {"method": "ping", "params": {}}}));
        let Err(Unrelayable::Malformed(refused)) = relayable(&ping, &declared) else {
            panic!("ping relayed");
        };
        assert!(refused.contains("does not relay"), "{refused}");
        let malformed = requests(json!({"m": {"method": "sampling/createMessage", "params": 3}}));
        let Err(Unrelayable::Malformed(refused)) = relayable(&malformed, &declared) else {
            panic!("malformed relayed");
        };
        assert!(refused.contains("malformed"), "{refused}");
        let roots = requests(json!({"r": {"method": "roots/list"}}));
        assert!(relayable(&roots, &declared).is_ok());
    }
}
