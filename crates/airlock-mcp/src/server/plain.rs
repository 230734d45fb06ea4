//! The plain `tools/call`: answered from the request admission parsed, without rmcp's
//! per-request service (docs/benchmarks.md, "Where the time goes": that service parsed the body
//! a second time, built a peer, spawned two tasks and a channel for every call).
//!
//! Guarantees:
//! - Only a request whose answer cannot differ from rmcp's takes this path: a session-era
//!   `tools/call` (no `MCP-Protocol-Version` header, or a known revision before 2026-07-28)
//!   that declares JSON, names each top-level member once, accepts both JSON and event
//!   streams (no weights or quotes to read), is not traced, carries only
//!   `name`, `arguments` and `_meta` (no task, no request state), asks for no progress and no
//!   log messages (no `progressToken`, no `io.modelcontextprotocol/` key in `_meta`, no level
//!   set by its principal), and does not call the await tool. Every other request goes to rmcp
//!   exactly as before.
//! - The answer is what rmcp sends for the same request: the same JSON-RPC envelope, built from
//!   rmcp's own message types, with the result trimmed for session-era clients as rmcp trims it
//!   (tested side by side with rmcp's answer in the endpoint's wire tests).
//! - The arguments are moved from the parsed request to the host, never copied; the call runs as
//!   a task of its own, as under rmcp, so a client that goes away never cuts it off.

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ProtocolVersion, RequestId, ServerJsonRpcMessage, ServerResult};
use serde_json::{Map, Value};

use super::handler::Endpoint;
use super::notices::Levels;
use super::request::{Admitted, AdmittedRequest, declares_json};
use crate::host::CallKey;
use airlock_egress::trace::RequestTracer;

/// A plain `tools/call`, taken apart.
pub(super) struct PlainCall {
    pub(super) admitted: Admitted,
    id: RequestId,
    name: String,
    arguments: Map<String, Value>,
    /// `Err`: the key in `_meta` is malformed (answered as rmcp answers it, -32602).
    key: Result<Option<CallKey>, String>,
}

/// `request`, which [`plain_id`] found plain and whose id it gave, taken apart.
pub(super) fn take(request: AdmittedRequest, id: RequestId) -> PlainCall {
    let (admitted, message) = request.into_message();
    // `plain_id` read every part below; what it did not see cannot be here.
    let params = match message {
        Value::Object(mut message) => message.remove("params"),
        _ => None,
    };
    let mut params = match params {
        Some(Value::Object(params)) => params,
        _ => Map::new(),
    };
    let name = match params.remove("name") {
        Some(Value::String(name)) => name,
        _ => String::new(),
    };
    let arguments = match params.remove("arguments") {
        Some(Value::Object(arguments)) => arguments,
        _ => Map::new(),
    };
    let meta = match params.get("_meta") {
        Some(Value::Object(meta)) => Some(meta),
        _ => None,
    };
    let key = CallKey::from_meta(meta);
    PlainCall {
        admitted,
        id,
        name,
        arguments,
        key,
    }
}

/// Runs `request`, which [`plain_id`] found plain and whose id it gave, through the
/// endpoint's host and answers it. The call runs as a task of its own, as under rmcp: a client
/// that goes away loses the answer, never the call (a call cut off halfway would leave its row
/// claimed, for the sweeper to find in doubt).
pub(super) async fn answer(
    endpoint: &Endpoint,
    request: AdmittedRequest,
    id: RequestId,
) -> Response {
    let call = take(request, id);
    let admitted = call.admitted.clone();
    json_reply(&run(endpoint, admitted, call).await)
}

/// Runs `call` as `admitted` (its caller, with what its request's client can take back)
/// through the endpoint's host, as a task of its own; the JSON-RPC answer.
pub(super) async fn run(
    endpoint: &Endpoint,
    admitted: Admitted,
    call: PlainCall,
) -> ServerJsonRpcMessage {
    let PlainCall {
        id,
        name,
        arguments,
        key,
        ..
    } = call;
    let result = match key {
        Ok(key) => {
            let endpoint = endpoint.clone();
            let run = async move {
                let key = key.as_ref();
                endpoint.plain_call(&admitted, &name, arguments, key).await
            };
            tokio::spawn(run).await.unwrap_or_else(|_| {
                // The host panicked; as rmcp does, the client gets an internal error.
                Err(ErrorData::internal_error("internal error", None))
            })
        }
        Err(why) => Err(ErrorData::invalid_params(why, None)),
    };
    match result {
        Ok(result) => ServerJsonRpcMessage::response(for_session_era(result), id),
        Err(error) => ServerJsonRpcMessage::error(error, Some(id)),
    }
}

/// The result as rmcp trims it for a client before 2026-07-28.
fn for_session_era(result: CallToolResult) -> ServerResult {
    let mut result = ServerResult::CallToolResult(result);
    result.strip_result_type_for_legacy_peer();
    result.strip_non_object_output_for_legacy_peer();
    result
}

/// `message` as rmcp sends a JSON answer: 200, `application/json`.
fn json_reply(message: &ServerJsonRpcMessage) -> Response {
    let Ok(body) = serde_json::to_vec(message) else {
        // Only a map with non-string keys fails to serialize; a result has none.
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    json_body(body)
}

/// `body`, a serialized JSON-RPC message, as rmcp sends a JSON answer.
pub(super) fn json_body(body: impl Into<Body>) -> Response {
    let mut response = Response::new(body.into());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

/// The request's id when it is a plain call (see the module's guarantees), else `None`.
pub(super) fn plain_id(request: &AdmittedRequest, levels: &Levels) -> Option<RequestId> {
    if levels.get(request.admitted()).is_some() {
        return None;
    }
    plain_but_logged(request)
}

/// The request's id when it is a plain call but for a log level its principal may have set.
pub(super) fn plain_but_logged(request: &AdmittedRequest) -> Option<RequestId> {
    let plain = request.is_plain_shaped()
        && declares_json(request.headers())
        && session_era(request.protocol_version())
        && accepts_json_and_streams(request.headers())
        && request.extensions().get::<RequestTracer>().is_none();
    if !plain {
        return None;
    }
    match request.id() {
        Value::String(id) => Some(RequestId::String(id.as_str().into())),
        id => id.as_i64().map(RequestId::Number),
    }
}

/// No header (rmcp takes the oldest revision) or a known revision before 2026-07-28.
pub(super) fn session_era(version: Option<&[u8]>) -> bool {
    version.is_none_or(|named| {
        ProtocolVersion::KNOWN_VERSIONS.iter().any(|known| {
            known.as_str().as_bytes() == named && *known < ProtocolVersion::V_2026_07_28
        })
    })
}

/// `Accept` names both `application/json` and `text/event-stream`, with no parameters or
/// quotes anywhere (rmcp refuses the request with 406 otherwise; a weight such as `q=0`, or a
/// quoted comma, is rmcp's to read, so such a request is rmcp's to answer).
fn accepts_json_and_streams(headers: &HeaderMap) -> bool {
    let (mut json, mut streams) = (false, false);
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else {
            return false;
        };
        if value.contains([';', '"']) {
            return false;
        }
        for essence in value.split(',').map(str::trim) {
            json |= essence.eq_ignore_ascii_case("application/json");
            streams |= essence.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && streams
}

#[cfg(test)]
mod tests {
    use axum::body::Bytes;
    use axum::extract::Request;
    use serde_json::json;

    use super::*;

    const ACCEPT: &str = "application/json, text/event-stream";

    /// `body` with the headers of a plain call, then `edit`ed.
    fn request(body: &Value, edit: impl FnOnce(&mut Request<()>)) -> AdmittedRequest {
        let mut request = Request::builder()
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, ACCEPT)
            .header("mcp-protocol-version", "2025-06-18")
            .body(())
            .unwrap();
        edit(&mut request);
        let (parts, ()) = request.into_parts();
        let body = Bytes::from(serde_json::to_vec(&body).unwrap());
        AdmittedRequest::parse(parts, Admitted::alice(), body)
            .ok()
            .unwrap()
    }

    fn call(params: Value) -> Value {
        let mut message = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call"});
        message["params"] = params;
        message
    }

    fn is_plain(request: &AdmittedRequest) -> bool {
        plain_id(request, &Levels::default()).is_some()
    }

    #[test]
    fn a_session_era_call_asking_for_nothing_more_is_plain() {
        let params =
            json!({"name": "echo", "arguments": {"a": 1}, "_meta": {"io.airlock/call_key": "k1"}});
        let plain = request(&call(params), |_| ());
        let Some(id) = plain_id(&plain, &Levels::default()) else {
            panic!("a plain call went to rmcp");
        };
        let taken = take(plain, id);
        assert_eq!(taken.name, "echo");
        assert_eq!(Value::Object(taken.arguments), json!({"a": 1}));
        assert_eq!(taken.id, RequestId::Number(9));
        assert_eq!(taken.key.unwrap().unwrap().as_str(), "k1");
        for version in ["2024-11-05", "2025-03-26", "2025-11-25"] {
            let named = request(&call(json!({"name": "echo"})), |r| {
                r.headers_mut()
                    .insert("mcp-protocol-version", version.parse().unwrap());
            });
            assert!(is_plain(&named), "{version}");
        }
        let unnamed = request(&call(json!({"name": "echo"})), |r| {
            r.headers_mut().remove("mcp-protocol-version");
        });
        assert!(is_plain(&unnamed));
    }

    #[test]
    #[allow(
        deprecated,
        reason = "MCP logging is deprecated (SEP-2577) yet part of 2025-11-25"
    )]
    fn anything_rmcp_would_answer_differently_goes_to_rmcp() {
        let plain = || call(json!({"name": "echo", "arguments": {}}));
        let header = |name: &'static str, value: &'static str| {
            move |r: &mut Request<()>| {
                r.headers_mut().insert(name, value.parse().unwrap());
            }
        };
        let mut cases: Vec<(&str, AdmittedRequest)> = vec![
            (
                "2026-07-28",
                request(&plain(), header("mcp-protocol-version", "2026-07-28")),
            ),
            (
                "unknown revision",
                request(&plain(), header("mcp-protocol-version", "1999-01-01")),
            ),
            (
                "no event streams",
                request(&plain(), header("accept", "application/json")),
            ),
            (
                "no JSON",
                request(&plain(), header("accept", "text/event-stream")),
            ),
            (
                "not declared JSON",
                request(&plain(), header("content-type", "text/plain")),
            ),
            (
                "JSON weighed zero",
                request(
                    &plain(),
                    header("accept", "application/json;q=0, text/event-stream"),
                ),
            ),
            (
                "a quoted comma",
                request(
                    &plain(),
                    header("accept", r#"text/event-stream;x=", application/json;y""#),
                ),
            ),
            (
                "traced",
                request(&plain(), |r| {
                    let tracer: RequestTracer =
                        std::sync::Arc::new(opentelemetry::global::tracer("t"));
                    r.extensions_mut().insert(tracer);
                }),
            ),
            (
                "await tool",
                request(&call(json!({"name": crate::server::AWAIT_TOOL})), |_| ()),
            ),
            (
                "task",
                request(&call(json!({"name": "echo", "task": {}})), |_| ()),
            ),
            (
                "request state",
                request(&call(json!({"name": "echo", "requestState": "s"})), |_| ()),
            ),
            (
                "progress",
                request(
                    &call(json!({"name": "echo", "_meta": {"progressToken": 1}})),
                    |_| (),
                ),
            ),
            (
                "per-request revision",
                request(
                    &call(
                        json!({"name": "echo", "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
                    ),
                    |_| (),
                ),
            ),
            (
                "other method",
                request(
                    &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
                    |_| (),
                ),
            ),
            (
                "extra member",
                request(
                    &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo"}, "x": 1}),
                    |_| (),
                ),
            ),
        ];
        let repeated = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"echo"}}"#;
        let (parts, ()) = Request::builder()
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, ACCEPT)
            .body(())
            .unwrap()
            .into_parts();
        let repeated =
            AdmittedRequest::parse(parts, Admitted::alice(), Bytes::from_static(repeated));
        cases.push(("a member named twice", repeated.ok().unwrap()));
        for (why, request) in cases {
            assert!(!is_plain(&request), "{why}");
        }
        let levels = Levels::default();
        levels.set(&Admitted::alice(), rmcp::model::LoggingLevel::Info);
        let logged = request(&plain(), |_| ());
        assert!(plain_id(&logged, &levels).is_none(), "a log level set");
    }
}
