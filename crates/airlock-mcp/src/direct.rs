//! One `tools/call` as one HTTP request, with no session around it, for the upstreams with
//! which the protocol lets airlock skip the handshake (docs/rules.md MCP-27, MCP-28).
//!
//! Guarantees: the same guard, pin, deadline, body cap and delivery rules (MCP-19, MCP-23) as a
//! short session — the request goes through the same guarded HTTP client — and no rmcp client
//! is built: the request is serialized straight from the caller's arguments (never copied) and
//! the reply is parsed once, as JSON: the answer is the JSON body, or the first event of an
//! event stream that carries a result or an error. Nothing here panics.

use std::collections::HashMap;

use airlock_egress::GuardedClient;
use futures::StreamExt;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ProtocolVersion, RequestMetaObject};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::content::to_tool_result;
use crate::error::{CallErrorKind, McpCallError};
use crate::http::{GuardedHttp, Reply, Sent, not_json_rpc};
use crate::relay;
use crate::rounds::{self, Round};
use crate::session::{self, Prepared, client_info, delivered};
use crate::target::{IDEMPOTENCY_META_KEY, McpTarget, ToolCall, ToolResult};

/// How a handshake-free call is framed.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Framing<'a> {
    /// 2026-07-28: every request carries the client's context in `_meta`.
    Modern,
    /// A session-less legacy upstream whose handshake settled on this revision earlier.
    Kept(&'a str),
}

#[derive(Serialize)]
struct Request<'a> {
    jsonrpc: &'static str,
    id: u32,
    method: &'static str,
    params: Params<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Params<'a> {
    name: &'a str,
    arguments: &'a Map<String, Value>,
    #[serde(rename = "_meta", skip_serializing_if = "Map::is_empty")]
    meta: Map<String, Value>,
    /// A relayed round's answers, as the client sent them (MCP-70).
    #[serde(skip_serializing_if = "Option::is_none")]
    input_responses: Option<Value>,
    /// The upstream's own state of the previous round, as it sent it (MCP-70).
    #[serde(skip_serializing_if = "Option::is_none")]
    request_state: Option<String>,
}

/// Calls one remote tool with one request.
///
/// # Errors
/// As [`crate::McpClient::call_tool`].
pub(crate) async fn call(
    guard: &GuardedClient,
    target: &McpTarget,
    framing: Framing<'_>,
    call: &ToolCall,
) -> Result<ToolResult, McpCallError> {
    let arguments = call.arguments_object()?;
    let Prepared { http, deadline, .. } = session::prepare(guard, target).await?;
    let round = rounds::current();
    let (version, meta) = match framing {
        Framing::Modern => (
            ProtocolVersion::V_2026_07_28.to_string(),
            modern_meta(round.as_ref()),
        ),
        Framing::Kept(version) => (version.to_owned(), Map::new()),
    };
    let round = round.filter(|_| matches!(framing, Framing::Modern));
    let mut meta = meta;
    if let Some(key) = &call.idempotency_key {
        meta.insert(IDEMPOTENCY_META_KEY.to_owned(), Value::String(key.clone()));
    }
    relay::ask_upstream(&mut meta);
    let request = Request {
        jsonrpc: "2.0",
        id: 1,
        method: "tools/call",
        params: Params {
            name: &call.remote_name,
            arguments,
            meta,
            input_responses: round.as_ref().and_then(|r| r.responses.clone()),
            request_state: round.and_then(|r| r.upstream_state),
        },
    };
    let body = serde_json::to_vec(&request).map_err(|e| {
        McpCallError::new(
            CallErrorKind::Config,
            format!("the call cannot be serialized: {e}"),
        )
    })?;
    let budget = guard.policy().deadline;
    // 2026-07-28 routes on the method and name headers (SEP-2243); the session era has none.
    let routed = matches!(framing, Framing::Modern).then_some(call.remote_name.as_str());
    let answer = tokio::time::timeout_at(deadline, send(&http, body, &version, routed)).await;
    let answer = match answer {
        Err(_elapsed) => Err(McpCallError::timeout(budget)),
        Ok(answer) => answer.and_then(|a| read_answer(&a)),
    };
    answer.map_err(|e| delivered(e, &http))
}

/// What 2026-07-28 asks of every request's `_meta`: the revision, who the client is and what
/// it can do (the same context a `server/discover` carries) — for a relayed round, what the
/// endpoint's client can do (MCP-69).
fn modern_meta(round: Option<&Round>) -> Map<String, Value> {
    let info = client_info();
    let meta = RequestMetaObject::with_client_context(
        ProtocolVersion::V_2026_07_28,
        info.client_info,
        info.capabilities,
    );
    let mut meta = match serde_json::to_value(meta) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    if let Some(round) = round {
        let stated = Value::Object(round.capabilities.clone());
        meta.insert(CLIENT_CAPABILITIES_META.to_owned(), stated);
    }
    meta
}

/// Where 2026-07-28 carries a request's client capabilities.
pub(crate) const CLIENT_CAPABILITIES_META: &str = "io.modelcontextprotocol/clientCapabilities";

/// Sends the request and returns the answer's JSON; `routed` is the tool's name when the
/// request carries the 2026-07-28 routing headers.
async fn send(
    http: &GuardedHttp,
    body: Vec<u8>,
    version: &str,
    routed: Option<&str>,
) -> Result<Value, McpCallError> {
    let mut headers = HashMap::new();
    if let Ok(value) = HeaderValue::from_str(version) {
        headers.insert(HeaderName::from_static("mcp-protocol-version"), value);
    }
    if let Some(name) = routed {
        let method = HeaderValue::from_static("tools/call");
        headers.insert(HeaderName::from_static("mcp-method"), method);
        if let Ok(value) = HeaderValue::from_str(name) {
            headers.insert(HeaderName::from_static("mcp-name"), value);
        }
    }
    let sent = Sent {
        body,
        awaits_reply: true,
        is_call: true,
    };
    let failed = |http: &GuardedHttp| {
        http.failure().unwrap_or_else(|| {
            McpCallError::new(CallErrorKind::Other, "the MCP call failed before an answer")
        })
    };
    match http.exchange(sent, None, headers).await {
        Err(_) => Err(failed(http)),
        Ok(Reply::Json(body, _)) => serde_json::from_slice(&body).map_err(|_| not_json_rpc()),
        Ok(Reply::Accepted) => Err(not_json_rpc()),
        Ok(Reply::Sse(mut events, _)) => {
            while let Some(event) = events.next().await {
                let Ok(event) = event else {
                    return Err(failed(http));
                };
                let Some(value) = event
                    .data
                    .and_then(|d| serde_json::from_str::<Value>(&d).ok())
                else {
                    continue;
                };
                // Notifications and server requests come first; the answer has an id.
                if value.get("id").is_some()
                    && (value.get("result").is_some() || value.get("error").is_some())
                {
                    return Ok(value);
                }
            }
            Err(http.failure().unwrap_or_else(|| {
                McpCallError::new(
                    CallErrorKind::ConnectionLost,
                    "the MCP server's event stream ended without the call's answer",
                )
            }))
        }
    }
}

/// A JSON-RPC answer: its error as the server's own message, its result as the tool's.
fn read_answer(answer: &Value) -> Result<ToolResult, McpCallError> {
    if let Some(error) = answer.get("error") {
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("the MCP server answered with an error without a message");
        return Err(McpCallError::new(CallErrorKind::JsonRpc, message));
    }
    match answer.get("result") {
        Some(result) if result.is_object() => to_tool_result(result),
        _ => Err(not_json_rpc()),
    }
}
