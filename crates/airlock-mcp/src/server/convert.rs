//! Translation between the port's vocabulary and rmcp's wire types: the only place that decides
//! what a client sees for a tool list, an outcome or a host error.
//!
//! Guarantees: a failed, denied, refused or withdrawn call is always `isError: true`; a parked
//! call is a non-error result whose text is the awaiting payload as JSON (the same object as its
//! `structuredContent`: `status`, a `message` starting with a capitalised "NOT EXECUTED YET" /
//! "NOT SETTLED YET" / "NOT ANSWERED YET" / "NOT FINISHED YET", and `await_with`); host
//! internals never reach the client (they are logged).

use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock, ErrorCode, JsonObject, Tool, ToolAnnotations};
use serde_json::{Map, Value, json};

use crate::host::{HostCall, HostError, HostOutcome, ParkedStatus, ToolDescriptor};

/// The name of the built-in tool that waits for a parked call's decision (no declaration may
/// take it: the spec loader refuses one that does).
pub const AWAIT_TOOL: &str = airlock_spec::AWAIT_TOOL;

/// A descriptor as an MCP tool, with airlock's own hints as annotations.
pub(super) fn to_tool(descriptor: ToolDescriptor) -> Tool {
    let annotations = ToolAnnotations::new()
        .read_only(descriptor.read_only)
        .destructive(descriptor.destructive)
        .idempotent(descriptor.idempotent);
    let tool = Tool::new(
        descriptor.name,
        descriptor.description,
        Arc::new(descriptor.input_schema),
    )
    .with_annotations(annotations);
    match descriptor.output_schema {
        Some(schema) => tool.with_raw_output_schema(Arc::new(schema)),
        None => tool,
    }
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
            content,
            is_error,
        } => {
            let blocks = if content.is_empty() {
                vec![ContentBlock::text(text)]
            } else {
                content.iter().map(to_block).collect()
            };
            let mut result = if is_error {
                CallToolResult::error(blocks)
            } else {
                CallToolResult::success(blocks)
            };
            result.structured_content = structured;
            result
        }
        HostOutcome::Parked {
            status,
            invocation_id,
            tool,
            expires_at,
            note,
            ..
        } => parked(
            status,
            &invocation_id,
            &tool,
            (expires_at.as_deref(), note.as_deref()),
        ),
        HostOutcome::Denied { reason } => json_result(json!({ "denied": reason }), true),
        // The status word says what happened; `denied` keeps the shape a model already reads
        // for a call that was not run (POLICY-15).
        HostOutcome::Expired { reason } => {
            json_result(json!({ "status": "expired", "denied": reason }), true)
        }
        HostOutcome::Abandoned { reason } => {
            json_result(json!({ "status": "abandoned", "abandoned": reason }), true)
        }
        HostOutcome::Refused { message } => {
            CallToolResult::error(vec![ContentBlock::text(message)])
        }
        HostOutcome::Withdrawn => CallToolResult::error(vec![ContentBlock::text(
            "withdrawn: the caller cancelled this call while it waited; it did not run",
        )]),
        // Only a 2026-07-28 `tools/call` relays the questions (MCP-68); read anywhere else, the
        // round is over and a new call asks again.
        HostOutcome::InputRequired { .. } => CallToolResult::error(vec![ContentBlock::text(
            "input required: the tool's server asked the client for input in this round; call the tool again to be asked",
        )]),
        HostOutcome::TaskFailed { message } => CallToolResult::error(vec![ContentBlock::text(
            format!("failed: the upstream's task failed: {message}"),
        )]),
    }
}

/// One upstream block as the client gets it: unchanged (MCP-33); a block of a type this
/// revision does not know becomes its text placeholder rather than failing the whole result.
fn to_block(block: &Value) -> ContentBlock {
    serde_json::from_value(block.clone())
        .unwrap_or_else(|_| ContentBlock::text(crate::client::content::block_text(block)))
}

/// What the await tool returns for a settled call: `{status, decided_by, result}` as both its
/// text and its structured content — `completed` or `failed` with the tool's result (its
/// structured content, else its text), and `approved_arguments` when the approver edited the
/// arguments it ran with (DECIDE-20), so the client's model learns its call ran otherwise; `denied` with the reason, which also stays at the top
/// level as `{"denied": reason}` (the shape a declined call has everywhere else); `expired`
/// with the same `denied` shape (nobody decided); `abandoned` with `{"abandoned": reason}`
/// (a person gave up on it in doubt). A call still waiting, refused or withdrawn reads as
/// [`to_call_result`] shows it. An upstream MCP tool's content blocks follow the payload's
/// text block, unchanged. (Tasks return the call's own result instead, exactly as `tools/call`
/// would have.)
pub(super) fn awaited(call: HostCall) -> CallToolResult {
    let decided_by = call.decided_by;
    let (settled, is_error) = match call.outcome {
        HostOutcome::Completed {
            text,
            structured,
            content,
            is_error,
        } => {
            let mut settled = json!({
                "status": if is_error { "failed" } else { "completed" },
                "decided_by": decided_by,
                "result": structured.unwrap_or(Value::String(text)),
            });
            if let Some(approved) = call.approved_arguments {
                settled["approved_arguments"] = approved;
            }
            // The upstream's own blocks follow the payload's JSON text, unchanged (MCP-33).
            let mut result = json_result(settled, is_error);
            result.content.extend(content.iter().map(to_block));
            return result;
        }
        HostOutcome::Denied { reason } => (
            not_run("denied", "denied", decided_by.as_deref(), &reason),
            true,
        ),
        HostOutcome::Expired { reason } => (
            not_run("expired", "denied", decided_by.as_deref(), &reason),
            true,
        ),
        HostOutcome::Abandoned { reason } => (
            not_run("abandoned", "abandoned", decided_by.as_deref(), &reason),
            true,
        ),
        waiting => return to_call_result(waiting),
    };
    json_result(settled, is_error)
}

/// A settled call that did not run, as the await tool shows it: its `status`, who decided, and
/// `{key: reason}` both at the top level and as the result.
fn not_run(status: &str, key: &str, decided_by: Option<&str>, reason: &str) -> Value {
    let mut settled =
        json!({ "status": status, "decided_by": decided_by, "result": { key: reason } });
    settled[key] = Value::String(reason.to_owned());
    settled
}

/// A result whose text is `payload` as JSON and whose structured content is `payload`.
fn json_result(payload: Value, is_error: bool) -> CallToolResult {
    let content = vec![ContentBlock::text(payload.to_string())];
    let mut result = if is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    result.structured_content = Some(payload);
    result
}

/// The awaiting payload: a normal result (the call did not fail) whose text is the payload as
/// JSON, so a client can parse it, and whose `message`, first after the status, tells a model in
/// words that nothing ran and how to get the result.
fn parked(
    status: ParkedStatus,
    invocation_id: &str,
    tool: &str,
    (expires_at, note): (Option<&str>, Option<&str>),
) -> CallToolResult {
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
        ParkedStatus::AwaitingCredential => {
            "NOT EXECUTED YET: this call is waiting for its caller's credential; nothing has run."
        }
        ParkedStatus::Running => {
            "NOT FINISHED YET: this call was approved and is running; its result is not in yet."
        }
    };
    let note = note.map(|n| format!(" {n}.")).unwrap_or_default();
    let message = format!(
        "{headline}{note} This is not the tool's result. To get the result, call {AWAIT_TOOL} \
         with {{\"invocation_id\": {id}}} (repeat while it is still waiting).",
        id = Value::String(invocation_id.to_owned()),
    );
    let payload = json!({
        "status": status.as_str(),
        "message": message,
        "invocation_id": invocation_id,
        "tool": tool,
        "expires_at": expires_at,
        "await_with": {
            "tool": AWAIT_TOOL,
            "arguments": { "invocation_id": invocation_id }
        }
    });
    json_result(payload, false)
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

/// -32021 (HTTP 400 on 2026-07-28) whose `requiredCapabilities` is a `ClientCapabilities`
/// object naming each capability the request needs (SEP-2575).
fn missing_capabilities(names: &[String]) -> ErrorData {
    let required: Map<String, Value> = names.iter().map(|name| (name.clone(), json!({}))).collect();
    ErrorData::new(
        ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
        format!(
            "the upstream server needs the client capability `{}`, which this request did not declare",
            names.join("`, `")
        ),
        Some(json!({ "requiredCapabilities": required })),
    )
}

impl From<HostError> for ErrorData {
    fn from(err: HostError) -> Self {
        to_error_data(err)
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
        HostError::InvalidParams(why) => ErrorData::invalid_params(why, None),
        // SEP-2164: -32602 with the URI in the data, in every revision (MCP-57).
        HostError::ResourceNotFound(uri) => ErrorData::invalid_params(
            format!("resource not found: {uri}"),
            Some(json!({ "uri": uri })),
        ),
        HostError::Upstream(message) => ErrorData::internal_error(message, None),
        HostError::MissingClientCapabilities(names) => missing_capabilities(&names),
        HostError::Internal(detail) => {
            tracing::error!(detail, "MCP endpoint: the tool host failed");
            ErrorData::internal_error("internal error", None)
        }
    }
}
