//! The HTTP side of a session: rmcp's Streamable HTTP client trait, implemented on the egress
//! guard's pinned reqwest client.
//!
//! Guarantees, for every request of a session: it goes only to the session's own endpoint URL
//! (the prepared client is pinned to that host's checked addresses); a 3xx is never followed; a
//! content coding other than identity, or a content type other than JSON or an event stream, is
//! refused; every byte of each reply — JSON or SSE — counts against the body cap, each reply on
//! its own as every other guarded response (rmcp itself caps only each SSE event), and all the
//! replies of a session against [`SESSION_CAPS`] caps together, so a server that pages its tool
//! list forever cannot fill memory within the deadline; no server-initiated GET stream is
//! opened (a short session needs none, and a resumed stream would escape the count). The first failure is
//! remembered, so the session can report what really went wrong rather than rmcp's summary.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};
use http::header::{ACCEPT, CONTENT_ENCODING, CONTENT_TYPE};
use http::{HeaderName, HeaderValue, StatusCode};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use serde_json::Value;
use sse_stream::{Sse, SseStream};

use crate::error::{CallErrorKind, McpCallError};
use crate::relay::Tap;
use airlock_egress::trace::{HttpSpan, RequestTracer, TRACEPARENT};
use opentelemetry::Context;

const SESSION_HEADER: &str = "mcp-session-id";

/// A session's replies together may carry this many caps: a call's session has two replies
/// (initialize, the call), discovery one per page of `tools/list`.
const SESSION_CAPS: u64 = 4;

type HttpError = StreamableHttpError<McpCallError>;

/// The guarded HTTP client of one session. Cheap to clone; clones share the remembered failure.
#[derive(Debug, Clone)]
pub(crate) struct GuardedHttp {
    inner: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    client: reqwest::Client,
    /// The one URL this session may reach.
    url: String,
    /// Host name for messages (never the pinned address).
    host: String,
    credential: Option<(HeaderName, HeaderValue)>,
    /// The most bytes one reply may carry.
    cap: u64,
    /// Bytes of reply read so far, across every request of the session.
    used: AtomicU64,
    /// The whole-call deadline, for the timeout message.
    budget: Duration,
    /// The first failure of the session.
    failure: Mutex<Option<McpCallError>>,
    /// A failure on a notification, which the session went on after (as MCP SDKs do).
    swallowed: Mutex<Option<McpCallError>>,
    /// The `tools/call` request may have left the machine: it was handed to a connection (or
    /// to a connection attempt whose outcome is not known yet).
    call_sent: AtomicBool,
    /// The trace of the call this session serves, and the URL its spans name (EGRESS-35):
    /// the transport runs in rmcp's own task, where the caller's context is not current.
    traced: Option<(Context, url::Url)>,
    /// The server issued an `Mcp-Session-Id` on some reply: it keeps state per session.
    issued_session: AtomicBool,
    /// Where the progress and log messages on the replies' event streams go (MCP-63).
    tap: Option<Tap>,
}

/// One serialized JSON-RPC message to send.
pub(crate) struct Sent {
    /// The message's bytes.
    pub(crate) body: Vec<u8>,
    /// A request (an answer is due), not a notification.
    pub(crate) awaits_reply: bool,
    /// The session's `tools/call` (MCP-23 counts from when it is handed to a connection).
    pub(crate) is_call: bool,
}

/// A reply whose head passed the transport rules, its body not yet read as JSON-RPC.
pub(crate) enum Reply {
    /// 202/204, or a body a notification needs no reading of.
    Accepted,
    /// A JSON body, read whole within the cap, and the session id the server issued.
    Json(Vec<u8>, Option<String>),
    /// An event stream whose bytes count against the cap, and the session id.
    Sse(BoxStream<'static, Result<Sse, SseError>>, Option<String>),
}

/// What kind of body a reply carries.
enum Body {
    Json,
    Sse,
    Other(String),
}

impl GuardedHttp {
    pub(crate) fn new(
        client: reqwest::Client,
        url: &url::Url,
        credential: Option<(HeaderName, HeaderValue)>,
        cap: u64,
        budget: Duration,
        tap: Option<Tap>,
    ) -> Self {
        Self {
            inner: Arc::new(Shared {
                client,
                url: url.as_str().to_owned(),
                host: url.host_str().unwrap_or_default().to_owned(),
                credential,
                cap,
                used: AtomicU64::new(0),
                budget,
                failure: Mutex::new(None),
                swallowed: Mutex::new(None),
                call_sent: AtomicBool::new(false),
                traced: Context::map_current(|cx| {
                    cx.get::<RequestTracer>().map(|_| (cx.clone(), url.clone()))
                }),
                issued_session: AtomicBool::new(false),
                tap,
            }),
        }
    }

    /// The first failure the session hit, if any (a swallowed one last).
    pub(crate) fn failure(&self) -> Option<McpCallError> {
        let first = lock(&self.inner.failure).clone();
        first.or_else(|| lock(&self.inner.swallowed).clone())
    }

    /// Whether the session's `tools/call` may have reached the server (MCP-23).
    pub(crate) fn call_sent(&self) -> bool {
        self.inner.call_sent.load(Ordering::SeqCst)
    }

    /// Whether the server issued a session id on any reply so far.
    pub(crate) fn issued_session(&self) -> bool {
        self.inner.issued_session.load(Ordering::SeqCst)
    }

    /// Remembers `err` as the session's failure (the first one wins) and hands it to rmcp.
    fn fail(&self, err: McpCallError) -> HttpError {
        lock(&self.inner.failure).get_or_insert_with(|| err.clone());
        StreamableHttpError::Client(err)
    }

    fn check_uri(&self, uri: &str) -> Result<(), HttpError> {
        // The prepared client is pinned to one host; a URL elsewhere would need its own check.
        if uri == self.inner.url {
            Ok(())
        } else {
            Err(self.fail(McpCallError::new(
                CallErrorKind::Blocked,
                "the MCP client tried to reach a URL other than the checked endpoint",
            )))
        }
    }

    fn request(
        &self,
        method: http::Method,
        session_id: Option<&str>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> reqwest::RequestBuilder {
        let mut request = self
            .inner
            .client
            .request(method, self.inner.url.as_str())
            .header(ACCEPT, "application/json, text/event-stream");
        for (name, value) in custom_headers {
            request = request.header(name, value);
        }
        if let Some((name, value)) = &self.inner.credential {
            request = request.header(name.clone(), value.clone());
        }
        if let Some(id) = session_id {
            request = request.header(SESSION_HEADER, id);
        }
        request
    }

    /// Sends `request`, in a client span with `traceparent` when the session's call is traced
    /// (EGRESS-35, EGRESS-36).
    async fn send_traced(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, reqwest::Error> {
        let traced = self
            .inner
            .traced
            .as_ref()
            .and_then(|(cx, url)| HttpSpan::start(cx, &http::Method::POST, url));
        let Some(traced) = traced else {
            return request.send().await;
        };
        let request = match traced.header() {
            Some(value) => request.header(TRACEPARENT, value),
            None => request,
        };
        let sent = request.send().await;
        traced.finish(match &sent {
            Ok(response) => Ok(response.status().as_u16()),
            Err(e) if e.is_timeout() => Err("timeout"),
            Err(e) if e.is_connect() => Err("connect"),
            Err(_) => Err("connection_lost"),
        });
        sent
    }

    /// Only a failed connection proves nothing was sent; a break after that may follow a
    /// request the server received.
    fn transport_error(&self, err: &reqwest::Error) -> McpCallError {
        if err.is_timeout() {
            McpCallError::timeout(self.inner.budget)
        } else if err.is_connect() {
            McpCallError::new(
                CallErrorKind::Unreachable,
                format!("the MCP server {} could not be reached", self.inner.host),
            )
        } else {
            McpCallError::new(
                CallErrorKind::ConnectionLost,
                format!(
                    "the connection to the MCP server {} broke after a request was sent",
                    self.inner.host
                ),
            )
        }
    }

    /// Counts `n` more bytes of a reply that has `used` so far; past the cap, or past the
    /// session's [`SESSION_CAPS`] caps, the session fails.
    fn charge(&self, used: &mut u64, n: usize) -> Result<(), McpCallError> {
        let n = u64::try_from(n).unwrap_or(u64::MAX);
        *used = used.saturating_add(n);
        let total = self
            .inner
            .used
            .fetch_add(n, Ordering::Relaxed)
            .saturating_add(n);
        if total > self.inner.cap.saturating_mul(SESSION_CAPS) {
            let err = McpCallError::new(
                CallErrorKind::TooLarge,
                format!(
                    "the MCP server's replies in one session are larger than {SESSION_CAPS} × the {}-byte cap",
                    self.inner.cap
                ),
            );
            lock(&self.inner.failure).get_or_insert_with(|| err.clone());
            return Err(err);
        }
        if *used > self.inner.cap {
            let err = McpCallError::too_large(self.inner.cap);
            lock(&self.inner.failure).get_or_insert_with(|| err.clone());
            return Err(err);
        }
        Ok(())
    }

    async fn read_body(&self, mut response: reqwest::Response) -> Result<Vec<u8>, HttpError> {
        let declared = response.content_length().unwrap_or(0);
        if declared > self.inner.cap {
            return Err(self.fail(McpCallError::too_large(self.inner.cap)));
        }
        let (mut body, mut used) = (Vec::new(), 0);
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    self.charge(&mut used, chunk.len())
                        .map_err(|e| self.fail(e))?;
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => return Ok(body),
                Err(e) => return Err(self.fail(self.transport_error(&e))),
            }
        }
    }

    /// The SSE events of a reply, its bytes counted against the cap.
    fn counted_sse(
        &self,
        response: reqwest::Response,
    ) -> BoxStream<'static, Result<Sse, SseError>> {
        let this = self.clone();
        let mut used = 0;
        let bytes = response
            .bytes_stream()
            .map(move |chunk| match chunk {
                Ok(chunk) => this.charge(&mut used, chunk.len()).map(|()| chunk),
                Err(e) => Err(this.transport_error(&e)),
            })
            // Stop at the first error: nothing after an over-cap chunk is read.
            .scan(false, |failed, item: Result<Bytes, McpCallError>| {
                let stop = *failed;
                *failed = item.is_err();
                std::future::ready((!stop).then_some(item))
            });
        let tap = self.inner.tap.clone();
        SseStream::from_bytes_stream(bytes)
            .inspect(move |event| {
                if let (Some(tap), Ok(event)) = (&tap, event) {
                    tap.observe(event);
                }
            })
            .map(|event| event.map(patch_event))
            .boxed()
    }

    async fn post(
        &self,
        uri: &str,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        self.check_uri(uri)?;
        let awaits_reply = matches!(message, ClientJsonRpcMessage::Request(_));
        let is_call = matches!(&message, ClientJsonRpcMessage::Request(r)
            if matches!(r.request, ClientRequest::CallToolRequest(_)));
        let body = serde_json::to_vec(&message)?;
        if let Some(tap) = self.inner.tap.as_ref().filter(|_| is_call) {
            // rmcp puts a progress token of its own on every request it sends.
            tap.sent_call(&body);
        }
        let sent = Sent {
            body,
            awaits_reply,
            is_call,
        };
        match self
            .exchange(sent, session_id.as_deref(), custom_headers)
            .await?
        {
            Reply::Accepted => Ok(StreamableHttpPostResponse::Accepted),
            Reply::Sse(events, session) => Ok(StreamableHttpPostResponse::Sse(events, session)),
            Reply::Json(body, session) => match parse_message(&body) {
                Some(message) => Ok(StreamableHttpPostResponse::Json(message, session)),
                None if !awaits_reply => Ok(StreamableHttpPostResponse::Accepted),
                None => Err(self.fail(not_json_rpc())),
            },
        }
    }

    /// Sends one serialized JSON-RPC message and reads the head of its reply: a JSON body is
    /// read whole (counted against the cap), an event stream is handed back counted.
    pub(crate) async fn exchange(
        &self,
        sent: Sent,
        session_id: Option<&str>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<Reply, HttpError> {
        let Sent {
            body,
            awaits_reply,
            is_call,
        } = sent;
        if is_call {
            self.inner.call_sent.store(true, Ordering::SeqCst);
        }
        let request = self
            .request(http::Method::POST, session_id, custom_headers)
            .header(CONTENT_TYPE, "application/json")
            .body(body);
        let sent = self.send_traced(request).await;
        let response = match sent {
            Ok(response) => response,
            Err(e) => {
                if is_call && e.is_connect() {
                    // No connection: the call never left the machine.
                    self.inner.call_sent.store(false, Ordering::SeqCst);
                }
                return Err(self.fail(self.transport_error(&e)));
            }
        };
        let status = response.status();
        let session = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if session.is_some() {
            self.inner.issued_session.store(true, Ordering::SeqCst);
        }
        if let Err(err) = check_head(status, response.headers()) {
            if !awaits_reply && err.kind != CallErrorKind::BadReply {
                // A notification needs no answer: go on, as MCP SDKs do, but remember it in
                // case nothing better explains a later failure.
                tracing::debug!(error = %err, "MCP notification answered with a failure");
                lock(&self.inner.swallowed).get_or_insert(err);
                return Ok(Reply::Accepted);
            }
            return self.rejected(response, err).await;
        }
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(Reply::Accepted);
        }
        match body_kind(response.headers()) {
            Body::Sse => Ok(Reply::Sse(self.counted_sse(response), session)),
            Body::Json => Ok(Reply::Json(self.read_body(response).await?, session)),
            Body::Other(_) if !awaits_reply => Ok(Reply::Accepted),
            Body::Other(ct) => Err(self.fail(McpCallError::new(
                CallErrorKind::BadReply,
                format!("the MCP server answered with content type {ct:?}, not JSON or SSE"),
            ))),
        }
    }

    /// A reply whose head failed: a JSON-RPC error in a JSON body still wins (it is the
    /// server's own explanation); otherwise the head's failure stands.
    async fn rejected(
        &self,
        response: reqwest::Response,
        err: McpCallError,
    ) -> Result<Reply, HttpError> {
        if err.kind == CallErrorKind::HttpStatus
            && matches!(body_kind(response.headers()), Body::Json)
            && let Ok(body) = self.read_body(response).await
            && let Some(ServerJsonRpcMessage::Error(_)) = parse_message(&body)
        {
            return Ok(Reply::Json(body, None));
        }
        Err(self.fail(err))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn not_json_rpc() -> McpCallError {
    McpCallError::new(
        CallErrorKind::BadReply,
        "the MCP server's reply is not a JSON-RPC message",
    )
}

/// Status, coding and type rules that need no body.
fn check_head(status: StatusCode, headers: &http::HeaderMap) -> Result<(), McpCallError> {
    if status.is_redirection() {
        return Err(McpCallError::redirect(status.as_u16()));
    }
    for value in headers.get_all(CONTENT_ENCODING) {
        let identity = value
            .as_bytes()
            .split(|&b| b == b',')
            .all(|c| c.trim_ascii().eq_ignore_ascii_case(b"identity"));
        if !identity {
            return Err(McpCallError::new(
                CallErrorKind::BadReply,
                "the MCP server's reply is compressed; only identity encoding is accepted",
            ));
        }
    }
    if !status.is_success() {
        return Err(McpCallError::http_status(status.as_u16()));
    }
    Ok(())
}

fn body_kind(headers: &http::HeaderMap) -> Body {
    let Some(ct) = headers.get(CONTENT_TYPE) else {
        return Body::Other(String::new());
    };
    let essence = String::from_utf8_lossy(ct.as_bytes())
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "application/json" => Body::Json,
        "text/event-stream" => Body::Sse,
        _ => Body::Other(essence.chars().take(64).collect()),
    }
}

/// Parses a JSON-RPC message, first giving listed tools without an `inputSchema` the empty object
/// schema (rmcp requires the field; some servers omit it).
fn parse_message(body: &[u8]) -> Option<ServerJsonRpcMessage> {
    let mut value: Value = serde_json::from_slice(body).ok()?;
    default_input_schemas(&mut value);
    serde_json::from_value(value).ok()
}

fn default_input_schemas(value: &mut Value) {
    let Some(tools) = value
        .pointer_mut("/result/tools")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for tool in tools.iter_mut().filter_map(Value::as_object_mut) {
        tool.entry("inputSchema")
            .or_insert_with(|| serde_json::json!({"type": "object"}));
    }
}

/// Applies [`default_input_schemas`] to an SSE event's data.
fn patch_event(mut event: Sse) -> Sse {
    if let Some(data) = event.data.as_deref()
        && data.contains("\"tools\"")
        && let Ok(mut value) = serde_json::from_str::<Value>(data)
    {
        default_input_schemas(&mut value);
        event.data = Some(value.to_string());
    }
    event
}

impl StreamableHttpClient for GuardedHttp {
    type Error = McpCallError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        // rmcp's own auth header is never set: the credential is ours, added in `request`.
        self.post(&uri, message, session_id, custom_headers).await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), HttpError> {
        self.check_uri(&uri)?;
        // Closing is a courtesy: its answer cannot change the call's outcome.
        let _ = self
            .request(http::Method::DELETE, Some(&session_id), custom_headers)
            .send()
            .await;
        Ok(())
    }

    async fn get_stream(
        &self,
        _uri: Arc<str>,
        _session_id: Option<Arc<str>>,
        _last_event_id: Option<String>,
        _auth_header: Option<String>,
        _custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError> {
        // A short session needs no server-initiated stream, and a resumed stream would be a
        // second reply outside the session's byte count.
        Err(StreamableHttpError::ServerDoesNotSupportSse)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_tool_without_schema_gets_the_empty_object_schema() {
        let body = br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"}]}}"#;
        let mut value: Value = serde_json::from_slice(body).unwrap();
        default_input_schemas(&mut value);
        assert_eq!(
            value.pointer("/result/tools/0/inputSchema"),
            Some(&serde_json::json!({"type": "object"}))
        );
        assert!(parse_message(body).is_some());
    }

    #[test]
    fn compressed_and_redirected_heads_are_refused() {
        let mut headers = http::HeaderMap::new();
        headers.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        let err = check_head(StatusCode::OK, &headers).unwrap_err();
        assert_eq!(err.kind, CallErrorKind::BadReply);
        let err = check_head(StatusCode::FOUND, &http::HeaderMap::new()).unwrap_err();
        assert_eq!(err.kind, CallErrorKind::Redirect);
    }
}
