//! A loopback OTLP/HTTP collector: `POST /v1/traces` bodies are decoded as protobuf
//! `ExportTraceServiceRequest`s (the OpenTelemetry project's own message types) and kept as a
//! flat list of spans, so a test asserts on what a real exporter really sent. Anything else,
//! or a body that does not decode, is answered 400 and counted as refused.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message as _;

/// One exported span, flattened: ids in lower-case hex, attributes as text.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportedSpan {
    /// The span's name.
    pub name: String,
    /// The OTLP span kind (1 internal, 2 server, 3 client).
    pub kind: i32,
    /// The trace id (32 hex digits).
    pub trace_id: String,
    /// The span id (16 hex digits).
    pub span_id: String,
    /// The parent's span id (empty for a root).
    pub parent_span_id: String,
    /// Attributes, each value as text (ints and bools printed).
    pub attributes: BTreeMap<String, String>,
    /// The OTLP status code (0 unset, 1 ok, 2 error).
    pub status_code: i32,
    /// The resource's `service.name`.
    pub service: String,
}

impl ExportedSpan {
    /// An attribute's value (`None` when absent).
    #[must_use]
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

/// The OTLP span kinds a test names.
pub mod kind {
    /// `SPAN_KIND_INTERNAL`.
    pub const INTERNAL: i32 = 1;
    /// `SPAN_KIND_SERVER`.
    pub const SERVER: i32 = 2;
    /// `SPAN_KIND_CLIENT`.
    pub const CLIENT: i32 = 3;
}

#[derive(Clone, Default)]
struct Received {
    spans: Arc<Mutex<Vec<ExportedSpan>>>,
    headers: Arc<Mutex<Vec<HeaderMap>>>,
    refused: Arc<Mutex<usize>>,
}

/// A running collector; it lives until the test's runtime ends.
pub struct Collector {
    /// The port it listens on.
    pub port: u16,
    received: Received,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Collector {
    /// Starts a collector on any free port of 127.0.0.1.
    ///
    /// # Panics
    /// When no port can be bound.
    pub async fn start() -> Self {
        let received = Received::default();
        let app = Router::new()
            .route("/v1/traces", post(traces))
            .with_state(received.clone());
        let port = crate::listen::serve(app, 0).await;
        Self { port, received }
    }

    /// The OTLP/HTTP base URL (`http://127.0.0.1:PORT`), as `[telemetry] endpoint` takes it.
    #[must_use]
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every span received so far, in arrival order.
    #[must_use]
    pub fn spans(&self) -> Vec<ExportedSpan> {
        lock(&self.received.spans).clone()
    }

    /// The headers of every export request received so far.
    #[must_use]
    pub fn headers(&self) -> Vec<HeaderMap> {
        lock(&self.received.headers).clone()
    }

    /// How many requests were refused as undecodable.
    #[must_use]
    pub fn refused(&self) -> usize {
        *lock(&self.received.refused)
    }

    /// The spans of trace `trace_id` once `done` holds for them, polling every 50 ms for at
    /// most `within` (then whatever arrived).
    pub async fn trace(
        &self,
        trace_id: &str,
        within: Duration,
        done: impl Fn(&[ExportedSpan]) -> bool,
    ) -> Vec<ExportedSpan> {
        let of_trace = || -> Vec<ExportedSpan> {
            self.spans()
                .into_iter()
                .filter(|s| s.trace_id == trace_id)
                .collect()
        };
        let step = Duration::from_millis(50);
        for _ in 0..=within.as_millis() / step.as_millis() {
            let spans = of_trace();
            if done(&spans) {
                return spans;
            }
            tokio::time::sleep(step).await;
        }
        of_trace()
    }
}

async fn traces(State(received): State<Received>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        *lock(&received.refused) += 1;
        return StatusCode::BAD_REQUEST;
    };
    lock(&received.headers).push(headers);
    let mut spans = lock(&received.spans);
    for resource in request.resource_spans {
        let service = resource
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|kv| kv.key == "service.name")
            .map(|kv| text(kv.value.as_ref()))
            .unwrap_or_default();
        for span in resource.scope_spans.into_iter().flat_map(|s| s.spans) {
            spans.push(ExportedSpan {
                name: span.name,
                kind: span.kind,
                trace_id: hex(&span.trace_id),
                span_id: hex(&span.span_id),
                parent_span_id: hex(&span.parent_span_id),
                attributes: attributes(&span.attributes),
                status_code: span.status.map_or(0, |s| s.code),
                service: service.clone(),
            });
        }
    }
    StatusCode::OK
}

fn attributes(list: &[KeyValue]) -> BTreeMap<String, String> {
    list.iter()
        .map(|kv| (kv.key.clone(), text(kv.value.as_ref())))
        .collect()
}

fn text(value: Option<&AnyValue>) -> String {
    match value.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(n)) => n.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(x)) => x.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}
