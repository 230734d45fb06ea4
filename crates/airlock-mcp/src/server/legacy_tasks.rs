//! The 2025-11-25 experimental Tasks shape, which rmcp no longer models: task-augmented
//! `tools/call` (`params.task`), `tasks/get`, `tasks/result` and `tasks/cancel`, answered here
//! before rmcp sees the request, for requests of that protocol revision only.
//!
//! Guarantees: the server advertises `capabilities.tasks` (cancel, `tools/call`) in a
//! 2025-11-25 `initialize` and marks every tool but the await tool `taskSupport: "optional"`;
//! a task-augmented call is recorded like any other and answered with `{"task": …}`; the task
//! is the ledger row, so a task survives restarts and is seen only by the principal who made it
//! from the same scope. `tasks/result` blocks until the call settles, woken by the ledger (no
//! polling), and carries the `related-task` metadata — except at shutdown, when it ends at
//! once with a [`SHUTTING_DOWN`] error telling the client to ask again; cancelling a settled task is -32602, as
//! that revision requires. Every other request goes on to rmcp untouched. The step reads the
//! request as admission parsed it.

use std::time::Duration;

use axum::body::{Body, to_bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use rmcp::model::TaskStatus;
use serde_json::{Map, Value, json};

use super::convert::AWAIT_TOOL;
use super::request::{Admitted, AdmittedRequest};
use super::tasks::{self, Era};
use crate::host::{CallKey, HostCall, HostError, ToolHost};

/// The only revision with this task shape.
const REVISION: &str = "2025-11-25";

/// The JSON-RPC error of a `tasks/result` cut short by shutdown (implementation-defined range).
const SHUTTING_DOWN: i64 = -32000;

/// How long one `tasks/result` wait lasts before the row is read again (a safety net for a
/// missed notification); the request itself waits until the call settles or the client goes
/// away (which drops the future).
const RESULT_WAIT: Duration = super::MAX_AWAIT;

/// An edit of rmcp's `result` object before it is sent.
pub(super) type Edit = fn(&mut Map<String, Value>);

/// What this step makes of a request.
pub(super) enum Legacy {
    /// Answered here; rmcp never sees the request.
    Answered(Response),
    /// rmcp answers; its result gets this edit first, if any.
    ToRmcp(Option<Edit>),
}

/// The step: answers the 2025-11-25 task methods, and says which answers of rmcp to decorate
/// (`initialize` and `tools/list` of that revision).
pub(super) async fn step(host: &dyn ToolHost, request: &AdmittedRequest) -> Legacy {
    // Another revision's request (the header names it) is none of this step's business; an
    // `initialize` carries no header yet, so a request without one is looked at.
    let version = request.protocol_version();
    if version.is_some_and(|v| v != REVISION.as_bytes()) {
        return Legacy::ToRmcp(None);
    }
    let revision = version == Some(REVISION.as_bytes());
    let (method, params) = (request.method(), request.params());
    let admitted = request.admitted();
    let answer = match method {
        "initialize" if params["protocolVersion"] == REVISION => {
            return Legacy::ToRmcp(Some(advertise));
        }
        "tools/list" if revision => return Legacy::ToRmcp(Some(mark_tools)),
        "tools/call" if revision && params["task"].is_object() => {
            call(host, admitted, params).await
        }
        "tasks/get" | "tasks/result" | "tasks/cancel" if revision => {
            task_method(host, admitted, method, params).await
        }
        _ => return Legacy::ToRmcp(None),
    };
    Legacy::Answered(reply(request.id(), answer))
}

async fn task_method(
    host: &dyn ToolHost,
    admitted: &Admitted,
    method: &str,
    params: &Value,
) -> Answer {
    let Some(task_id) = params["taskId"].as_str() else {
        return Err(rpc(-32602, "params.taskId must be a string"));
    };
    match method {
        "tasks/get" => get(host, admitted, task_id).await,
        "tasks/result" => result(host, admitted, task_id).await,
        _ => cancel(host, admitted, task_id).await,
    }
}

type Answer = Result<Value, Value>;

fn rpc(code: i64, message: impl Into<String>) -> Value {
    json!({"code": code, "message": message.into()})
}

fn host_error(err: HostError) -> Value {
    match err {
        HostError::NotFound(what) => rpc(-32602, format!("task not found: {what}")),
        HostError::UnknownTool(name) => rpc(-32602, format!("unknown tool: {name}")),
        HostError::UnknownScope(name) => rpc(-32602, format!("unknown agent: {name}")),
        HostError::InvalidParams(why) => rpc(-32602, why),
        HostError::Internal(detail) => {
            tracing::error!(detail, "MCP endpoint: the tool host failed");
            rpc(-32603, "internal error")
        }
        // Not answers of a task's host calls; mapped as everywhere else should one appear.
        other @ (HostError::ResourceNotFound(_)
        | HostError::Upstream(_)
        | HostError::MissingClientCapabilities(_)) => {
            serde_json::to_value(super::convert::to_error_data(other)).unwrap_or_default()
        }
    }
}

fn reply(id: &Value, answer: Answer) -> Response {
    let body = match answer {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
    };
    (StatusCode::OK, axum::Json(body)).into_response()
}

/// The 2025-11-25 `Task` object.
fn task_json(call: &HostCall) -> Value {
    let task = tasks::task(call, Era::V2025);
    let mut object = json!({
        "taskId": task.task_id,
        "status": task.status,
        "createdAt": task.created_at,
        "lastUpdatedAt": task.last_updated_at,
        "ttl": null,
        "pollInterval": tasks::POLL_INTERVAL_MS,
    });
    if let Some(message) = task.status_message {
        object["statusMessage"] = Value::String(message);
    }
    object
}

async fn call(host: &dyn ToolHost, admitted: &Admitted, params: &Value) -> Answer {
    let Some(name) = params["name"].as_str() else {
        return Err(rpc(-32602, "params.name must be a string"));
    };
    let arguments = match &params["arguments"] {
        Value::Null => Value::Object(Map::new()),
        object @ Value::Object(_) => object.clone(),
        _ => return Err(rpc(-32602, "params.arguments must be an object")),
    };
    if name == AWAIT_TOOL {
        return Err(rpc(-32602, format!("{AWAIT_TOOL} cannot run as a task")));
    }
    let key = CallKey::from_meta(params["_meta"].as_object()).map_err(|why| rpc(-32602, why))?;
    let call = host
        .call_tool_keyed(
            &admitted.scope,
            &admitted.caller,
            name,
            arguments,
            key.as_ref(),
        )
        .await
        .map_err(host_error)?;
    Ok(json!({ "task": task_json(&call) }))
}

async fn get(host: &dyn ToolHost, admitted: &Admitted, task_id: &str) -> Answer {
    let call = host
        .await_decision(&admitted.scope, &admitted.caller, task_id, Duration::ZERO)
        .await
        .map_err(host_error)?;
    Ok(task_json(&call))
}

async fn result(host: &dyn ToolHost, admitted: &Admitted, task_id: &str) -> Answer {
    let call = loop {
        let call = host
            .await_decision(&admitted.scope, &admitted.caller, task_id, RESULT_WAIT)
            .await
            .map_err(host_error)?;
        if !call.is_parked() {
            break call;
        }
        if host.long_polls_ended() {
            // The row stays parked; a restarted server answers the same request.
            return Err(rpc(
                SHUTTING_DOWN,
                format!(
                    "the server is shutting down; task {task_id} is still working: call tasks/result again"
                ),
            ));
        }
    };
    let mut result = tasks::result_object(call.outcome);
    result.insert(
        "_meta".to_owned(),
        json!({"io.modelcontextprotocol/related-task": {"taskId": task_id}}),
    );
    Ok(Value::Object(result))
}

async fn cancel(host: &dyn ToolHost, admitted: &Admitted, task_id: &str) -> Answer {
    let before = host
        .await_decision(&admitted.scope, &admitted.caller, task_id, Duration::ZERO)
        .await
        .map_err(host_error)?;
    let (status, _) = tasks::status(&before, Era::V2025);
    if status != TaskStatus::Working {
        let status = serde_json::to_value(status).unwrap_or_default();
        return Err(rpc(
            -32602,
            format!("cannot cancel task {task_id}: it is already {status}"),
        ));
    }
    let after = host
        .withdraw(&admitted.scope, &admitted.caller, task_id)
        .await
        .map_err(host_error)?;
    if after.is_parked() {
        // Running or in doubt: it may be executing; withdrawing now would lie about it.
        let message = task_json(&after)["statusMessage"].clone();
        return Err(rpc(
            -32602,
            format!(
                "cannot cancel task {task_id}: {}",
                message.as_str().unwrap_or("it is running")
            ),
        ));
    }
    Ok(task_json(&after))
}

/// Rewrites a JSON-RPC response body with `edit` applied to its `result`.
pub(super) async fn decorate(response: Response, edit: Edit) -> Response {
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = to_bytes(body, usize::MAX).await else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let mut message: Value = match serde_json::from_slice(&bytes) {
        Ok(message) => message,
        Err(_) => return Response::from_parts(parts, Body::from(bytes)),
    };
    if let Some(result) = message.get_mut("result").and_then(Value::as_object_mut) {
        edit(result);
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(message.to_string()))
}

fn advertise(result: &mut Map<String, Value>) {
    if result.get("protocolVersion") != Some(&json!(REVISION)) {
        return;
    }
    if let Some(capabilities) = result
        .get_mut("capabilities")
        .and_then(Value::as_object_mut)
    {
        capabilities.insert(
            "tasks".to_owned(),
            json!({"cancel": {}, "requests": {"tools": {"call": {}}}}),
        );
    }
}

fn mark_tools(result: &mut Map<String, Value>) {
    let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) else {
        return;
    };
    for tool in tools.iter_mut().filter(|t| t["name"] != AWAIT_TOOL) {
        if let Some(tool) = tool.as_object_mut() {
            tool.insert("execution".to_owned(), json!({"taskSupport": "optional"}));
        }
    }
}
