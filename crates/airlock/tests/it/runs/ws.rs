//! The run WebSocket (docs/rules.md AGENT-50, AGENT-51, AGENT-68) with a real client: events in
//! order, `done` last; a refused request as one error frame and a 4xxx close; a client that goes
//! away cancels its run; another principal's session is unknown to a caller.

use std::net::SocketAddr;

use airlock_testkit::{Cue, FakeCall, FakeModel, ModelReply, RawServer};
use futures::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::{CALLER, EVERY_SCOPE, helper_deployment, start_run, until_status};
use crate::support::serve_in_process;

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Connects to agent `agent`'s WebSocket with `token`; the handshake's error if refused.
async fn connect(
    addr: SocketAddr,
    agent: &str,
    token: Option<&str>,
) -> Result<Socket, tokio_tungstenite::tungstenite::Error> {
    let mut request = format!("ws://{addr}/v1/agents/{agent}/ws")
        .into_client_request()
        .unwrap();
    if let Some(token) = token {
        request
            .headers_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
    }
    tokio_tungstenite::connect_async(request)
        .await
        .map(|(socket, _)| socket)
}

/// Every text frame as JSON until the server closes; and the close's code and reason.
async fn frames(socket: &mut Socket) -> (Vec<Value>, Option<(u16, String)>) {
    let mut frames = Vec::new();
    while let Some(message) = socket.next().await {
        match message.unwrap() {
            Message::Text(text) => frames.push(serde_json::from_str(&text).unwrap()),
            Message::Close(frame) => {
                let close = frame.map(|f| (u16::from(f.code), f.reason.to_string()));
                return (frames, close);
            }
            _ => {}
        }
    }
    (frames, None)
}

fn position(frames: &[Value], kind: &str) -> Vec<usize> {
    frames
        .iter()
        .enumerate()
        .filter(|(_, f)| f["type"] == kind)
        .map(|(i, _)| i)
        .collect()
}

#[tokio::test]
async fn events_arrive_in_order_with_done_last() {
    let erp = RawServer::start(Some("no-such-method"), Cue::Status(500)).await;
    let both = ModelReply::calls(vec![
        FakeCall::new("call_1", "erp_lookup", &json!({"id": "7"})),
        FakeCall::new("call_2", "erp_lookup", &json!({"id": "8"})),
    ]);
    let answer = ModelReply::text(&["Seven ", "and eight."]);
    let model = FakeModel::openai(vec![both, answer]).await;
    let dir = helper_deployment(&model.endpoint(), &format!("http://127.0.0.1:{}", erp.port));
    let (addr, _) = serve_in_process(dir.path()).await;

    let mut socket = connect(addr, "helper", Some(CALLER)).await.unwrap();
    let request = json!({"input": "customers 7 and 8"});
    socket
        .send(Message::text(request.to_string()))
        .await
        .unwrap();
    let (frames, close) = frames(&mut socket).await;

    let kinds: Vec<&str> = frames.iter().map(|f| f["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"status"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"done"), "{kinds:?}");
    assert_eq!(position(&frames, "done").len(), 1, "{kinds:?}");
    let (calls, results) = (
        position(&frames, "tool_call"),
        position(&frames, "tool_result"),
    );
    assert_eq!((calls.len(), results.len()), (2, 2), "{kinds:?}");
    // Each result follows its own call.
    for r in &results {
        let id = &frames[*r]["call_id"];
        let call = calls.iter().find(|c| &frames[**c]["call_id"] == id);
        assert!(call.is_some_and(|c| c < r), "{frames:?}");
    }
    let tokens = position(&frames, "token");
    assert!(
        !tokens.is_empty() && tokens.iter().all(|t| *t > results[1]),
        "{kinds:?}"
    );
    let streamed: String = tokens
        .iter()
        .map(|t| frames[*t]["text"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, "Seven and eight.");
    let done = frames.last().unwrap();
    assert_eq!(done["answer"], "Seven and eight.", "{done}");
    assert_eq!(done["proposals"], json!([]), "{done}");
    assert!(
        done["session_id"].is_string() && done["usage"].is_object(),
        "{done}"
    );
    assert_eq!(close, Some((1000, "completed".to_owned())));
}

#[tokio::test]
async fn a_refused_request_is_one_error_frame_and_a_4xxx_close() {
    let model = FakeModel::openai(Vec::new()).await;
    let dir = helper_deployment(&model.endpoint(), "http://127.0.0.1:9");
    let (addr, _) = serve_in_process(dir.path()).await;

    // Authentication is plain HTTP, before the upgrade.
    let refused = connect(addr, "helper", None).await.err().unwrap();
    let tokio_tungstenite::tungstenite::Error::Http(response) = refused else {
        panic!("{refused:?}");
    };
    assert_eq!(response.status().as_u16(), 401);

    let mut socket = connect(addr, "helper", Some(CALLER)).await.unwrap();
    socket
        .send(Message::text(r#"{"input": ""}"#))
        .await
        .unwrap();
    let (frames, close) = frames(&mut socket).await;
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert_eq!(
        (
            &frames[0]["type"],
            &frames[0]["status"],
            &frames[0]["error"]
        ),
        (&json!("error"), &json!(400), &json!("bad_body")),
        "{frames:?}"
    );
    assert_eq!(close.map(|c| c.0), Some(4400));
    assert_eq!(model.requests(), 0);
}

#[tokio::test]
async fn a_client_that_disconnects_cancels_its_run() {
    // The first step's call runs; the second turn never comes (the provider stalls); the
    // client leaves: the run is recorded cancelled, and the model is not asked again.
    let erp = RawServer::start(Some("no-such-method"), Cue::Status(500)).await;
    let model = FakeModel::openai(vec![
        ModelReply::calls(vec![FakeCall::new(
            "call_1",
            "erp_lookup",
            &json!({"id": "7"}),
        )]),
        ModelReply::Stall,
    ])
    .await;
    let dir = helper_deployment(&model.endpoint(), &format!("http://127.0.0.1:{}", erp.port));
    let (addr, _) = serve_in_process(dir.path()).await;

    let mut socket = connect(addr, "helper", Some(CALLER)).await.unwrap();
    socket
        .send(Message::text(r#"{"input": "customer 7"}"#))
        .await
        .unwrap();
    let mut run_id = None;
    while let Some(Ok(Message::Text(text))) = socket.next().await {
        let frame: Value = serde_json::from_str(&text).unwrap();
        if frame["type"] == "status" {
            run_id = frame["run_id"].as_str().map(str::to_owned);
        }
        if frame["type"] == "tool_result" {
            break;
        }
    }
    let run_id = run_id.expect("a status frame names the run");
    // Bounded: the second turn has been asked for (and stalls) once the fake saw it.
    for _ in 0..500 {
        if model.requests() == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(model.requests(), 2);
    drop(socket);

    let run = until_status(addr, &run_id, "cancelled").await;
    assert_eq!(run["steps"], 1, "{run}");
    assert_eq!(erp.seen(), ["/customers?id=7"]);
    assert_eq!(model.requests(), 2, "nothing asked after the client left");
}

/// Sends `request` as the first frame over a new socket by `token`; the frames and the close.
async fn one_request(
    addr: SocketAddr,
    token: &str,
    request: &Value,
) -> (Vec<Value>, Option<(u16, String)>) {
    let mut socket = connect(addr, "helper", Some(token)).await.unwrap();
    socket
        .send(Message::text(request.to_string()))
        .await
        .unwrap();
    frames(&mut socket).await
}

#[tokio::test]
async fn another_principal_cannot_continue_a_session_it_did_not_start() {
    // AGENT-68: `carol` runs a conversation; `root` (granted the agent too) sends its session id
    // over the WebSocket and the run API, and is answered as for a session nobody opened —
    // while the session is idle and while its next run waits for a person alike.
    let fetch = FakeCall::new("call_1", "fetch", &json!({"url": "http://127.0.0.1:9/"}));
    let model = FakeModel::openai(vec![
        ModelReply::text(&["Hello."]),
        ModelReply::calls(vec![fetch]),
    ])
    .await;
    let dir = helper_deployment(&model.endpoint(), "http://127.0.0.1:9");
    let (addr, _) = serve_in_process(dir.path()).await;
    let (frames_of_carol, close) = one_request(addr, CALLER, &json!({"input": "hi"})).await;
    assert_eq!(
        close,
        Some((1000, "completed".to_owned())),
        "{frames_of_carol:?}"
    );
    let session = frames_of_carol.last().unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let nobody = airlock_ledger::SessionId::new().to_string();
    let (unknown, close) = one_request(
        addr,
        EVERY_SCOPE,
        &json!({"input": "x", "session_id": nobody}),
    )
    .await;
    assert_eq!(close.map(|c| c.0), Some(4404), "{unknown:?}");
    let unknown: Value =
        serde_json::from_str(&unknown[0].to_string().replace(&nobody, &session)).unwrap();
    assert_eq!(unknown["error"], "unknown_session", "{unknown}");

    let theirs = json!({"input": "what did carol ask?", "session_id": session});
    for round in ["idle", "parked"] {
        let (frames, close) = one_request(addr, EVERY_SCOPE, &theirs).await;
        assert_eq!(frames, std::slice::from_ref(&unknown), "{round}");
        assert_eq!(close.map(|c| c.0), Some(4404), "{round}");
        let (status, body) = start_run(addr, "helper", EVERY_SCOPE, theirs.clone()).await;
        let same = json!({"error": unknown["error"], "message": unknown["message"]});
        assert_eq!((status, body), (404, same), "{round}");
        if round == "idle" {
            // carol's next run in her session parks on the fetch.
            let next = json!({"input": "fetch it", "session_id": session});
            let (_, close) = one_request(addr, CALLER, &next).await;
            assert_eq!(close, Some((1000, "parked".to_owned())));
        }
    }
    assert_eq!(model.requests(), 2, "no foreign request reached the model");
}
