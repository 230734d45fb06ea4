//! A session-era `tools/call` whose client takes requests: the upstream's `elicitation/create`,
//! `sampling/createMessage` and `roots/list` relayed to the client on the call's own event
//! stream, and the client's answers, which may reach any replica (docs/rules.md MCP-94 to
//! MCP-97).
//!
//! Guarantees:
//! - Only a plain session-era call (`plain`'s conditions) whose `Mcp-Session-Id` is one this
//!   endpoint sealed for the same caller and scope, declaring `elicitation`, `sampling` or
//!   `roots` (`sessions`), takes this path; it is answered with an event stream (the client
//!   accepts one: it said so), every other request as before.
//! - Each request of the upstream is a ledger row (`ToolHost::ask_client`) before it is sent to
//!   the client, under the id `airlock-asked-<row>`; the stream then carries the call's result
//!   as its last event. The call runs as a task of its own: a client gone away loses the
//!   stream, never the call, and a request nobody will answer fails once the call's session
//!   ends.
//! - A POST whose body is a JSON-RPC answer (`result` or `error`, no `method`) to such an id is
//!   the client's answer, at whichever replica it arrives: accepted (202) when it answers the
//!   caller's own waiting request from the same endpoint URL in the same session and reads as
//!   its method's result, refused otherwise with 400 naming why — never 404, which would end the
//!   client's session — (an elicitation answer not matching the `requestedSchema` asked also
//!   fails the request upstream), or 500 for the host's own failure. The waiting replica learns
//!   the answer from the ledger.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::{FutureExt, StreamExt};
use rmcp::model::{RequestId, ServerJsonRpcMessage};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::elicited;
use super::handler::Endpoint;
use super::notices;
use super::plain::{self, PlainCall};
use super::request::{Admitted, AdmittedRequest, rpc_refusal};
use super::sessions::Session;
use crate::asking::{Answering, Asker, Question};
use crate::host::{ClientAnswer, ClientQuestion, HostError};
use crate::relay::{Notice, Relay};

/// The prefix of the JSON-RPC id a relayed request is sent under; the row's id follows.
const ID_PREFIX: &str = "airlock-asked-";
/// How many events may wait for a slow client before the relay waits for it.
const EVENTS: usize = 16;

/// The id of `request`, when it is a call to answer here: one whose `session` (as
/// `sessions::carried` opened it) declares what a question needs.
pub(super) fn asking_call(
    request: &AdmittedRequest,
    session: Option<&Session>,
) -> Option<RequestId> {
    session.filter(|s| !s.declared.is_empty())?;
    plain::plain_but_logged(request)
}

/// Runs the call `request`, relaying its upstream's requests: plain JSON when its result is the
/// first thing to send (as rmcp answers), an event stream once anything precedes it.
pub(super) async fn answer(
    endpoint: &Endpoint,
    request: AdmittedRequest,
    id: RequestId,
    session: Session,
) -> Response {
    let call = plain::take(request, id);
    let Some((asker, questions)) = Asker::new(&session.declared) else {
        // `asking_call` takes only sessions that declare one of the three.
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let (events, mut body) = mpsc::channel::<Outgoing>(EVENTS);
    let asking = (asker, questions, session.key);
    tokio::spawn(drive(endpoint.clone(), call, asking, events));
    let Some(first) = body.recv().await else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    if first.last {
        return plain::json_body(first.data);
    }
    let rest = futures::stream::unfold(body, |mut body| async move {
        body.recv().await.map(|next| (next.data, body))
    });
    let messages = futures::stream::iter([first.data]).chain(rest);
    event_stream(messages.map(|data| data_event(&data)))
}

/// One serialized JSON-RPC message as an event.
pub(super) fn data_event(data: &str) -> Bytes {
    Bytes::from(format!("data: {data}\n\n"))
}

/// An event stream of `events`, each already framed ([`data_event`], or a comment).
pub(super) fn event_stream(
    events: impl futures::Stream<Item = Bytes> + Send + 'static,
) -> Response {
    let events = events.map(Ok::<_, Infallible>);
    let mut response = Response::new(Body::from_stream(events));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-cache"),
    );
    response
}

/// One message for the client, serialized; `last`: the call's answer, after which none follows.
struct Outgoing {
    data: String,
    last: bool,
}

/// The messages of one call's answer.
type Events = mpsc::Sender<Outgoing>;

/// Runs the call, relaying each question of its upstream, then sends its result and ends.
async fn drive(
    endpoint: Endpoint,
    call: PlainCall,
    (asker, mut questions, session): (Asker, mpsc::Receiver<Question>, String),
    events: Events,
) {
    let admitted = call.admitted.clone();
    // The log level its principal set (MCP-64): the upstream's messages go on this stream too.
    let level = endpoint.levels().get(&admitted);
    let (logs, mut notices) = level.map(|l| Relay::new(false, Some(l))).unzip();
    let serving = {
        let mut downstream = admitted.caller.downstream.clone();
        downstream.asker = Some(asker);
        downstream.relay = logs;
        admitted.serving(downstream)
    };
    let run = plain::run(&endpoint, serving, call);
    tokio::pin!(run);
    let message = loop {
        tokio::select! {
            biased;
            message = &mut run => break message,
            // What the upstream sent first goes first: its messages before its next question.
            Some(notice) = next_notice(&mut notices) => log(&events, notice).await,
            Some(question) = questions.recv() => {
                relay(&endpoint, (&admitted, &session), question, &events).await;
            }
        }
    };
    // What the upstream sent before its result goes out before it.
    while let Some(notice) = notices.as_mut().and_then(|n| n.try_recv().ok()) {
        log(&events, notice).await;
    }
    out(&events, &message, true).await;
}

/// The next message of `notices`; never, when the request asked for none.
async fn next_notice(notices: &mut Option<mpsc::Receiver<Notice>>) -> Option<Notice> {
    match notices {
        Some(notices) => notices.recv().await,
        None => std::future::pending().await,
    }
}

/// One log message of the upstream, as its notification.
async fn log(events: &Events, notice: Notice) {
    if let Some(notification) = notices::notification(None, notice) {
        send(events, &ServerJsonRpcMessage::notification(notification)).await;
    }
}

/// Records `question`, leaves a task waiting for its answer, and sends it to the client.
async fn relay(
    endpoint: &Endpoint,
    (admitted, session): (&Admitted, &str),
    question: Question,
    events: &Events,
) {
    let (method, params, call, answering) = question.into_parts();
    if answering.is_gone() {
        // Its upstream session ended while it waited to be relayed: nothing to ask.
        return;
    }
    let asked = ClientQuestion {
        method: method.to_owned(),
        params: params.clone(),
        call,
        session: Some(session.to_owned()),
    };
    let host = endpoint.host();
    let row = match host
        .ask_client(&admitted.scope, &admitted.caller, asked)
        .await
    {
        Ok(row) => row,
        Err(error) => {
            answering.send(Err(host_error(&error)));
            return;
        }
    };
    let message = json!({"jsonrpc": "2.0", "id": format!("{ID_PREFIX}{row}"), "method": method, "params": params});
    // The wait renews the row's lease from now on, however slowly the client reads; a client
    // gone away is noticed when the call's session ends, and the wait fails the row then.
    tokio::spawn(wait(endpoint.clone(), admitted.clone(), row, answering));
    send(events, &message).await;
}

/// Waits for the client's answer to the request `row`, and hands it to the upstream session.
async fn wait(endpoint: Endpoint, admitted: Admitted, row: String, mut answering: Answering) {
    let answer = {
        let gone = answering.gone().boxed();
        let host = endpoint.host();
        host.client_answer(&admitted.scope, &admitted.caller, &row, gone)
            .await
    };
    answering.send(answer.unwrap_or_else(|error| Err(host_error(&error))));
}

/// `message`, to go before the call's answer (a client gone away loses it).
async fn send(events: &Events, message: &impl serde::Serialize) {
    out(events, message, false).await;
}

/// `message` for the client; `last`: the call's answer.
async fn out(events: &Events, message: &impl serde::Serialize, last: bool) {
    let Ok(data) = serde_json::to_string(message) else {
        return;
    };
    let _ = events.send(Outgoing { data, last }).await;
}

/// A host error as the JSON-RPC error the upstream gets.
fn host_error(error: &HostError) -> Value {
    json!({"code": -32603, "message": error.to_string()})
}

/// The relayed request a POSTed JSON-RPC answer answers, and the answer, when it is one.
pub(super) fn client_answer(request: &AdmittedRequest) -> Option<(String, ClientAnswer)> {
    let message = request.message_object()?;
    if message.contains_key("method") {
        return None;
    }
    let row = message.get("id")?.as_str()?.strip_prefix(ID_PREFIX)?;
    let answer = match (message.get("result"), message.get("error")) {
        (Some(result), None) => Ok(result.clone()),
        (None, Some(error)) => Err(error.clone()),
        _ => return None,
    };
    Some((row.to_owned(), answer))
}

/// Records the client's `answer` to its relayed request `row`: 202, or why not — never 404,
/// which would tell the client its session is gone.
pub(super) async fn settle(
    endpoint: &Endpoint,
    (request, session): (&AdmittedRequest, Option<&str>),
    row: &str,
    answer: ClientAnswer,
) -> Response {
    let host = endpoint.host();
    let admitted = request.admitted();
    let (scope, caller) = (&admitted.scope, &admitted.caller);
    let question = match host.client_question(scope, caller, row).await {
        Ok(question) => question,
        Err(error) => return host_refusal(&error),
    };
    if question.session.is_some() && question.session.as_deref() != session {
        let other = "the request was asked in another session: answer it with that session's id";
        return refused(StatusCode::BAD_REQUEST, -32602, other);
    }
    let mismatch = match &answer {
        Ok(result) => fits(&question, result).err(),
        Err(_) => None,
    };
    let recorded = match &mismatch {
        // The upstream is told why its question went unanswered.
        Some(refusal) => Err(json!({"code": -32602, "message": refusal.message})),
        None => answer,
    };
    if let Err(error) = host.answer_client(scope, caller, row, recorded).await {
        return host_refusal(&error);
    }
    match mismatch {
        Some(refusal) => refused(StatusCode::BAD_REQUEST, -32602, &refusal.message),
        None => StatusCode::ACCEPTED.into_response(),
    }
}

/// `result` read as the result of `question`'s method (rmcp's own type of it), and an
/// elicitation's answer against the form it asked.
fn fits(question: &ClientQuestion, result: &Value) -> Result<(), rmcp::ErrorData> {
    #[allow(deprecated, reason = "sampling and roots are part of 2025-11-25")]
    let read = match question.method.as_str() {
        "sampling/createMessage" => {
            serde_json::from_value::<rmcp::model::CreateMessageResult>(result.clone()).map(drop)
        }
        "roots/list" => {
            serde_json::from_value::<rmcp::model::ListRootsResult>(result.clone()).map(drop)
        }
        _ => serde_json::from_value::<rmcp::model::ElicitResult>(result.clone()).map(drop),
    };
    if let Err(e) = read {
        let method = &question.method;
        let why = format!("result: not a {method} result: {e}");
        return Err(rmcp::ErrorData::invalid_params(why, None));
    }
    match question.method.as_str() {
        "elicitation/create" => checked(&question.params, result),
        _ => Ok(()),
    }
}

/// A host's refusal of an answer: 400 for what the client got wrong, 500 for the host's own
/// failure.
fn host_refusal(error: &HostError) -> Response {
    match error {
        HostError::Internal(_) => {
            refused(StatusCode::INTERNAL_SERVER_ERROR, -32603, "internal error")
        }
        other => refused(StatusCode::BAD_REQUEST, -32602, &other.to_string()),
    }
}

/// An elicitation answer against the `requestedSchema` its request asked with (MCP-87).
fn checked(params: &Value, result: &Value) -> Result<(), rmcp::ErrorData> {
    match params.get("requestedSchema") {
        Some(schema) => elicited::check_result(schema, result),
        None => Ok(()),
    }
}

fn refused(status: StatusCode, code: i64, message: &str) -> Response {
    *rpc_refusal(status, &Value::Null, code, message)
}
