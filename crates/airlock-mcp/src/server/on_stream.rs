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
//!   caller's own waiting request from the same endpoint URL, refused otherwise (404, with the
//!   reason; 400 and -32602 naming the field for an elicitation answer not matching the
//!   `requestedSchema` asked, which also fails the request upstream). The waiting replica
//!   learns the answer from the ledger.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::FutureExt;
use rmcp::model::RequestId;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::elicited;
use super::handler::Endpoint;
use super::plain::{self, PlainCall};
use super::request::{Admitted, AdmittedRequest, rpc_refusal};
use super::request_state::RequestStates;
use super::sessions;
use crate::asking::{Answering, Asker, Question};
use crate::host::{ClientAnswer, ClientQuestion, HostError};

/// The prefix of the JSON-RPC id a relayed request is sent under; the row's id follows.
const ID_PREFIX: &str = "airlock-asked-";
/// How many events may wait for a slow client before the relay waits for it.
const EVENTS: usize = 16;

/// The id of `request` and what its client declared, when it is a call to answer here.
pub(super) fn asking_call(
    request: &AdmittedRequest,
    states: Option<&RequestStates>,
    levels: &super::notices::Levels,
) -> Option<(RequestId, Map<String, Value>)> {
    let states = states?;
    request.headers().get(sessions::HEADER)?;
    let id = plain::plain_id(request, levels)?;
    let declared = sessions::declared(states, request)?;
    Some((id, declared))
}

/// Runs the call `request` as an event stream that relays its upstream's requests.
pub(super) fn answer(
    endpoint: &Endpoint,
    request: AdmittedRequest,
    id: RequestId,
    declared: &Map<String, Value>,
) -> Response {
    let call = plain::take(request, id);
    let Some((asker, questions)) = Asker::new(declared) else {
        // `sessions` seals only ids that declare one of the three.
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let (events, body) = mpsc::channel::<Result<Bytes, Infallible>>(EVENTS);
    tokio::spawn(drive(endpoint.clone(), call, (asker, questions), events));
    let stream = futures::stream::unfold(body, |mut body| async move {
        body.recv().await.map(|event| (event, body))
    });
    let mut response = Response::new(Body::from_stream(stream));
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

/// The events sink of one stream.
type Events = mpsc::Sender<Result<Bytes, Infallible>>;

/// Runs the call, relaying each question of its upstream, then sends its result and ends.
async fn drive(
    endpoint: Endpoint,
    call: PlainCall,
    (asker, mut questions): (Asker, mpsc::Receiver<Question>),
    events: Events,
) {
    let admitted = call.admitted.clone();
    let serving = {
        let mut downstream = admitted.caller.downstream.clone();
        downstream.asker = Some(asker);
        admitted.serving(downstream)
    };
    let run = plain::run(&endpoint, serving, call);
    tokio::pin!(run);
    let message = loop {
        tokio::select! {
            message = &mut run => break message,
            Some(question) = questions.recv() => {
                relay(&endpoint, &admitted, question, &events).await;
            }
        }
    };
    send(&events, &message).await;
}

/// Records `question`, sends it to the client, and leaves a task waiting for its answer.
async fn relay(endpoint: &Endpoint, admitted: &Admitted, question: Question, events: &Events) {
    let (method, params, call, answering) = question.into_parts();
    let asked = ClientQuestion {
        method: method.to_owned(),
        params: params.clone(),
        call,
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
    // A client gone away is noticed when the call's session ends: the wait fails then.
    send(events, &message).await;
    tokio::spawn(wait(endpoint.clone(), admitted.clone(), row, answering));
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

/// `message` as one event on the stream (a client gone away loses it).
async fn send(events: &Events, message: &impl serde::Serialize) {
    let Ok(data) = serde_json::to_string(message) else {
        return;
    };
    let _ = events
        .send(Ok(Bytes::from(format!("data: {data}\n\n"))))
        .await;
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

/// Records the client's `answer` to its relayed request `row`: 202, or why not.
pub(super) async fn settle(
    endpoint: &Endpoint,
    admitted: &Admitted,
    row: &str,
    answer: ClientAnswer,
) -> Response {
    let host = endpoint.host();
    let (scope, caller) = (&admitted.scope, &admitted.caller);
    let question = match host.client_question(scope, caller, row).await {
        Ok(question) => question,
        Err(error) => return refused(StatusCode::NOT_FOUND, -32602, &error.to_string()),
    };
    let mismatch = match (&answer, question.method.as_str()) {
        (Ok(result), "elicitation/create") => checked(&question.params, result).err(),
        _ => None,
    };
    let recorded = match &mismatch {
        // The upstream is told why its question went unanswered.
        Some(refusal) => Err(json!({"code": -32602, "message": refusal.message})),
        None => answer,
    };
    if let Err(error) = host.answer_client(scope, caller, row, recorded).await {
        return refused(StatusCode::NOT_FOUND, -32602, &error.to_string());
    }
    match mismatch {
        Some(refusal) => refused(StatusCode::BAD_REQUEST, -32602, &refusal.message),
        None => StatusCode::ACCEPTED.into_response(),
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
