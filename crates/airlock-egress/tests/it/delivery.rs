//! How far a failed request got (docs/rules.md EGRESS-30): only a refusal or a failed
//! connection proves nothing was sent; a connection that breaks after the request was handed
//! to it, or a deadline that passes while the server holds it, leaves the upstream's outcome
//! unknown; an answer is an answer.

use std::time::Duration;

use airlock_egress::{Delivery, EgressError, EgressPolicy, Request};
use tokio::net::TcpListener;

use crate::support::{Reply, Server, client, loopback_policy, resolver};

async fn post(port: u16, deadline: Duration) -> Result<airlock_egress::Response, EgressError> {
    let policy = EgressPolicy {
        deadline,
        ..loopback_policy()
    };
    let client = client(
        policy,
        resolver("api.tenant.example.com", &["127.0.0.1"]),
        None,
    );
    client
        .send(
            Request::post(format!("http://api.tenant.example.com:{port}/orders")).body("{\"n\":1}"),
        )
        .await
}

#[tokio::test]
async fn a_refused_connection_sent_nothing() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap().port()
    };
    let err = post(port, Duration::from_secs(5)).await.unwrap_err();
    assert_eq!(
        (err.kind(), err.delivery()),
        ("connect", Delivery::NotSent),
        "{err}"
    );
}

#[tokio::test]
async fn a_hangup_after_the_request_is_unanswered() {
    let server = Server::plain(|_| Reply::Hangup).await;
    let err = post(server.port(), Duration::from_secs(5))
        .await
        .unwrap_err();
    assert_eq!(server.seen().len(), 1, "the server read the request");
    assert_eq!(
        (err.kind(), err.delivery()),
        ("connection_lost", Delivery::Unanswered),
        "{err}"
    );
    assert!(
        err.to_string().contains("after the request was sent"),
        "{err}"
    );
}

#[tokio::test]
async fn a_body_cut_short_is_unanswered() {
    let server = Server::plain(|_| Reply::Raw {
        head: "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100".into(),
        body: b"{\"id\":".to_vec(),
    })
    .await;
    let port = server.port();
    // The server closes after writing: the promised 100 bytes never come.
    let err = post(port, Duration::from_secs(5)).await;
    let err = match err {
        Err(err) => err,
        Ok(response) => panic!("a cut body passed: {:?}", response.status()),
    };
    assert_eq!(err.delivery(), Delivery::Unanswered, "{err}");
}

#[tokio::test]
async fn silence_past_the_deadline_is_unanswered() {
    let server = Server::plain(|_| Reply::Silence).await;
    let err = post(server.port(), Duration::from_millis(300))
        .await
        .unwrap_err();
    assert_eq!(
        (err.kind(), err.delivery()),
        ("timeout", Delivery::Unanswered),
        "{err}"
    );
}

#[tokio::test]
async fn an_error_status_is_an_answer() {
    let server = Server::plain(|_| Reply::Raw {
        head: "HTTP/1.1 500 Oops\r\ncontent-type: text/plain\r\ncontent-length: 4".into(),
        body: b"oops".to_vec(),
    })
    .await;
    let response = post(server.port(), Duration::from_secs(5)).await.unwrap();
    let err = response.error_for_status().unwrap_err();
    assert_eq!(err.delivery(), Delivery::Answered);
}
