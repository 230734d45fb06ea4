//! OpenTelemetry for outgoing requests: one client span per request of a traced call, and the
//! W3C `traceparent` header that continues the trace at the upstream (docs/rules.md
//! EGRESS-35, EGRESS-36); and the shared convention every crate starts its spans by
//! ([`child_span`], [`root`], [`within`], [`within_owned`]).
//!
//! Guarantees: nothing happens unless the current context carries a [`RequestTracer`] (put
//! there by whoever started the trace), so an untraced request pays one thread-local read; a
//! span's `url.full` never holds a query, a fragment or user info (a query may hold a key);
//! no header value and no body is ever recorded.

use std::borrow::Cow;
use std::sync::Arc;

use http::{HeaderValue, Method};
use opentelemetry::context::FutureExt as _;
use opentelemetry::global::BoxedTracer;
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId, TraceState, Tracer,
};
use opentelemetry::{Context, KeyValue};
use url::Url;

/// The tracer a traced call carries in its [`Context`]; spans of its ledger commits and egress
/// requests are made with it. Absent: the call is not traced.
pub type RequestTracer = Arc<BoxedTracer>;

/// The W3C trace context header.
pub const TRACEPARENT: &str = "traceparent";

/// Reads a W3C `traceparent` (version `00` layout; a later version's first four fields are
/// read as the spec asks). `None` for anything malformed or all-zero ids.
#[must_use]
pub fn parse_traceparent(value: &str) -> Option<SpanContext> {
    let mut parts = value.trim().split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    let lower = |s: &str| !s.bytes().any(|b| b.is_ascii_uppercase());
    if !hex(version, 2) || version == "ff" || (version == "00" && parts.next().is_some()) {
        return None;
    }
    let well_formed = hex(trace, 32)
        && hex(span, 16)
        && hex(flags, 2)
        && [trace, span, flags].iter().all(|s| lower(s));
    if !well_formed {
        return None;
    }
    let trace_id = TraceId::from_hex(trace).ok()?;
    let span_id = SpanId::from_hex(span).ok()?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    let context = SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(flags) & TraceFlags::SAMPLED,
        true,
        TraceState::NONE,
    );
    context.is_valid().then_some(context)
}

/// The `traceparent` value naming `span` as the parent.
#[must_use]
pub fn traceparent(span: &SpanContext) -> String {
    format!(
        "00-{}-{}-{:02x}",
        span.trace_id(),
        span.span_id(),
        span.trace_flags().to_u8()
    )
}

/// `url` as a span may show it: scheme, host, port and path only.
#[must_use]
pub fn redacted_url(url: &Url) -> String {
    let mut shown = url.clone();
    shown.set_query(None);
    shown.set_fragment(None);
    // Only fails for URLs that cannot have user info, which then have none to remove.
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.into()
}

/// A new trace begun by airlock itself (a background worker's unit of work, a run nobody's
/// request carries): the empty context carrying `tracer`, to start a root span under.
#[must_use]
pub fn root(tracer: &RequestTracer) -> Context {
    Context::new().with_value(RequestTracer::clone(tracer))
}

/// Starts span `name` of `kind` as a child of `parent` when `parent` carries a tracer; the
/// returned context carries the span and the tracer, for the spans of what happens under it.
/// `None` when `parent` is not traced (nothing is started).
#[must_use]
pub fn child_span(
    parent: &Context,
    name: impl Into<Cow<'static, str>>,
    kind: SpanKind,
    attributes: Vec<KeyValue>,
) -> Option<Context> {
    let tracer = parent.get::<RequestTracer>()?;
    let span = tracer
        .span_builder(name)
        .with_kind(kind)
        .with_attributes(attributes)
        .start_with_context(tracer.as_ref(), parent);
    Some(parent.with_span(span))
}

/// Runs `work` with `cx` as its current context when there is one (a traced unit of work),
/// else as it is.
pub async fn within<F: Future>(cx: Option<&Context>, work: F) -> F::Output {
    match cx {
        Some(cx) => work.with_context(cx.clone()).await,
        None => work.await,
    }
}

/// [`within`] taking its context, for a task of its own (`tokio::spawn` does not carry the
/// spawner's context).
pub async fn within_owned<F: Future>(cx: Option<Context>, work: F) -> F::Output {
    within(cx.as_ref(), work).await
}

/// The client span of one outgoing request of a traced call.
#[derive(Debug)]
pub struct HttpSpan {
    cx: Context,
}

impl HttpSpan {
    /// Starts the span of a request to `url` under the current context; `None` when the
    /// current context is not traced.
    #[must_use]
    pub fn start_current(method: &Method, url: &Url) -> Option<Self> {
        Context::map_current(|cx| Self::start(cx, method, url))
    }

    /// Starts the span of a request to `url` as a child of `parent`; `None` when `parent` is
    /// not traced.
    #[must_use]
    pub fn start(parent: &Context, method: &Method, url: &Url) -> Option<Self> {
        parent.get::<RequestTracer>()?;
        let mut attributes = vec![
            KeyValue::new("http.request.method", method.as_str().to_owned()),
            KeyValue::new("url.full", redacted_url(url)),
        ];
        if let Some(host) = url.host_str() {
            attributes.push(KeyValue::new("server.address", host.to_owned()));
        }
        if let Some(port) = url.port_or_known_default() {
            attributes.push(KeyValue::new("server.port", i64::from(port)));
        }
        let cx = child_span(
            parent,
            method.as_str().to_owned(),
            SpanKind::Client,
            attributes,
        )?;
        Some(Self { cx })
    }

    /// The `traceparent` header naming this span, for the upstream.
    #[must_use]
    pub fn header(&self) -> Option<HeaderValue> {
        HeaderValue::from_str(&traceparent(self.cx.span().span_context())).ok()
    }

    /// Ends the span with the response's status, or the failure's kind as `error.type`.
    pub fn finish(self, result: Result<u16, &str>) {
        let span = self.cx.span();
        match result {
            Ok(status) => {
                span.set_attribute(KeyValue::new(
                    "http.response.status_code",
                    i64::from(status),
                ));
                if status >= 400 {
                    span.set_attribute(KeyValue::new("error.type", status.to_string()));
                    span.set_status(Status::error(""));
                }
            }
            Err(kind) => {
                span.set_attribute(KeyValue::new("error.type", kind.to_owned()));
                span.set_status(Status::error(""));
            }
        }
        span.end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trips_and_malformed_values_are_refused() {
        let value = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let context = parse_traceparent(value).unwrap();
        assert!(context.is_sampled() && context.is_remote());
        assert_eq!(traceparent(&context), value);
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        ] {
            assert!(parse_traceparent(bad).is_none(), "{bad}");
        }
        // A later version may add fields; the first four are read.
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-more";
        assert!(!parse_traceparent(later).unwrap().is_sampled());
    }

    #[test]
    fn a_shown_url_has_no_query_fragment_or_user_info() {
        let url = Url::parse("https://user:pw@api.example.com:8443/v1/x?key=secret#frag").unwrap();
        assert_eq!(redacted_url(&url), "https://api.example.com:8443/v1/x");
    }

    #[test]
    fn an_untraced_context_starts_no_span() {
        let url = Url::parse("https://api.example.com/").unwrap();
        assert!(HttpSpan::start(&Context::new(), &Method::GET, &url).is_none());
        assert!(HttpSpan::start_current(&Method::GET, &url).is_none());
        let none = child_span(&Context::new(), "x", SpanKind::Internal, Vec::new());
        assert!(none.is_none());
    }
}
