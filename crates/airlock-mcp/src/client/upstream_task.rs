//! Tasks an upstream runs for airlock: the client side of the 2026-07-28 tasks extension
//! (`io.modelcontextprotocol/tasks`, SEP-2663; docs/rules.md MCP-76 to MCP-79).
//!
//! Guarantees:
//! - An upstream is offered a task only by a call whose target's [`crate::Downstream`] offers
//!   one — the endpoint's for a 2026-07-28 `tools/call` whose client declared the extension —
//!   and only on the handshake-free 2026-07-28 path (MCP-27). Boot discovery, an approver's later
//!   run and agent runs never offer one, so their upstreams answer with results as before.
//! - What the upstream sends about a task is hostile data: its task id is kept only when it is
//!   1 to [`MAX_TASK_ID_CHARS`] visible ASCII characters (it is stored and sent back in a
//!   header), a status outside the extension's five is a bad reply, a failure's message is cut
//!   to [`MAX_FAILURE_CHARS`], and a completed task's result is read exactly as a `tools/call`
//!   result is (`content`).
//! - A task waiting for input yields its `inputRequests` only as an object of at most
//!   [`MAX_INPUT_REQUESTS`] entries; the endpoint reads each again before relaying it (MCP-83).
//! - `tasks/get`, `tasks/update` and `tasks/cancel` are one request each through the same guard,
//!   pin, deadline and body cap as a call, declaring the extension in the request's `_meta`.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::client::content::to_tool_result;
use crate::client::target::ToolResult;
use crate::error::{CallErrorKind, McpCallError};

/// The longest upstream task id airlock keeps, in characters.
pub const MAX_TASK_ID_CHARS: usize = 256;

/// The most input requests an upstream's task may wait on at once (MCP-83).
pub(crate) const MAX_INPUT_REQUESTS: usize = 16;

/// The longest message of an upstream task's failure airlock keeps, in characters.
pub const MAX_FAILURE_CHARS: usize = 2_000;

/// A task the upstream created for a call: its id on the upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamTask {
    /// The upstream's task id (never shown to airlock's client as its own).
    pub id: String,
}

/// What a `tools/call` that may be answered with a task got back.
#[derive(Debug, Clone, PartialEq)]
pub enum CallAnswer {
    /// The tool's result, at once.
    Result(ToolResult),
    /// The upstream runs the call as a task; its result comes through `tasks/get`.
    Task(UpstreamTask),
}

/// Where an upstream task stands, as its `tasks/get` says.
#[derive(Debug, Clone, PartialEq)]
pub enum UpstreamTaskState {
    /// Still running: ask again later.
    Working,
    /// Waiting for the client's answers to these input requests (the upstream's, by key).
    InputRequired(Map<String, Value>),
    /// Done: the tool's result, or its error (`isError`) as [`CallErrorKind::ToolError`].
    Completed(Result<ToolResult, McpCallError>),
    /// The task failed at the protocol level; the upstream's message.
    Failed(String),
    /// The task was cancelled.
    Cancelled,
}

/// The `params` of `tasks/get` and `tasks/cancel`.
#[derive(Serialize)]
pub(crate) struct TaskParams<'a> {
    #[serde(rename = "taskId")]
    pub(crate) task_id: &'a str,
    #[serde(rename = "_meta")]
    pub(crate) meta: Map<String, Value>,
    /// The client's answers, on `tasks/update` only.
    #[serde(rename = "inputResponses", skip_serializing_if = "Option::is_none")]
    pub(crate) input_responses: Option<&'a Map<String, Value>>,
}

fn bad(message: &str) -> McpCallError {
    McpCallError::new(CallErrorKind::BadReply, message)
}

/// A task id fit to store and to send back: 1 to [`MAX_TASK_ID_CHARS`] visible ASCII characters.
fn task_id(result: &Value) -> Result<String, McpCallError> {
    match result.get("taskId").and_then(Value::as_str) {
        Some(id)
            if (1..=MAX_TASK_ID_CHARS).contains(&id.len())
                && id.bytes().all(|b| b.is_ascii_graphic()) =>
        {
            Ok(id.to_owned())
        }
        _ => Err(bad(
            "the MCP server's task has no usable taskId (1 to 256 visible ASCII characters)",
        )),
    }
}

/// The task a `tools/call` answered with (`resultType: "task"`, a `CreateTaskResult`).
pub(crate) fn created(result: &Value) -> Result<UpstreamTask, McpCallError> {
    Ok(UpstreamTask {
        id: task_id(result)?,
    })
}

/// A `tasks/get` result (`DetailedTask`) read into where the task stands.
pub(crate) fn state(result: &Value, relays_round: bool) -> Result<UpstreamTaskState, McpCallError> {
    match result.get("status").and_then(Value::as_str) {
        Some("working") => Ok(UpstreamTaskState::Working),
        Some("input_required") => match result.get("inputRequests").and_then(Value::as_object) {
            Some(asks) if (1..=MAX_INPUT_REQUESTS).contains(&asks.len()) => {
                Ok(UpstreamTaskState::InputRequired(asks.clone()))
            }
            _ => Err(bad(
                "the MCP server's task waits for input without 1 to 16 inputRequests",
            )),
        },
        Some("completed") => match result.get("result") {
            Some(inner) if inner.is_object() => Ok(UpstreamTaskState::Completed(to_tool_result(
                inner,
                relays_round,
            ))),
            _ => Err(bad("the MCP server's completed task has no result")),
        },
        Some("failed") => {
            let message = result
                .pointer("/error/message")
                .and_then(Value::as_str)
                .unwrap_or("the task failed without a message");
            Ok(UpstreamTaskState::Failed(
                message.chars().take(MAX_FAILURE_CHARS).collect(),
            ))
        }
        Some("cancelled") => Ok(UpstreamTaskState::Cancelled),
        _ => Err(bad("the MCP server's task has no known status")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_task_id_is_kept_only_when_it_is_short_visible_ascii() {
        assert_eq!(created(&json!({"taskId": "t-1"})).unwrap().id, "t-1");
        for id in [
            json!(""),
            json!("a b"),
            json!("é"),
            json!(7),
            json!("x".repeat(257)),
        ] {
            let err = created(&json!({ "taskId": id })).unwrap_err();
            assert_eq!(err.kind, CallErrorKind::BadReply, "{id}");
        }
    }

    #[test]
    fn states_are_read_from_the_detailed_task() {
        let done =
            json!({"status": "completed", "result": {"content": [{"type": "text", "text": "ok"}]}});
        let UpstreamTaskState::Completed(Ok(result)) = state(&done, false).unwrap() else {
            panic!("completed");
        };
        assert_eq!(result.text, "ok");
        let tool_error = json!({"status": "completed", "result": {"content": [{"type": "text", "text": "no"}], "isError": true}});
        let UpstreamTaskState::Completed(Err(e)) = state(&tool_error, false).unwrap() else {
            panic!("tool error");
        };
        assert_eq!(e.kind, CallErrorKind::ToolError);
        let failed =
            json!({"status": "failed", "error": {"code": -32603, "message": "x".repeat(5000)}});
        let UpstreamTaskState::Failed(message) = state(&failed, false).unwrap() else {
            panic!("failed");
        };
        assert_eq!(message.len(), MAX_FAILURE_CHARS);
        let asks =
            json!({"status": "input_required", "inputRequests": {"k": {"method": "roots/list"}}});
        let UpstreamTaskState::InputRequired(requests) = state(&asks, false).unwrap() else {
            panic!("input_required");
        };
        assert!(requests.contains_key("k"));
        assert!(state(&json!({"status": "input_required"}), false).is_err());
        assert!(
            state(
                &json!({"status": "input_required", "inputRequests": {}}),
                false
            )
            .is_err()
        );
        assert!(state(&json!({"status": "done"}), false).is_err());
        assert!(state(&json!({"status": "completed"}), false).is_err());
    }
}
