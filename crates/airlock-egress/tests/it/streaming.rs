//! Streamed responses (`Call::send_streaming`, docs/rules.md EGRESS-31 to EGRESS-34): the same
//! rules as a buffered response, the cap counted and the deadline kept while the body streams.

use std::sync::Arc;
use std::time::Duration;

use airlock_egress::{EgressError, EgressPolicy, GuardedClient, Request, StaticResolver};

use crate::support::{self, Reply, Server};

fn client(policy: EgressPolicy) -> GuardedClient {
    support::client(policy, Arc::new(StaticResolver::new()), None)
}

fn url(server: &Server) -> String {
    format!("http://127.0.0.1:{}/v1/stream", server.port())
}

/// Reads a streamed body to its end or its first error.
async fn read_all(client: &GuardedClient, url: String) -> (Vec<u8>, Result<(), EgressError>) {
    let response = match client.call().send_streaming(Request::post(url)).await {
        Ok(r) => r,
        Err(e) => return (Vec::new(), Err(e)),
    };
    let mut body = response.into_body();
    let mut read = Vec::new();
    loop {
        match body.next_chunk().await {
            Ok(Some(chunk)) => read.extend_from_slice(&chunk),
            Ok(None) => return (read, Ok(())),
            Err(e) => return (read, Err(e)),
        }
    }
}

/// An event stream of `body` without a declared length (chunked, as providers stream).
fn events(body: &[u8]) -> Reply {
    let mut chunked = format!("{:x}\r\n", body.len()).into_bytes();
    chunked.extend_from_slice(body);
    chunked.extend_from_slice(b"\r\n0\r\n\r\n");
    Reply::Raw {
        head: "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked"
            .into(),
        body: chunked,
    }
}

#[tokio::test]
async fn an_event_stream_is_read_to_its_end() {
    let server = Server::plain(|_| events(b"data: one\n\ndata: two\n\n")).await;
    let client = client(support::loopback_policy());
    let response = client
        .call()
        .send_streaming(Request::post(url(&server)))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let (body, end) = read_all(&client, url(&server)).await;
    end.unwrap();
    assert_eq!(body, b"data: one\n\ndata: two\n\n");
}

#[tokio::test]
async fn the_cap_is_counted_while_streaming() {
    let policy = EgressPolicy {
        max_body_bytes: 100,
        ..support::loopback_policy()
    };
    let client = client(policy);
    let exact = Server::plain(|_| events(&[b'a'; 100])).await;
    let (body, end) = read_all(&client, url(&exact)).await;
    end.unwrap();
    assert_eq!(body.len(), 100);
    let over = Server::plain(|_| events(&[b'a'; 101])).await;
    let (body, end) = read_all(&client, url(&over)).await;
    assert_eq!(end.unwrap_err().kind(), "too_large");
    assert!(body.len() <= 100, "more than the cap was handed on");
}

#[tokio::test]
async fn a_stream_that_stalls_ends_at_the_calls_deadline() {
    let server = Server::plain(|_| Reply::Trickle {
        head: "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream".into(),
        every: Duration::from_secs(3600),
    })
    .await;
    let policy = EgressPolicy {
        deadline: Duration::from_millis(300),
        ..support::loopback_policy()
    };
    let (body, end) = read_all(&client(policy), url(&server)).await;
    // The first byte came at once; then nothing until the deadline.
    assert_eq!(body, b"a");
    assert_eq!(end.unwrap_err().to_string(), "no answer in 300 ms");
}

#[tokio::test]
async fn a_streamed_response_obeys_the_head_rules() {
    let client = client(support::loopback_policy());
    for (head, kind) in [
        (
            "HTTP/1.1 302 Found\r\nlocation: http://10.0.0.1/\r\ncontent-length: 0",
            "redirect",
        ),
        (
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: gzip\r\ncontent-length: 0",
            "encoding",
        ),
        (
            "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: 0",
            "not_text",
        ),
        // Without a content type a stream cannot be checked for UTF-8 before it is handed on.
        ("HTTP/1.1 200 OK\r\ncontent-length: 0", "not_text"),
    ] {
        let head = head.to_owned();
        let server = Server::plain(move |_| Reply::Raw {
            head: head.clone(),
            body: vec![],
        })
        .await;
        let (_, end) = read_all(&client, url(&server)).await;
        assert_eq!(end.unwrap_err().kind(), kind);
        assert_eq!(server.seen().len(), 1);
    }
}

#[tokio::test]
async fn a_streamed_request_to_loopback_needs_the_operators_allow() {
    let server = Server::plain(|_| events(b"data: x\n\n")).await;
    let (_, end) = read_all(&client(EgressPolicy::default()), url(&server)).await;
    assert_eq!(end.unwrap_err().kind(), "blocked_address");
    assert!(server.seen().is_empty());
}

#[tokio::test]
async fn an_error_status_streams_its_body_for_the_caller() {
    let server = Server::plain(|_| Reply::Raw {
        head: "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\nretry-after: 2\r\ncontent-length: 17".into(),
        body: br#"{"error":"slow"} "#.to_vec(),
    })
    .await;
    let client = client(support::loopback_policy());
    let response = client
        .call()
        .send_streaming(Request::post(url(&server)))
        .await
        .unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "2");
    let text = response.into_body().collect_up_to(8).await.unwrap();
    assert_eq!(&text[..], br#"{"error""#);
}
