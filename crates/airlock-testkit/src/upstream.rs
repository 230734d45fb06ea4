//! A real MCP server on 127.0.0.1 for the tests: Streamable HTTP written by hand on axum, so
//! each test scripts what it answers (JSON or SSE, isError, JSON-RPC errors, 3xx, 401, silence,
//! oversized streams, pagination) and reads back exactly what it was sent.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// How the upstream behaves.
#[derive(Debug, Clone, Default)]
pub(crate) struct Script {
    /// Answer requests as `text/event-stream` instead of JSON.
    pub sse: bool,
    /// Answer every POST with this status (and a `Location` for a 3xx).
    pub status: Option<u16>,
    /// Answer only notifications with this status.
    pub notification_status: Option<u16>,
    /// Delay every request answer by this much.
    pub delay: Option<Duration>,
    /// Label replies `Content-Encoding: gzip` (never acceptable: the cap counts decoded bytes).
    pub gzip: bool,
}

/// What the upstream saw.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub method: String,
    pub body: Value,
    pub headers: HeaderMap,
}

#[derive(Clone)]
struct Upstream {
    script: Script,
    seen: Arc<Mutex<Vec<Seen>>>,
}

/// A running upstream.
pub(crate) struct Server {
    pub port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    pub(crate) async fn start(script: Script) -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let state = Upstream {
            script,
            seen: seen.clone(),
        };
        let app = Router::new()
            .route("/mcp", post(handle).delete(|| async { StatusCode::OK }))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { port, seen }
    }

    /// The URL through the test name `mcp.upstream.io` (pinned to 127.0.0.1 by the resolver).
    pub(crate) fn url(&self) -> String {
        format!("http://mcp.upstream.io:{}/mcp", self.port)
    }

    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub(crate) fn methods(&self) -> Vec<String> {
        self.seen().into_iter().map(|s| s.method).collect()
    }
}

async fn handle(State(up): State<Upstream>, headers: HeaderMap, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let method = body["method"].as_str().unwrap_or_default().to_owned();
    up.seen.lock().unwrap().push(Seen {
        method: method.clone(),
        body: body.clone(),
        headers,
    });
    let is_notification = body.get("id").is_none();
    if let Some(status) = up.script.status {
        return status_reply(status);
    }
    if is_notification {
        return match up.script.notification_status {
            Some(status) => status_reply(status),
            None => StatusCode::ACCEPTED.into_response(),
        };
    }
    if let Some(delay) = up.script.delay {
        tokio::time::sleep(delay).await;
    }
    let id = body["id"].clone();
    let reply = match method.as_str() {
        "initialize" => ok(
            &id,
            json!({
                "protocolVersion": body["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "test-upstream", "version": "1"}
            }),
        ),
        "tools/list" => ok(&id, tools_page(body["params"]["cursor"].as_str())),
        "tools/call" => match call(&body["params"]) {
            Call::Reply(result) => ok(&id, result),
            Call::Error(message) => {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": message}})
            }
            Call::Silent => std::future::pending().await,
            Call::Huge => return huge_sse(&id),
        },
        _ => {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "method not found"}})
        }
    };
    if up.script.sse {
        let text = format!("event: message\ndata: {reply}\n\n");
        ([(header::CONTENT_TYPE, "text/event-stream")], text).into_response()
    } else if up.script.gzip {
        ([(header::CONTENT_ENCODING, "gzip")], axum::Json(reply)).into_response()
    } else {
        axum::Json(reply).into_response()
    }
}

enum Call {
    Reply(Value),
    Error(String),
    Silent,
    Huge,
}

fn call(params: &Value) -> Call {
    let args = params["arguments"].clone();
    match params["name"].as_str().unwrap_or_default() {
        "echo" => Call::Reply(json!({
            "content": [{"type": "text", "text": args.to_string()}],
            "structuredContent": {"received": args}
        })),
        "fail" => Call::Reply(json!({
            "content": [{"type": "text", "text": "ticket 42 does not exist"}],
            "isError": true
        })),
        "reject" => Call::Error("unknown ticket number".into()),
        "chart" => Call::Reply(json!({"content": [
            {"type": "text", "text": "the chart:"},
            // 1,236 base64 characters without padding decode to 927 bytes.
            {"type": "image", "mimeType": "image/png", "data": "A".repeat(1236)}
        ]})),
        "silent" => Call::Silent,
        "huge" => Call::Huge,
        other => Call::Error(format!("no tool {other}")),
    }
}

fn tools_page(cursor: Option<&str>) -> Value {
    match cursor {
        None => json!({
            "tools": [{"name": "search", "description": "Search the CRM.",
                       "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}}],
            "nextCursor": "page-2"
        }),
        Some(_) => json!({"tools": [{"name": "create_note"}]}),
    }
}

fn ok(id: &Value, result: Value) -> Value {
    let mut reply = json!({"jsonrpc": "2.0", "id": id});
    reply["result"] = result;
    reply
}

fn status_reply(status: u16) -> Response {
    let status = StatusCode::from_u16(status).unwrap();
    if status.is_redirection() {
        // An internal target: following it would be the SSRF the guard exists to stop.
        (status, [(header::LOCATION, "http://10.0.0.1/mcp")]).into_response()
    } else {
        (status, "nope").into_response()
    }
}

/// An SSE reply of small events (each far under rmcp's per-event limit) adding up to ~100 KiB.
fn huge_sse(id: &Value) -> Response {
    let mut text = String::new();
    let padding = "x".repeat(1000);
    for _ in 0..100 {
        text.push_str(&format!(": {padding}\n\n"));
    }
    let reply = ok(id, json!({"content": [{"type": "text", "text": "done"}]}));
    text.push_str(&format!("event: message\ndata: {reply}\n\n"));
    ([(header::CONTENT_TYPE, "text/event-stream")], text).into_response()
}
