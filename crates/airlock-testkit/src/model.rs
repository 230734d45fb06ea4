//! Fake model providers on 127.0.0.1: an OpenAI-compatible chat-completions server and an
//! Anthropic Messages server, each answering from a queue of scripted [`ModelReply`]s.
//!
//! Every reply streams as server-sent events in the provider's own shapes, each event split
//! across two body frames (so a client must join pieces); tool-call arguments arrive in pieces
//! too (interleaved between parallel calls on the OpenAI fake). Every request is counted and
//! kept ([`FakeModel::received`]); the credential header is checked (`Authorization: Bearer`,
//! or `x-api-key` with `anthropic-version`), and a wrong one is answered 401 without using up
//! a reply. When the queue is empty the fake answers 500 "no scripted reply left".

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::Notify;

/// Input tokens every scripted turn reports.
pub const FAKE_INPUT_TOKENS: u64 = 12;
/// Output tokens every scripted turn reports.
pub const FAKE_OUTPUT_TOKENS: u64 = 5;
/// The model the OpenAI-compatible fake says answered (its chunks' `model`).
pub const FAKE_RESPONSE_MODEL: &str = "fake-model-2026-01";

/// One tool call of a [`ModelReply::ToolCalls`].
#[derive(Debug, Clone)]
pub struct FakeCall {
    /// The call's id.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments' JSON text, in the pieces it is streamed in.
    pub pieces: Vec<String>,
}

impl FakeCall {
    /// A call whose arguments (`arguments` as JSON text) stream in two pieces.
    #[must_use]
    pub fn new(id: &str, name: &str, arguments: &Value) -> Self {
        let text = arguments.to_string();
        let mut middle = text.len() / 2;
        while !text.is_char_boundary(middle) {
            middle += 1;
        }
        Self {
            id: id.to_owned(),
            name: name.to_owned(),
            pieces: vec![text[..middle].to_owned(), text[middle..].to_owned()],
        }
    }
}

/// What the fake answers one request with.
#[derive(Debug, Clone)]
pub enum ModelReply {
    /// A text turn, streamed one piece per event.
    Text(Vec<String>),
    /// A tool-call turn: text pieces (may be none), then the calls.
    ToolCalls {
        /// Text before the calls.
        text: Vec<String>,
        /// The calls, in order.
        calls: Vec<FakeCall>,
    },
    /// An error status whose body carries `message` in the provider's error shape.
    Error {
        /// The status.
        status: u16,
        /// The provider's message.
        message: String,
        /// A `Retry-After` value to send (seconds or an HTTP date).
        retry_after: Option<String>,
    },
    /// A 200 event stream whose event is not JSON.
    Malformed,
    /// A 200 event stream that sends its first event and then nothing, ever.
    Stall,
    /// A text turn that sends these pieces and then, before the turn ends, cuts the connection:
    /// at once when there are no pieces, else once the test calls [`FakeModel::cut`] (so the
    /// pieces surely reached the client first).
    Broken(Vec<String>),
    /// A 401 whose message repeats the credential the request carried.
    EchoKey,
}

impl ModelReply {
    /// A text turn streamed in these pieces.
    #[must_use]
    pub fn text<S: AsRef<str>>(pieces: &[S]) -> Self {
        Self::Text(pieces.iter().map(|p| p.as_ref().to_owned()).collect())
    }

    /// A turn calling these tools, without text.
    #[must_use]
    pub fn calls(calls: Vec<FakeCall>) -> Self {
        Self::ToolCalls {
            text: Vec::new(),
            calls,
        }
    }

    /// An error status with this message.
    #[must_use]
    pub fn error(status: u16, message: &str) -> Self {
        Self::Error {
            status,
            message: message.to_owned(),
            retry_after: None,
        }
    }
}

/// Which provider a fake imitates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// OpenAI-compatible chat completions at `/v1/chat/completions`.
    OpenAi,
    /// Anthropic Messages at `/v1/messages`.
    Anthropic,
}

/// One request the fake received.
#[derive(Debug, Clone)]
pub struct Received {
    /// The request path.
    pub path: String,
    /// The request headers.
    pub headers: HeaderMap,
    /// The body as JSON (`null` when it is not JSON).
    pub body: Value,
}

struct Shared {
    flavor: Flavor,
    key: Option<String>,
    replies: Mutex<VecDeque<ModelReply>>,
    received: Mutex<Vec<Received>>,
    cut: Arc<Notify>,
}

/// A running fake provider; it lives until the test's runtime ends.
pub struct FakeModel {
    /// The port it listens on.
    pub port: u16,
    shared: Arc<Shared>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl FakeModel {
    /// The credential the fakes expect unless started with another.
    pub const KEY: &'static str = "sk-fake-0123456789abcdef";

    /// An OpenAI-compatible fake expecting [`FakeModel::KEY`].
    pub async fn openai(replies: Vec<ModelReply>) -> Self {
        Self::start(Flavor::OpenAi, Some(Self::KEY), replies).await
    }

    /// An Anthropic fake expecting [`FakeModel::KEY`].
    pub async fn anthropic(replies: Vec<ModelReply>) -> Self {
        Self::start(Flavor::Anthropic, Some(Self::KEY), replies).await
    }

    /// A fake of `flavor` expecting `key` (`None`: no credential checked, like a local server).
    ///
    /// # Panics
    /// When no port on 127.0.0.1 can be bound.
    pub async fn start(flavor: Flavor, key: Option<&str>, replies: Vec<ModelReply>) -> Self {
        let shared = Arc::new(Shared {
            flavor,
            key: key.map(str::to_owned),
            replies: Mutex::new(replies.into()),
            received: Mutex::new(Vec::new()),
            cut: Arc::new(Notify::new()),
        });
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let port = crate::listen::serve(app, 0).await;
        Self { port, shared }
    }

    /// The endpoint to configure (`spec.model.endpoint`): `http://127.0.0.1:<port>/v1`.
    #[must_use]
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Queues one more reply.
    pub fn push(&self, reply: ModelReply) {
        lock(&self.shared.replies).push_back(reply);
    }

    /// Lets a [`ModelReply::Broken`] stream cut its connection (now, or when it gets there).
    pub fn cut(&self) {
        self.shared.cut.notify_one();
    }

    /// How many requests arrived (on any path, answered or refused).
    #[must_use]
    pub fn requests(&self) -> usize {
        lock(&self.shared.received).len()
    }

    /// Every request so far, in order.
    #[must_use]
    pub fn received(&self) -> Vec<Received> {
        lock(&self.shared.received).clone()
    }

    /// The JSON bodies of [`FakeModel::received`].
    #[must_use]
    pub fn bodies(&self) -> Vec<Value> {
        self.received().into_iter().map(|r| r.body).collect()
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let presented = credential(shared.flavor, &headers);
    lock(&shared.received).push(Received {
        path: uri.path().to_owned(),
        headers,
        body,
    });
    let path = match shared.flavor {
        Flavor::OpenAi => "/v1/chat/completions",
        Flavor::Anthropic => "/v1/messages",
    };
    if uri.path() != path {
        return StatusCode::NOT_FOUND.into_response();
    }
    if shared.key.is_some() && presented != shared.key {
        return error(shared.flavor, 401, "invalid credential", None);
    }
    let Some(reply) = lock(&shared.replies).pop_front() else {
        return error(
            shared.flavor,
            500,
            "the fake has no scripted reply left",
            None,
        );
    };
    match reply {
        ModelReply::Error {
            status,
            message,
            retry_after,
        } => error(shared.flavor, status, &message, retry_after),
        ModelReply::EchoKey => {
            let message = format!(
                "Incorrect API key provided: {}",
                presented.unwrap_or_default()
            );
            error(shared.flavor, 401, &message, None)
        }
        ModelReply::Malformed => stream(
            vec!["data: {this is not json\n\n".to_owned()],
            End::Complete,
        ),
        ModelReply::Stall => stream(vec![": the fake stalls\n\n".to_owned()], End::Stall),
        ModelReply::Broken(pieces) => {
            let at_once = pieces.is_empty();
            let mut events = events(shared.flavor, &ModelReply::Text(pieces));
            // Both flavors close a text turn with three events (OpenAI: finish, usage,
            // [DONE]; Anthropic: block stop, message_delta, message_stop): cut before them.
            events.truncate(events.len().saturating_sub(3));
            let cut = shared.cut.clone();
            stream(events, End::Cut { cut, at_once })
        }
        turn => stream(events(shared.flavor, &turn), End::Complete),
    }
}

/// The credential a request presented, per the flavor's header (and, for Anthropic, only with
/// an `anthropic-version`).
fn credential(flavor: Flavor, headers: &HeaderMap) -> Option<String> {
    let value = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    match flavor {
        Flavor::OpenAi => value("authorization")
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::to_owned),
        Flavor::Anthropic => value("anthropic-version")
            .and(value("x-api-key"))
            .map(str::to_owned),
    }
}

fn error(flavor: Flavor, status: u16, message: &str, retry_after: Option<String>) -> Response {
    let body = match flavor {
        Flavor::OpenAi => {
            json!({"error": {"message": message, "type": "fake_error", "code": null}})
        }
        Flavor::Anthropic => {
            json!({"type": "error", "error": {"type": "fake_error", "message": message}})
        }
    };
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, axum::Json(body)).into_response();
    if let Some(value) = retry_after.and_then(|v| v.parse().ok()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

/// How a streamed reply ends.
enum End {
    /// The body ends normally.
    Complete,
    /// Nothing more is ever sent.
    Stall,
    /// The connection is cut, at once or when `cut` is notified.
    Cut { cut: Arc<Notify>, at_once: bool },
}

/// A 200 event stream of `events`, each split across two frames, ending as `end` says.
fn stream(events: Vec<String>, end: End) -> Response {
    let frames: Vec<Result<Bytes, std::io::Error>> = events
        .into_iter()
        .flat_map(|e| {
            let bytes = e.into_bytes();
            let middle = bytes.len() / 2;
            [
                Ok(Bytes::copy_from_slice(&bytes[..middle])),
                Ok(Bytes::copy_from_slice(&bytes[middle..])),
            ]
        })
        .collect();
    let frames = futures::stream::iter(frames);
    let body = match end {
        End::Complete => Body::from_stream(frames),
        End::Stall => Body::from_stream(frames.chain(futures::stream::pending())),
        End::Cut { cut, at_once } => {
            let error = futures::stream::once(async move {
                if !at_once {
                    cut.notified().await;
                }
                Err(std::io::Error::other("the fake cuts the connection"))
            });
            Body::from_stream(frames.chain(error))
        }
    };
    ([(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
}

/// The events of a text or tool-call turn.
fn events(flavor: Flavor, reply: &ModelReply) -> Vec<String> {
    let (text, calls): (&[String], &[FakeCall]) = match reply {
        ModelReply::Text(pieces) => (pieces.as_slice(), &[]),
        ModelReply::ToolCalls { text, calls } => (text.as_slice(), calls.as_slice()),
        _ => (&[], &[]),
    };
    match flavor {
        Flavor::OpenAi => openai_events(text, calls),
        Flavor::Anthropic => anthropic_events(text, calls),
    }
}

fn data(value: &Value) -> String {
    format!("data: {value}\n\n")
}

fn openai_events(text: &[String], calls: &[FakeCall]) -> Vec<String> {
    let chunk = |delta: Value, finish: Value| {
        data(
            &json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk",
                     "model": FAKE_RESPONSE_MODEL,
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
        )
    };
    let mut out = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    out.extend(
        text.iter()
            .map(|p| chunk(json!({"content": p}), Value::Null)),
    );
    for (i, call) in calls.iter().enumerate() {
        let head = json!({"index": i, "id": call.id, "type": "function",
                          "function": {"name": call.name, "arguments": ""}});
        out.push(chunk(json!({"tool_calls": [head]}), Value::Null));
    }
    // Pieces of parallel calls interleave: a client must put them together by index.
    let longest = calls.iter().map(|c| c.pieces.len()).max().unwrap_or(0);
    for piece in 0..longest {
        for (i, call) in calls.iter().enumerate() {
            if let Some(p) = call.pieces.get(piece) {
                let delta = json!({"index": i, "function": {"arguments": p}});
                out.push(chunk(json!({"tool_calls": [delta]}), Value::Null));
            }
        }
    }
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    out.push(chunk(json!({}), json!(finish)));
    out.push(data(
        &json!({"id": "chatcmpl-fake", "choices": [], "usage": {
        "prompt_tokens": FAKE_INPUT_TOKENS, "completion_tokens": FAKE_OUTPUT_TOKENS,
        "total_tokens": FAKE_INPUT_TOKENS + FAKE_OUTPUT_TOKENS}}),
    ));
    out.push("data: [DONE]\n\n".to_owned());
    out
}

fn anthropic_events(text: &[String], calls: &[FakeCall]) -> Vec<String> {
    let event = |name: &str, value: Value| format!("event: {name}\n{}", data(&value));
    let mut out = vec![
        event(
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_fake", "type": "message",
                "role": "assistant", "content": [], "model": "fake", "stop_reason": null,
                "usage": {"input_tokens": FAKE_INPUT_TOKENS, "output_tokens": 1}}}),
        ),
        event("ping", json!({"type": "ping"})),
    ];
    let mut index = 0;
    if !text.is_empty() {
        out.push(event(
            "content_block_start",
            json!({"type": "content_block_start",
            "index": index, "content_block": {"type": "text", "text": ""}}),
        ));
        out.extend(text.iter().map(|p| {
            event(
                "content_block_delta",
                json!({"type": "content_block_delta",
                "index": index, "delta": {"type": "text_delta", "text": p}}),
            )
        }));
        out.push(event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    for call in calls {
        out.push(event(
            "content_block_start",
            json!({"type": "content_block_start",
            "index": index, "content_block": {"type": "tool_use", "id": call.id,
            "name": call.name, "input": {}}}),
        ));
        out.extend(call.pieces.iter().map(|p| {
            event(
                "content_block_delta",
                json!({"type": "content_block_delta",
                "index": index, "delta": {"type": "input_json_delta", "partial_json": p}}),
            )
        }));
        out.push(event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    let stop = if calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    out.push(event(
        "message_delta",
        json!({"type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": null},
        "usage": {"output_tokens": FAKE_OUTPUT_TOKENS}}),
    ));
    out.push(event("message_stop", json!({"type": "message_stop"})));
    out
}
