//! The server span of a traced `tools/call`, after the OpenTelemetry MCP semantic conventions
//! (docs/rules.md OPS-23 … OPS-26).
//!
//! Guarantees: a request is traced only when the HTTP server put a
//! [`airlock_egress::trace::RequestTracer`] in its extensions (telemetry configured); untraced,
//! it costs one extensions lookup. The parent comes from `params._meta.traceparent`, else the
//! `traceparent` header; a malformed one starts a new trace. The caller's tool name is named
//! in the span only once the host accepted the call (a caller's unknown name never becomes a
//! span name); no argument, result or header value is ever an attribute.

use airlock_egress::trace::{RequestTracer, TRACEPARENT, parse_traceparent};
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, KeyValue};
use rmcp::model::{CallToolRequestParams, CallToolResponse};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

/// The MCP session header (2025-03-26 and later).
const SESSION_HEADER: &str = "mcp-session-id";
/// The MCP protocol version header.
const VERSION_HEADER: &str = "mcp-protocol-version";

/// Starts the server span of a `tools/call` when the request is traced; the returned context
/// carries the span and the tracer, for the spans of everything the call does.
pub(super) fn start(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Option<Context> {
    let parts = context.extensions.get::<http::request::Parts>()?;
    let tracer = parts.extensions.get::<RequestTracer>()?;
    let parent = parent(request, context, &parts.headers);
    let mut attributes = vec![
        KeyValue::new("mcp.method.name", "tools/call"),
        KeyValue::new("gen_ai.operation.name", "execute_tool"),
        KeyValue::new("jsonrpc.request.id", context.id.to_string()),
        KeyValue::new("network.transport", "tcp"),
        KeyValue::new("network.protocol.name", "http"),
    ];
    for (header, key) in [
        (SESSION_HEADER, "mcp.session.id"),
        (VERSION_HEADER, "mcp.protocol.version"),
    ] {
        if let Some(value) = parts.headers.get(header).and_then(|v| v.to_str().ok()) {
            attributes.push(KeyValue::new(key, value.to_owned()));
        }
    }
    let span = tracer
        .span_builder("tools/call")
        .with_kind(SpanKind::Server)
        .with_attributes(attributes)
        .start_with_context(tracer.as_ref(), &parent);
    Some(
        parent
            .with_span(span)
            .with_value(RequestTracer::clone(tracer)),
    )
}

/// Ends the span: the tool is named once the host accepted the call; a tool error is
/// `error.type = tool_error`, a JSON-RPC error its code.
pub(super) fn finish(cx: &Context, tool: &str, result: &Result<CallToolResponse, ErrorData>) {
    let span = cx.span();
    if result.is_ok() {
        span.update_name(format!("tools/call {tool}"));
        span.set_attribute(KeyValue::new("gen_ai.tool.name", tool.to_owned()));
    }
    let error = match result {
        Ok(CallToolResponse::Complete(r)) if r.is_error == Some(true) => {
            Some("tool_error".to_owned())
        }
        Ok(_) => None,
        Err(e) => {
            let code = e.code.0.to_string();
            span.set_attribute(KeyValue::new("rpc.response.status_code", code.clone()));
            Some(code)
        }
    };
    if let Some(kind) = error {
        span.set_attribute(KeyValue::new("error.type", kind));
        span.set_status(Status::error(""));
    }
    span.end();
}

/// The caller's trace: `params._meta.traceparent` (rmcp moves `_meta` into the context), else
/// the HTTP header; the empty context (a new trace) when neither is a valid one.
fn parent(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
    headers: &http::HeaderMap,
) -> Context {
    let in_meta = |meta: &serde_json::Map<String, serde_json::Value>| {
        meta.get(TRACEPARENT)
            .and_then(|v| v.as_str())
            .map(str::to_owned)
    };
    let from_meta = request
        .meta
        .as_ref()
        .and_then(|m| in_meta(&m.0.0))
        .or_else(|| in_meta(&context.meta.0.0));
    let from_header = || {
        headers
            .get(TRACEPARENT)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    from_meta
        .and_then(|value| parse_traceparent(&value))
        .or_else(|| from_header().and_then(|value| parse_traceparent(&value)))
        .map_or_else(Context::new, |remote| {
            Context::new().with_remote_span_context(remote)
        })
}
