//! Input requests (MCP 2026-07-28 `input_required` results): the person at the client settles
//! what the host lets them (docs/rules.md MCP-46..MCP-50).
//!
//! Guarantees:
//! - Only a 2026-07-28 request that declares elicitation is asked, and only about a call the
//!   host names a [`CallerPrompt`] for; every other request gets the parked payload as before.
//! - The input request names the exact call — tool and canonical arguments, or the question —
//!   with every character that could disguise text shown as a visible escape, and caps what it
//!   shows; its `requestState` is sealed to the principal, the endpoint URL, the tool, the
//!   arguments' digest, the invocation and an expiry (`request_state`).
//! - A retry with a `requestState` is checked before anything is decided: tampered, expired,
//!   another principal's, another URL's, another tool's, other arguments — each refused with
//!   -32602 and its own `error.data.reason`; a state used before is `replayed`. A retry without
//!   the response to the request is asked again with the same state.
//! - The person's answer is the decision, recorded under the caller's principal by the host in
//!   the commit that records the state's use (and claims an approved call).

use std::time::SystemTime;

use rmcp::ErrorData;
use rmcp::model::{
    CallToolResponse, InputRequest, InputRequests, InputRequiredResult, InputResponses,
};
use serde_json::{Map, Value, json};

use super::convert::from_host_error;
use super::request::Admitted;
use super::request_state::{Asked, Binding, Refusal, RequestStates, arguments_digest, refused};
use super::tool_rounds::{self, Declared};
use crate::host::{
    CallerDecision, CallerPrompt, CallerRefusal, CallerUse, HostCall, HostOutcome, ParkedStatus,
    ToolHost,
};

/// The key of the one input request airlock sends.
pub(super) const INPUT_KEY: &str = "airlock_person";

/// The most characters of arguments or question an input request shows.
const MAX_SHOWN: usize = 4_000;

/// The reason recorded when the person at the client declines.
pub(super) const DECLINED: &str = "declined by the person at the client";

/// What a retry brings back.
pub(super) struct Retry<'a> {
    pub(super) tool: &'a str,
    pub(super) arguments: &'a Map<String, Value>,
    pub(super) state: &'a str,
    pub(super) responses: Option<&'a InputResponses>,
    /// What the client declared it can do; a relayed round needs it (MCP-69).
    pub(super) declared: &'a Declared,
    /// A 2026-07-28 request that follows tasks: a round its upstream runs as a task is
    /// answered with airlock's task (MCP-82).
    pub(super) wants_task: bool,
}

/// The input request for `call`, if the host lets the person at the client settle it.
pub(super) fn ask(
    host: &dyn ToolHost,
    states: &RequestStates,
    admitted: &Admitted,
    call: &HostCall,
    arguments: &Map<String, Value>,
) -> Option<InputRequiredResult> {
    let HostOutcome::Parked {
        status: status @ (ParkedStatus::AwaitingApproval | ParkedStatus::AwaitingAnswer),
        invocation_id,
        tool,
        confirmable,
        ..
    } = &call.outcome
    else {
        return None;
    };
    if *status == ParkedStatus::AwaitingApproval && !confirmable {
        return None;
    }
    let arguments = Value::Object(arguments.clone());
    let prompt = host.caller_prompt(&admitted.scope, tool, *status, &arguments)?;
    let binding = Binding {
        principal: admitted.caller.principal.clone(),
        scope: admitted.scope.to_string(),
        tool: tool.clone(),
        arguments: arguments_digest(&arguments),
        invocation: invocation_id.clone(),
        asked: asked(&prompt),
        upstream: None,
        schemas: Map::new(),
    };
    let state = states.seal(binding, SystemTime::now());
    input_required(&prompt, tool, &arguments, state)
}

fn asked(prompt: &CallerPrompt) -> Asked {
    match prompt {
        CallerPrompt::Confirm => Asked::Confirm,
        CallerPrompt::Answer { .. } => Asked::Answer,
    }
}

/// The `input_required` result asking `prompt` about a call of `tool` with `arguments`.
fn input_required(
    prompt: &CallerPrompt,
    tool: &str,
    arguments: &Value,
    state: String,
) -> Option<InputRequiredResult> {
    let (message, schema) = match prompt {
        CallerPrompt::Confirm => (
            format!(
                "Run this call? Tool: {tool}\nArguments: {}",
                shown(&airlock_spec::canonical_json(arguments))
            ),
            json!({
                "type": "object",
                "properties": {"approve": {"type": "boolean", "title": "Run this call",
                    "description": "Yes runs exactly this call once; no declines it."}},
                "required": ["approve"]
            }),
        ),
        CallerPrompt::Answer { question } => (
            shown(question),
            json!({
                "type": "object",
                "properties": {"answer": {"type": "string", "title": "Your answer"}},
                "required": ["answer"]
            }),
        ),
    };
    let request = json!({
        "method": "elicitation/create",
        "params": {"mode": "form", "message": message, "requestedSchema": schema}
    });
    let request: InputRequest = serde_json::from_value(request).ok()?;
    let requests = InputRequests::from([(INPUT_KEY.to_owned(), request)]);
    Some(InputRequiredResult::new(Some(requests), Some(state)))
}

/// `text` with every character that could disguise it as a visible escape, capped.
fn shown(text: &str) -> String {
    let mut out = airlock_spec::visible_text(text);
    if out.chars().count() > MAX_SHOWN {
        out = out.chars().take(MAX_SHOWN).collect::<String>() + " … (cut)";
    }
    out
}

/// A retry with a `requestState`: refused, asked again, or decided.
pub(super) async fn resume(
    host: &dyn ToolHost,
    states: Option<&RequestStates>,
    admitted: &Admitted,
    retry: Retry<'_>,
) -> Result<CallToolResponse, ErrorData> {
    // Without a key no state was ever issued: whatever is presented is not ours.
    let states = states.ok_or_else(|| refused(Refusal::Tampered))?;
    let opened = states
        .open(retry.state, SystemTime::now())
        .map_err(refused)?;
    let arguments = Value::Object(retry.arguments.clone());
    let presented = Binding {
        principal: admitted.caller.principal.clone(),
        scope: admitted.scope.to_string(),
        tool: retry.tool.to_owned(),
        arguments: arguments_digest(&arguments),
        invocation: opened.binding.invocation.clone(),
        asked: opened.binding.asked,
        upstream: None,
        schemas: Map::new(),
    };
    opened.binding.check(&presented).map_err(refused)?;
    if opened.binding.asked == Asked::Relay {
        let next = tool_rounds::Next {
            tool: retry.tool,
            arguments: retry.arguments,
            responses: retry.responses,
            declared: retry.declared,
            wants_task: retry.wants_task,
        };
        return tool_rounds::next_round(host, states, admitted, opened, next).await;
    }
    let response = retry.responses.and_then(|r| r.get(INPUT_KEY));
    let Some(decision) = response.and_then(|r| decision(opened.binding.asked, r)) else {
        // No (usable) answer: ask again, with the same state.
        let prompt = parked_status(opened.binding.asked)
            .and_then(|status| host.caller_prompt(&admitted.scope, retry.tool, status, &arguments));
        let asked_again =
            prompt.and_then(|p| input_required(&p, retry.tool, &arguments, retry.state.to_owned()));
        return asked_again
            .map(Into::into)
            .ok_or_else(|| refused(Refusal::OtherTool));
    };
    let used = CallerUse {
        state_id: opened.id,
        invocation_id: opened.binding.invocation,
        tool: opened.binding.tool,
        decision,
    };
    match host
        .decide_as_caller(&admitted.scope, &admitted.caller, used)
        .await
    {
        // The approved call may itself need the client's input (a relayed round, MCP-68).
        Ok(call) => tool_rounds::answer(
            Some(states),
            admitted,
            call,
            retry.tool,
            retry.arguments,
            retry.declared,
            retry.wants_task,
        ),
        Err(CallerRefusal::Replayed) => Err(refused(Refusal::Replayed)),
        Err(CallerRefusal::Host(err)) => from_host_error(err).map(Into::into),
    }
}

fn parked_status(asked: Asked) -> Option<ParkedStatus> {
    match asked {
        Asked::Confirm => Some(ParkedStatus::AwaitingApproval),
        Asked::Answer => Some(ParkedStatus::AwaitingAnswer),
        Asked::Relay => None,
    }
}

/// The person's decision in an elicitation result; `None` when it is not one (asked again).
fn decision(asked: Asked, response: &Value) -> Option<CallerDecision> {
    let declined = || CallerDecision::Decline {
        reason: DECLINED.to_owned(),
    };
    match response["action"].as_str()? {
        "decline" | "cancel" => Some(declined()),
        "accept" => {
            let content = &response["content"];
            match asked {
                Asked::Confirm => match content["approve"].as_bool()? {
                    true => Some(CallerDecision::Approve),
                    false => Some(declined()),
                },
                Asked::Answer => {
                    let text = content["answer"].as_str()?.trim();
                    (!text.is_empty()).then(|| CallerDecision::Answer {
                        text: text.to_owned(),
                    })
                }
                Asked::Relay => None,
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_elicitation_result_is_a_decision_or_asks_again() {
        let accept = |content: Value| json!({"action": "accept", "content": content});
        assert_eq!(
            decision(Asked::Confirm, &accept(json!({"approve": true}))),
            Some(CallerDecision::Approve)
        );
        let declined = Some(CallerDecision::Decline {
            reason: DECLINED.to_owned(),
        });
        assert_eq!(
            decision(Asked::Confirm, &accept(json!({"approve": false}))),
            declined
        );
        assert_eq!(
            decision(Asked::Confirm, &json!({"action": "decline"})),
            declined
        );
        assert_eq!(
            decision(Asked::Answer, &json!({"action": "cancel"})),
            declined
        );
        assert_eq!(
            decision(Asked::Answer, &accept(json!({"answer": " Friday "}))),
            Some(CallerDecision::Answer {
                text: "Friday".to_owned()
            })
        );
        assert_eq!(decision(Asked::Confirm, &accept(json!({"ok": true}))), None);
        assert_eq!(
            decision(Asked::Answer, &accept(json!({"answer": "  "}))),
            None
        );
        assert_eq!(decision(Asked::Answer, &json!({"action": "maybe"})), None);
    }

    #[test]
    fn the_request_shows_the_exact_call_without_disguise() {
        let arguments = json!({"b": "x\u{202E}gpj.exe", "a": 1});
        let result =
            input_required(&CallerPrompt::Confirm, "deploy", &arguments, "s".into()).unwrap();
        let wire = serde_json::to_value(&result).unwrap();
        assert_eq!(wire["resultType"], "input_required");
        assert_eq!(wire["requestState"], "s");
        let request = &wire["inputRequests"][INPUT_KEY];
        assert_eq!(request["method"], "elicitation/create");
        let message = request["params"]["message"].as_str().unwrap();
        assert!(message.contains("Tool: deploy"), "{message}");
        assert!(
            message.contains(r#"{"a":1,"b":"x\u{202E}gpj.exe"}"#),
            "{message}"
        );
        assert!(!message.contains('\u{202E}'));
        let long = "q".repeat(MAX_SHOWN * 2);
        let prompt = CallerPrompt::Answer { question: long };
        let result = input_required(&prompt, "ask_human", &json!({}), "s".into()).unwrap();
        let wire = serde_json::to_value(&result).unwrap();
        let message = wire["inputRequests"][INPUT_KEY]["params"]["message"]
            .as_str()
            .unwrap();
        assert!(message.ends_with("(cut)") && message.len() < MAX_SHOWN + 20);
    }
}
