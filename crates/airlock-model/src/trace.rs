//! The span of one model request, after the OpenTelemetry GenAI semantic conventions for
//! inference (docs/rules.md OPS-81): kind client, named `chat {model}`, with
//! `gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model`, the provider's
//! address, then `gen_ai.response.model` and `gen_ai.response.finish_reasons` when the stream
//! named them, the turn's token usage, or `error.type` (the [`ModelErrorKind`]).
//!
//! Guarantees: a span is started only under a traced context (the run's, which carries the
//! tracer); its attributes never hold the system prompt, a message, a tool's arguments or
//! result, the streamed text or a header value — the conversation is the caller's content.
//! The provider's HTTP request (and each retry) is a client span under it (EGRESS-35).

use airlock_egress::trace::child_span;
use opentelemetry::trace::{SpanKind, Status, TraceContextExt as _};
use opentelemetry::{Array, Context, KeyValue, StringValue, Value};

use crate::{ChatRequest, ModelError, ModelErrorKind, Turn};

/// What a provider's stream said about its answer beside the turn itself.
#[derive(Debug, Default)]
pub(crate) struct Reply {
    /// The model that answered, as the provider named it.
    pub(crate) model: Option<String>,
    /// Why each choice stopped (`stop`, `tool_calls`, `end_turn`, …), in the provider's words.
    pub(crate) finish_reasons: Vec<String>,
}

/// Starts the `chat {model}` span of `request` sent by `provider` to `url`, under the current
/// context; `None` when the current context is not traced.
pub(crate) fn start(provider: &'static str, request: &ChatRequest, url: &str) -> Option<Context> {
    let mut attributes = vec![
        KeyValue::new("gen_ai.operation.name", "chat"),
        KeyValue::new("gen_ai.provider.name", provider),
        KeyValue::new("gen_ai.request.model", request.model.clone()),
    ];
    if let Some(max) = request.max_tokens {
        attributes.push(KeyValue::new("gen_ai.request.max_tokens", i64::from(max)));
    }
    if let Ok(uri) = url.parse::<http::Uri>() {
        if let Some(host) = uri.host() {
            attributes.push(KeyValue::new("server.address", host.to_owned()));
        }
        let default = match uri.scheme_str() {
            Some("https") => Some(443),
            Some("http") => Some(80),
            _ => None,
        };
        if let Some(port) = uri.port_u16().or(default) {
            attributes.push(KeyValue::new("server.port", i64::from(port)));
        }
    }
    let name = format!("chat {}", request.model);
    Context::map_current(|cx| child_span(cx, name, SpanKind::Client, attributes))
}

/// Records what the stream said of its answer on the current span (the request's, while its
/// stream is read; nothing when untraced).
pub(crate) fn replied(reply: &Reply) {
    Context::map_current(|cx| {
        let span = cx.span();
        if !span.is_recording() {
            return;
        }
        if let Some(model) = &reply.model {
            span.set_attribute(KeyValue::new("gen_ai.response.model", model.clone()));
        }
        if !reply.finish_reasons.is_empty() {
            let reasons: Vec<StringValue> = reply
                .finish_reasons
                .iter()
                .map(|r| StringValue::from(r.clone()))
                .collect();
            span.set_attribute(KeyValue::new(
                "gen_ai.response.finish_reasons",
                Value::Array(Array::String(reasons)),
            ));
        }
    });
}

/// Ends the span of `cx` with the turn's usage, or the failure's kind as `error.type`.
pub(crate) fn finish(cx: &Context, result: &Result<Turn, ModelError>) {
    let span = cx.span();
    match result {
        Ok(turn) => {
            let tokens = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
            span.set_attribute(KeyValue::new(
                "gen_ai.usage.input_tokens",
                tokens(turn.usage.input_tokens),
            ));
            span.set_attribute(KeyValue::new(
                "gen_ai.usage.output_tokens",
                tokens(turn.usage.output_tokens),
            ));
        }
        Err(error) => {
            span.set_attribute(KeyValue::new("error.type", error_type(error.kind)));
            span.set_status(Status::error(""));
        }
    }
    span.end();
}

/// A failure's `error.type`: its kind, in snake case.
fn error_type(kind: ModelErrorKind) -> &'static str {
    match kind {
        ModelErrorKind::Provider => "provider",
        ModelErrorKind::Blocked => "blocked",
        ModelErrorKind::Unreachable => "unreachable",
        ModelErrorKind::Timeout => "timeout",
        ModelErrorKind::Malformed => "malformed",
        ModelErrorKind::Configuration => "configuration",
    }
}

#[cfg(test)]
mod tests {
    use sse_stream::Sse;

    use crate::wire::Decoder;
    use crate::{anthropic, openai};

    fn feed<D: Decoder>(events: &[&str]) -> D {
        let mut decoder = D::default();
        for data in events {
            let event = Sse::default().data(*data);
            decoder.event(&event, &|_| {}).unwrap();
        }
        decoder
    }

    /// OPS-81: what each provider's stream says of its answer is kept for the span.
    #[test]
    fn the_answering_model_and_finish_reasons_are_read_from_both_streams() {
        let openai: openai::Stream = feed(&[
            r#"{"model":"gpt-x-2026","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}"#,
            r#"{"model":"gpt-x-2026","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        ]);
        assert_eq!(openai.reply().model.as_deref(), Some("gpt-x-2026"));
        assert_eq!(openai.reply().finish_reasons, ["stop"]);
        let anthropic: anthropic::Stream = feed(&[
            r#"{"type":"message_start","message":{"model":"claude-x","usage":{"input_tokens":3}}}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":2}}"#,
            r#"{"type":"message_stop"}"#,
        ]);
        assert_eq!(anthropic.reply().model.as_deref(), Some("claude-x"));
        assert_eq!(anthropic.reply().finish_reasons, ["tool_use"]);
    }
}
