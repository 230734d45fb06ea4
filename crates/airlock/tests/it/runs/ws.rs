//! The run WebSocket (docs/rules.md AGENT-50, AGENT-51) with a real client: events in order,
//! `done` last; a refused request as one error frame and a 4xxx close; a client that goes away
//! cancels its run.

use std::net::SocketAddr;

use airlock_testkit::{Cue, FakeCall, FakeModel, ModelReply, RawServer};
use futures::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::{CALLER, helper_deployment, until_status};
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
