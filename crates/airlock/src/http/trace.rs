//! The server spans of the run API (docs/rules.md OPS-80): `POST /v1/agents/{name}/run` and
//! the WebSocket `GET /v1/agents/{name}/ws` are each a server span named by their route,
//! continuing the caller's W3C `traceparent` header (a malformed one starts a new trace); the
//! run's own spans are children of it.
//!
//! Guarantees: nothing is started unless `[telemetry]` is configured; the attributes are the
//! method, the route's template, the path and the status — never a header value, the body or
//! the run's input.

use airlock_egress::trace::{TRACEPARENT, child_span, parse_traceparent, root};
use axum::http::{HeaderMap, StatusCode};
use opentelemetry::trace::{SpanKind, Status, TraceContextExt as _};
use opentelemetry::{Context, KeyValue};

use super::AppState;

/// Starts the server span of a request to `route` (`path` as sent) when traces are on.
pub(super) fn server(
    state: &AppState,
    headers: &HeaderMap,
    method: &'static str,
    route: &'static str,
    path: String,
) -> Option<Context> {
    let tracer = state.mcp.tracer.as_ref()?;
    let parent = headers
        .get(TRACEPARENT)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_traceparent)
        .map_or_else(
            || root(tracer),
            |remote| root(tracer).with_remote_span_context(remote),
        );
    let attributes = vec![
        KeyValue::new("http.request.method", method),
        KeyValue::new("http.route", route),
        KeyValue::new("url.path", path),
        KeyValue::new("network.protocol.name", "http"),
    ];
    child_span(
        &parent,
        format!("{method} {route}"),
        SpanKind::Server,
        attributes,
    )
}

/// Ends a server span with the status answered (a 5xx is an error, as the HTTP conventions
/// ask of a server).
pub(super) fn answered(cx: Option<&Context>, status: StatusCode) {
    let Some(cx) = cx else { return };
    let span = cx.span();
    span.set_attribute(KeyValue::new(
        "http.response.status_code",
        i64::from(status.as_u16()),
    ));
    if status.is_server_error() {
        span.set_attribute(KeyValue::new("error.type", status.as_u16().to_string()));
        span.set_status(Status::error(""));
    }
    span.end();
}
