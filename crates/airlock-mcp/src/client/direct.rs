//! One `tools/call` as one HTTP request, with no session around it, for the upstreams with
//! which the protocol lets airlock skip the handshake (docs/rules.md MCP-27, MCP-28).
//!
//! Guarantees: the same guard, pin, deadline, body cap and delivery rules (MCP-19, MCP-23) as a
//! short session — the request goes through the same guarded HTTP client — and no rmcp client
//! is built: the request is serialized straight from the caller's arguments (never copied) and
//! the reply is parsed once, as JSON: the answer is the JSON body, or the first event of an
//! event stream that carries a result or an error. Nothing here panics.
//!
//! The same one-request exchange carries the tasks extension's `tasks/get` and `tasks/cancel`
//! (`upstream_task`) and a `prompts/get` that relays a round (`catalog`, MCP-81); on 2026-07-28 every request names its method and its target in the
//! `Mcp-Method` and `Mcp-Name` headers, as that revision requires (SEP-2243).

use std::collections::HashMap;

use airlock_egress::{Delivery, GuardedClient};
use futures::StreamExt;
use http::{HeaderName, HeaderValue};
use rmcp::model::{JsonObject, ProtocolVersion, RequestMetaObject, TASKS_EXTENSION_ID};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::client::content::to_tool_result;
use crate::client::session::{self, Prepared, client_info, delivered};
use crate::client::target::{IDEMPOTENCY_META_KEY, McpTarget, ToolCall};
use crate::client::transport::{GuardedHttp, Reply, Sent, not_json_rpc};
use crate::client::upstream_task::{self, CallAnswer};
use crate::error::{CallErrorKind, McpCallError};
use crate::relay;
use crate::rounds::{self, Round};

/// How a handshake-free call is framed.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Framing<'a> {
    /// 2026-07-28: every request carries the client's context in `_meta`.
    Modern,
    /// A session-less legacy upstream whose handshake settled on this revision earlier.
    Kept(&'a str),
}

#[derive(Serialize)]
struct Request<P> {
    jsonrpc: &'static str,
    id: u32,
    method: &'static str,
    params: P,
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

/// Calls one remote tool with one request. With `offer_task` (a 2026-07-28 call whose client
/// opted into tasks, MCP-76) the request declares the tasks extension and the upstream may
/// answer with a task of its own; otherwise a task answer is a bad reply.
///
/// # Errors
/// As [`crate::McpClient::call_tool`].
pub(crate) async fn call(
    guard: &GuardedClient,
    target: &McpTarget,
    framing: Framing<'_>,
    call: &ToolCall,
    offer_task: bool,
) -> Result<CallAnswer, McpCallError> {
    let arguments = call.arguments_object()?;
    let round = (target.downstream.round.clone()).filter(|_| matches!(framing, Framing::Modern));
    let (version, mut meta) = match framing {
        Framing::Modern => (
            ProtocolVersion::V_2026_07_28.to_string(),
            modern_meta(offer_task, round.as_ref()),
        ),
        Framing::Kept(version) => (version.to_owned(), Map::new()),
    };
    if let Some(key) = &call.idempotency_key {
        meta.insert(IDEMPOTENCY_META_KEY.to_owned(), Value::String(key.clone()));
    }
    relay::ask_upstream(&mut meta, target.downstream.relay.as_ref());
    let params = Params {
        name: &call.remote_name,
        arguments,
        meta,
        input_responses: round.as_ref().and_then(|r| r.responses.clone()),
        request_state: round.as_ref().and_then(|r| r.upstream_state.clone()),
    };
    let named = matches!(framing, Framing::Modern).then_some(call.remote_name.as_str());
    let sent = Exchange {
        version: &version,
        method: "tools/call",
        name: named,
    };
    let answer = exchange(guard, target, sent, params).await?;
    if let Some(round) = &round {
        round.note(&answer);
    }
    let relays_round = target.downstream.round.is_some();
    read_answer(&answer, offer_task, relays_round).map_err(answered)
}

/// An error read from the server's answer: whatever it says, the request was answered (MCP-23).
pub(crate) fn answered(error: McpCallError) -> McpCallError {
    McpCallError {
        delivery: Delivery::Answered,
        ..error
    }
}

/// One request of the exchange: its revision, method and `Mcp-Name` (2026-07-28 only).
pub(crate) struct Exchange<'a> {
    pub(crate) version: &'a str,
    pub(crate) method: &'static str,
    pub(crate) name: Option<&'a str>,
}

/// Sends one JSON-RPC request with `params` to `target` under the call's deadline and returns
/// the answer's JSON (a result or an error, not yet read).
pub(crate) async fn exchange<P: Serialize>(
    guard: &GuardedClient,
    target: &McpTarget,
    sent: Exchange<'_>,
    params: P,
) -> Result<Value, McpCallError> {
    let Prepared { http, deadline, .. } = session::prepare(guard, target).await?;
    let request = Request {
        jsonrpc: "2.0",
        id: 1,
        method: sent.method,
        params,
    };
    let body = serde_json::to_vec(&request).map_err(|e| {
        McpCallError::new(
            CallErrorKind::Config,
            format!("the request cannot be serialized: {e}"),
        )
    })?;
    let budget = guard.policy().deadline;
    let answer = tokio::time::timeout_at(deadline, send(&http, body, &sent)).await;
    let answer = match answer {
        Err(_elapsed) => Err(McpCallError::timeout(budget)),
        Ok(answer) => answer,
    };
    answer.map_err(|e| delivered(e, &http))
}

/// What 2026-07-28 asks of every request's `_meta`: the revision, who the client is and what
/// it can do (the same context a `server/discover` carries), the tasks extension among it when
/// `tasks` (MCP-76) — and for a relayed round, what the endpoint's client can do (MCP-69).
pub(crate) fn modern_meta(tasks: bool, round: Option<&Round>) -> Map<String, Value> {
    let info = client_info();
    let mut capabilities = info.capabilities;
    if tasks {
        capabilities
            .extensions
            .get_or_insert_with(Default::default)
            .insert(TASKS_EXTENSION_ID.to_owned(), JsonObject::new());
    }
    let meta = RequestMetaObject::with_client_context(
        ProtocolVersion::V_2026_07_28,
        info.client_info,
        capabilities,
    );
    let mut meta = match serde_json::to_value(meta) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    if let Some(round) = round {
        // What the endpoint's client can answer replaces airlock's own for the three kinds of
        // input request; the rest (the tasks extension) stays as stated above.
        let stated = meta
            .entry(CLIENT_CAPABILITIES_META.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(stated) = stated {
            for (_, kind) in rounds::NEEDED {
                stated.remove(kind);
            }
            stated.extend(round.capabilities.clone());
        }
    }
    meta
}

/// Where 2026-07-28 carries a request's client capabilities.
pub(crate) const CLIENT_CAPABILITIES_META: &str = "io.modelcontextprotocol/clientCapabilities";

/// Sends the request and returns the answer's JSON.
async fn send(
    http: &GuardedHttp,
    body: Vec<u8>,
    sent: &Exchange<'_>,
) -> Result<Value, McpCallError> {
    let mut headers = HashMap::new();
    if let Ok(value) = HeaderValue::from_str(sent.version) {
        headers.insert(HeaderName::from_static("mcp-protocol-version"), value);
    }
    if let Some(name) = sent.name {
        headers.insert(
            HeaderName::from_static("mcp-method"),
            HeaderValue::from_static(sent.method),
        );
        // A name a header cannot carry as it is goes without the header; the upstream judges.
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

/// A JSON-RPC answer's result object, or its error as the server's own message.
pub(crate) fn result_of(answer: &Value) -> Result<&Value, McpCallError> {
    if let Some(error) = answer.get("error") {
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("the MCP server answered with an error without a message");
        return Err(McpCallError::new(CallErrorKind::JsonRpc, message));
    }
    match answer.get("result") {
        Some(result) if result.is_object() => Ok(result),
        _ => Err(not_json_rpc()),
    }
}

/// A `tools/call` answer: the tool's result, or — only when one was offered — the upstream's
/// task.
fn read_answer(
    answer: &Value,
    offered_task: bool,
    relays_round: bool,
) -> Result<CallAnswer, McpCallError> {
    let result = result_of(answer)?;
    match result.get("resultType").and_then(Value::as_str) {
        Some("task") if offered_task => upstream_task::created(result).map(CallAnswer::Task),
        Some("task") => Err(McpCallError::new(
            CallErrorKind::BadReply,
            "the MCP server answered with a task that was not asked for",
        )),
        _ => to_tool_result(result, relays_round).map(CallAnswer::Result),
    }
}
