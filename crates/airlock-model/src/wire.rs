//! What the HTTP providers share (docs/rules.md MODEL-3 to MODEL-8): one streamed POST per
//! attempt through the egress guard, the retry loop around it, the server-sent events read
//! into a [`Decoder`], and every failure mapped to a [`ModelError`].
//!
//! Guarantees: every request goes through one guarded [`Call`] per turn (one resolution, one
//! deadline for every attempt and every read); the credential travels in a header marked
//! sensitive and is cut out of every provider message before it becomes an error; an attempt
//! is retried only while no text reached the token sink (MODEL-6).

use std::marker::PhantomData;

use bytes::Bytes;
use futures::StreamExt;
use futures::future::BoxFuture;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderName, HeaderValue};
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;
use sse_stream::{Sse, SseStream};

use airlock_egress::trace::within;
use airlock_egress::{BodyStream, Call, EgressError, GuardedClient, Request, StreamingResponse};

use crate::retry::{self, Attempt, Retry};
use crate::trace::{self, Reply};
use crate::{ChatRequest, Model, ModelError, ModelErrorKind, TokenSink, Turn};

/// The most of an error reply read for its message.
const ERROR_BODY_BYTES: usize = 64 * 1024;
/// The most of a provider's message kept in an error, in characters.
const MESSAGE_CHARS: usize = 500;
/// The message of a refusal whose body said nothing readable (its status is shown beside it).
const NO_MESSAGE: &str = "its answer carried no message";

/// Reads one provider's event stream into a turn.
pub(crate) trait Decoder: Default + Send {
    /// Takes one event; text for the person goes to `sink` as it arrives.
    fn event(&mut self, event: &Sse, sink: TokenSink<'_>) -> Result<(), ModelError>;
    /// Whether any text went to the sink (then the turn is never retried).
    fn streamed(&self) -> bool;
    /// What the stream said of its answer so far (the model that answered, finish reasons).
    fn reply(&self) -> &Reply;
    /// The turn, once the stream ended.
    fn finish(self) -> Result<Turn, ModelError>;
}

/// One provider's wire format: how a request is written and how its answer is read.
pub(crate) trait Api: std::fmt::Debug + Send + Sync + 'static {
    /// Reads the provider's event stream.
    type Stream: Decoder;
    /// The provider's `gen_ai.provider.name` (docs/rules.md OPS-81).
    const PROVIDER: &'static str;
    /// The JSON body of one request.
    fn request_body(request: &ChatRequest) -> Value;
}

/// A model behind an HTTP provider that speaks `A`.
#[derive(Debug)]
pub(crate) struct Remote<A> {
    endpoint: Endpoint,
    api: PhantomData<A>,
}

impl<A: Api> Remote<A> {
    pub(crate) fn new(endpoint: Endpoint) -> Self {
        Self {
            endpoint,
            api: PhantomData,
        }
    }
}

impl<A: Api> Model for Remote<A> {
    fn turn<'a>(
        &'a self,
        request: &'a ChatRequest,
        tokens: TokenSink<'a>,
    ) -> BoxFuture<'a, Result<Turn, ModelError>> {
        Box::pin(async move {
            let body = serde_json::to_vec(&A::request_body(request))
                .map_err(|_| ModelError::malformed("the request could not be encoded"))?;
            let turn = self.endpoint.turn::<A::Stream>(body.into(), tokens);
            let cx = trace::start(A::PROVIDER, request, &self.endpoint.url);
            let result = within(cx.as_ref(), turn).await;
            if let Some(cx) = &cx {
                trace::finish(cx, &result);
            }
            result
        })
    }
}

/// One provider endpoint: where to POST, with which headers, retried how.
#[derive(Debug)]
pub(crate) struct Endpoint {
    pub(crate) client: GuardedClient,
    /// The full URL of the streamed endpoint.
    pub(crate) url: String,
    /// Headers of every request, the credential's among them (marked sensitive).
    pub(crate) headers: Vec<(HeaderName, HeaderValue)>,
    /// The credential, only to cut it out of provider messages.
    pub(crate) key: Option<SecretString>,
    pub(crate) retry: Retry,
}

impl Endpoint {
    /// Builds the header carrying the credential, marked sensitive so no debug output shows it.
    pub(crate) fn secret_header(value: &str) -> Result<HeaderValue, ModelError> {
        let mut value = HeaderValue::from_str(value).map_err(|_| {
            ModelError::configuration("the credential holds characters a header cannot carry")
        })?;
        value.set_sensitive(true);
        Ok(value)
    }

    /// Runs one turn: the POST of `body`, retried per [`Retry`], read with decoder `D`.
    pub(crate) async fn turn<D: Decoder>(
        &self,
        body: Bytes,
        sink: TokenSink<'_>,
    ) -> Result<Turn, ModelError> {
        let call = self.client.call();
        let call = &call;
        let body = &body;
        self.retry
            .run(call.deadline(), || self.attempt::<D>(call, body, sink))
            .await
            .map_err(|e| self.redacted(e))
    }

    async fn attempt<D: Decoder>(
        &self,
        call: &Call,
        body: &Bytes,
        sink: TokenSink<'_>,
    ) -> Attempt<Turn> {
        let mut request = Request::post(self.url.clone())
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header(ACCEPT, HeaderValue::from_static("text/event-stream"))
            .body(body.clone());
        for (name, value) in &self.headers {
            request = request.header(name.clone(), value.clone());
        }
        if self.key.is_some() {
            request = request.with_credential();
        }
        let response = match call.send_streaming(request).await {
            Ok(response) => response,
            Err(e) => return from_egress(&e, false),
        };
        if !response.status().is_success() {
            return Attempt::from(self.provider_error(response).await);
        }
        if !is_event_stream(&response) {
            return Attempt::Fail(ModelError::malformed(
                "the provider did not answer with an event stream",
            ));
        }
        read_stream::<D>(response.into_body(), sink).await
    }

    /// An error status as a provider error with the provider's own message (MODEL-7).
    async fn provider_error(
        &self,
        response: StreamingResponse,
    ) -> (ModelError, bool, Option<std::time::Duration>) {
        let status = response.status().as_u16();
        let after = retry::retry_after(response.headers());
        let text = response
            .into_body()
            .collect_up_to(ERROR_BODY_BYTES)
            .await
            .unwrap_or_default();
        // The status is shown beside the message (MODEL-14): a body without one says so.
        let message = provider_message(&text).unwrap_or_else(|| NO_MESSAGE.to_owned());
        let error = ModelError {
            kind: ModelErrorKind::Provider,
            status: Some(status),
            message: self.redact(&message),
        };
        (error, retry::retryable_status(status), after)
    }

    fn redacted(&self, mut error: ModelError) -> ModelError {
        error.message = self.redact(&error.message);
        error
    }

    /// Cuts the credential out of `text` (MODEL-8): a provider may echo a wrong key back.
    fn redact(&self, text: &str) -> String {
        match &self.key {
            Some(key) if !key.expose_secret().is_empty() => {
                text.replace(key.expose_secret(), "[redacted]")
            }
            _ => text.to_owned(),
        }
    }
}

impl From<(ModelError, bool, Option<std::time::Duration>)> for Attempt<Turn> {
    fn from((error, retryable, after): (ModelError, bool, Option<std::time::Duration>)) -> Self {
        if retryable {
            Attempt::Again { error, after }
        } else {
            Attempt::Fail(error)
        }
    }
}

fn is_event_stream(response: &StreamingResponse) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|e| e.trim().eq_ignore_ascii_case("text/event-stream"))
        })
}

/// Reads the event stream into a turn with decoder `D`.
async fn read_stream<D: Decoder>(body: BodyStream, sink: TokenSink<'_>) -> Attempt<Turn> {
    let chunks = futures::stream::unfold(body, |mut body| async move {
        match body.next_chunk().await {
            Ok(Some(chunk)) => Some((Ok(chunk), body)),
            Ok(None) => None,
            Err(e) => Some((Err(e), body)),
        }
    });
    let mut events = std::pin::pin!(SseStream::from_bytes_stream(chunks));
    let mut decoder = D::default();
    while let Some(event) = events.next().await {
        let outcome = match event {
            Ok(event) => decoder.event(&event, sink),
            Err(sse_stream::Error::Body(source)) => match source.downcast::<EgressError>() {
                Ok(e) => return from_egress(&e, decoder.streamed()),
                Err(_) => Err(ModelError::malformed("the event stream could not be read")),
            },
            Err(e) => Err(ModelError::malformed(format!(
                "the event stream is malformed: {e}"
            ))),
        };
        if let Err(error) = outcome {
            return Attempt::Fail(error);
        }
    }
    trace::replied(decoder.reply());
    match decoder.finish() {
        Ok(turn) => Attempt::Done(turn),
        Err(error) => Attempt::Fail(error),
    }
}

/// Maps a guard refusal or failure (MODEL-7); connection failures are retried while nothing
/// was streamed.
fn from_egress(e: &EgressError, streamed: bool) -> Attempt<Turn> {
    let message = e.to_string();
    let (kind, retryable) = match e {
        EgressError::BlockedScheme { .. }
        | EgressError::BlockedUrl { .. }
        | EgressError::BlockedName { .. }
        | EgressError::BlockedAddress { .. }
        | EgressError::BlockedRequest { .. } => (ModelErrorKind::Blocked, false),
        EgressError::Connect { .. } | EgressError::ConnectionLost { .. } => {
            (ModelErrorKind::Unreachable, !streamed)
        }
        EgressError::Unresolvable { .. } | EgressError::Tls { .. } => {
            (ModelErrorKind::Unreachable, false)
        }
        EgressError::Timeout { .. } => (ModelErrorKind::Timeout, false),
        EgressError::Redirect { .. }
        | EgressError::Encoding { .. }
        | EgressError::NotText { .. }
        | EgressError::TooLarge { .. } => (ModelErrorKind::Malformed, false),
        &EgressError::HttpStatus { status } => {
            let error = ModelError {
                kind: ModelErrorKind::Provider,
                status: Some(status),
                message: NO_MESSAGE.to_owned(),
            };
            return Attempt::from((error, retry::retryable_status(status), None));
        }
    };
    let error = ModelError {
        kind,
        status: None,
        message,
    };
    Attempt::from((error, retryable, None))
}

/// The provider's own message in an error body: `error.message` (OpenAI, Anthropic), `error`
/// as a string, or `message`; else the body's text. Control characters are replaced and the
/// text is shortened, since a person reads it.
pub(crate) fn provider_message(body: &[u8]) -> Option<String> {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    let from_json = json.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("error").filter(|e| e.is_string()))
            .or_else(|| v.get("message"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    let text = from_json.unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
    let clean: String = text
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MESSAGE_CHARS)
        .collect();
    (!clean.is_empty()).then_some(clean)
}

/// Parses an event's data as JSON, or says the stream is malformed.
pub(crate) fn event_json(event: &Sse) -> Result<Option<Value>, ModelError> {
    let Some(data) = event.data.as_deref() else {
        return Ok(None);
    };
    serde_json::from_str(data)
        .map(Some)
        .map_err(|_| ModelError::malformed("an event of the stream is not JSON"))
}

/// Arguments as the model wrote them: the parsed object, or the raw text as a string.
pub(crate) fn arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(serde_json::Map::new());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_provider_message_is_found_and_cleaned() {
        let openai = br#"{"error":{"message":"Rate limit reached","type":"requests"}}"#;
        assert_eq!(provider_message(openai).unwrap(), "Rate limit reached");
        let plain = b"upstream\x1b[31m down";
        assert_eq!(provider_message(plain).unwrap(), "upstream [31m down");
        assert_eq!(provider_message(b"  "), None);
        let long = "x".repeat(2000);
        assert_eq!(
            provider_message(long.as_bytes()).unwrap().len(),
            MESSAGE_CHARS
        );
    }

    #[test]
    fn unparseable_arguments_stay_text() {
        assert_eq!(arguments(r#"{"q":1}"#), serde_json::json!({"q": 1}));
        assert_eq!(arguments(""), serde_json::json!({}));
        assert_eq!(arguments("{\"q\":"), Value::String("{\"q\":".into()));
    }
}
