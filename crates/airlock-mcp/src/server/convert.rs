//! Translation between the port's vocabulary and rmcp's wire types: the only place that decides
//! what a client sees for a tool list, an outcome or a host error.
//!
//! Guarantees: a failed, denied, refused or withdrawn call is always `isError: true`; a parked
//! call is a non-error result whose text starts with a capitalised "NOT EXECUTED YET" / "NOT
//! SETTLED YET" / "NOT ANSWERED YET" / "NOT FINISHED YET" and whose `structuredContent` is the
//! awaiting payload with `await_with`;
//! host internals never reach the client (they are logged).

use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::{Map, Value, json};

use crate::host::{HostCall, HostError, HostOutcome, ParkedStatus, ToolDescriptor};

/// The name of the built-in tool that waits for a parked call's decision.
pub const AWAIT_TOOL: &str = "airlock_await_decision";

/// A descriptor as an MCP tool, with airlock's own hints as annotations.
pub(super) fn to_tool(descriptor: ToolDescriptor) -> Tool {
    let annotations = ToolAnnotations::new()
        .read_only(descriptor.read_only)
        .destructive(descriptor.destructive)
        .idempotent(descriptor.idempotent);
    Tool::new(
        descriptor.name,
        descriptor.description,
        Arc::new(descriptor.input_schema),
    )
    .with_annotations(annotations)
}

/// The built-in await tool.
pub(super) fn await_tool() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "invocation_id": {
                "type": "string",
                "description": "The invocation_id of the call that is waiting."
            },
            "wait_seconds": {
                "type": "integer",
                "minimum": 0,
                "maximum": 25,
                "description": "How long to wait for the decision, at most 25 (the default)."
            }
        },
        "required": ["invocation_id"],
        "additionalProperties": false
    });
    let schema: JsonObject = match schema {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    // It runs nothing a person has not already approved, and awaiting twice changes nothing.
    let annotations = ToolAnnotations::new()
        .read_only(false)
        .destructive(false)
        .idempotent(true);
    Tool::new(
        AWAIT_TOOL,
        "Wait for a person's decision on a tool call that returned status awaiting_approval, \
         in_doubt or awaiting_answer, and get its real result. Waits up to wait_seconds (at most \
         25); if still undecided it returns the waiting status again: call it again.",
        Arc::new(schema),
    )
    .with_annotations(annotations)
}

/// A host outcome as a `tools/call` result.
pub(super) fn to_call_result(outcome: HostOutcome) -> CallToolResult {
    match outcome {
        HostOutcome::Completed {
            text,
            structured,
            is_error,
        } => {
            let mut result = if is_error {
                CallToolResult::error(vec![ContentBlock::text(text)])
            } else {
                CallToolResult::success(vec![ContentBlock::text(text)])
            };
            result.structured_content = structured;
            result
        }
        HostOutcome::Parked {
            status,
            invocation_id,
            tool,
            expires_at,
        } => parked(status, &invocation_id, &tool, expires_at.as_deref()),
        HostOutcome::Denied { reason } => {
            let payload = json!({ "denied": reason });
            let mut result = CallToolResult::error(vec![ContentBlock::text(payload.to_string())]);
            result.structured_content = Some(payload);
            result
        }
        HostOutcome::Refused { message } => {
            CallToolResult::error(vec![ContentBlock::text(message)])
        }
        HostOutcome::Withdrawn => CallToolResult::error(vec![ContentBlock::text(
            "withdrawn: the caller cancelled this call while it waited; it did not run",
        )]),
    }
}

/// What the await tool returns: a settled call's text for the model, with
/// `{status, decided_by, result}` as its structured content; anything else as [`to_call_result`].
/// (Tasks return the call's own result instead, exactly as `tools/call` would have.)
pub(super) fn awaited(call: HostCall) -> CallToolResult {
    let HostOutcome::Completed {
        text,
        structured,
        is_error,
    } = call.outcome
    else {
        return to_call_result(call.outcome);
    };
    let result = structured.unwrap_or_else(|| Value::String(text.clone()));
    let settled = json!({
        "status": if is_error { "failed" } else { "completed" },
        "decided_by": call.decided_by,
        "result": result,
    });
    to_call_result(HostOutcome::Completed {
        text,
        structured: Some(settled),
        is_error,
    })
}

/// The awaiting payload: a normal result (the call did not fail), worded so that a model
/// cannot take it for the tool's output.
fn parked(
    status: ParkedStatus,
    invocation_id: &str,
    tool: &str,
    expires_at: Option<&str>,
) -> CallToolResult {
    let payload = json!({
        "status": status.as_str(),
        "invocation_id": invocation_id,
        "tool": tool,
        "expires_at": expires_at,
        "await_with": {
            "tool": AWAIT_TOOL,
            "arguments": { "invocation_id": invocation_id }
        }
    });
    let headline = match status {
        ParkedStatus::AwaitingApproval => {
            "NOT EXECUTED YET: this call is waiting for a person's approval; nothing has run."
        }
        ParkedStatus::InDoubt => {
            "NOT SETTLED YET: it is not known whether this call ran; a person must settle it."
        }
        ParkedStatus::AwaitingAnswer => {
            "NOT ANSWERED YET: this call is waiting for a person's answer."
        }
        ParkedStatus::Running => {
            "NOT FINISHED YET: this call was approved and is running; its result is not in yet."
        }
    };
    let text = format!(
        "{headline} This is not the tool's result. To get the result, call {AWAIT_TOOL} with \
         {{\"invocation_id\": {id}}} (repeat while it is still waiting).\n{payload}",
        id = Value::String(invocation_id.to_owned()),
    );
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(payload);
    result
}

/// A host error as what the client sees: the model reads a missing invocation; an unknown tool
/// or scope is a request that cannot be routed; internals are logged and never sent.
pub(super) fn from_host_error(err: HostError) -> Result<CallToolResult, ErrorData> {
    match err {
        HostError::NotFound(what) => Ok(CallToolResult::error(vec![ContentBlock::text(format!(
            "not found: {what}"
        ))])),
        other => Err(to_error_data(other)),
    }
}

/// A host error as a JSON-RPC error.
pub(super) fn to_error_data(err: HostError) -> ErrorData {
    match err {
        HostError::UnknownTool(name) => {
            ErrorData::invalid_params(format!("unknown tool: {name}"), None)
        }
        HostError::UnknownScope(name) => {
            ErrorData::invalid_params(format!("unknown agent: {name}"), None)
        }
        HostError::NotFound(what) => ErrorData::invalid_params(format!("not found: {what}"), None),
        HostError::Internal(detail) => {
            tracing::error!(detail, "MCP endpoint: the tool host failed");
            ErrorData::internal_error("internal error", None)
        }
    }
}
