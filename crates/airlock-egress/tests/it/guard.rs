//! End-to-end behaviour of the guarded client against real servers on 127.0.0.1.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use airlock_egress::{EgressPolicy, Request, StaticResolver};
use http::HeaderValue;
use http::header::AUTHORIZATION;

use crate::support::{self, Rebinding, Reply, Server};

fn json_ok() -> Reply {
    Reply::ok("application/json", br#"{"ok":true}"#.to_vec())
}

#[tokio::test]
async fn tls_keeps_the_name_in_host_and_sni_and_checks_the_certificate() {
    let (server, cert) = Server::tls(&["api.tenant.test"], |_| json_ok()).await;
    let policy = EgressPolicy {
        allow_hosts: vec!["api.tenant.test".into()],
        ..support::loopback_policy()
    };
    let client = support::client(
        policy,
        support::resolver("api.tenant.test", &["127.0.0.1"]),
        Some(&cert),
    );
    let url = format!("https://api.tenant.test:{}/v1", server.port());
    let reply = client.send(Request::get(url)).await.unwrap();
    assert_eq!(reply.text(), r#"{"ok":true}"#);
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].header("host").unwrap(),
        format!("api.tenant.test:{}", server.port())
    );
    assert_eq!(seen[0].sni.as_deref(), Some("api.tenant.test"));
    assert_eq!(
        seen[0].header("accept-encoding").as_deref(),
        Some("identity")
    );
}

#[tokio::test]
async fn a_certificate_for_another_name_is_refused() {
    let (server, cert) = Server::tls(&["other.tenant.test"], |_| json_ok()).await;
    let policy = EgressPolicy {
        allow_hosts: vec!["api.tenant.test".into()],
        ..support::loopback_policy()
    };
    let client = support::client(
        policy,
        support::resolver("api.tenant.test", &["127.0.0.1"]),
        Some(&cert),
    );
    let url = format!("https://api.tenant.test:{}/", server.port());
    let err = client.send(Request::get(url)).await.unwrap_err();
    assert_eq!(err.kind(), "tls", "{err}");
    assert!(server.seen().is_empty());
}

#[tokio::test]
async fn a_rebinding_resolver_is_asked_once_per_call() {
    let server = Server::plain(|_| json_ok()).await;
    let first: IpAddr = "127.0.0.1".parse().unwrap();
    // The later answer is private and not allowed: were it used, the request would be refused.
    let rebinding = Rebinding::new(vec![vec![first], vec!["10.0.0.1".parse().unwrap()]]);
    let client = support::client(support::loopback_policy(), rebinding.clone(), None);
    let call = client.call();
    let url = format!("http://rebind.example.com:{}/", server.port());
    for _ in 0..3 {
        call.send(Request::get(url.clone())).await.unwrap();
    }
    assert_eq!(rebinding.lookups(), 1);
    assert_eq!(server.seen().len(), 3);
    // A new call resolves again, and gets the private answer: refused.
    let err = client.send(Request::get(url)).await.unwrap_err();
    assert_eq!(err.kind(), "blocked_address");
    assert_eq!(rebinding.lookups(), 2);
}

#[tokio::test]
async fn both_spellings_of_a_name_share_one_lookup_in_a_call() {
    let server = Server::plain(|_| json_ok()).await;
    let first: IpAddr = "127.0.0.1".parse().unwrap();
    let rebinding = Rebinding::new(vec![vec![first], vec!["10.0.0.1".parse().unwrap()]]);
    let client = support::client(support::loopback_policy(), rebinding.clone(), None);
    let call = client.call();
    for host in ["rebind.example.com", "rebind.example.com."] {
        let url = format!("http://{host}:{}/", server.port());
        call.send(Request::get(url)).await.unwrap();
    }
    assert_eq!(rebinding.lookups(), 1);
    assert_eq!(server.seen().len(), 2);
}

#[tokio::test]
async fn mixed_unresolvable_and_unspecified_answers_are_blocked() {
    let cases: [(&[&str], &str); 4] = [
        (&["93.184.215.14", "127.0.0.2"], "blocked_address"),
        (&["127.0.0.1", "0.0.0.0"], "blocked_address"),
        (&["127.0.0.1", "::"], "blocked_address"),
        (&[], "unresolvable"),
    ];
    for (answer, kind) in cases {
        let client = support::client(
            support::loopback_policy(),
            support::resolver("x.example.com", answer),
            None,
        );
        let err = client
            .send(Request::get("http://x.example.com/"))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), kind, "{answer:?}: {err}");
    }
    let client = support::client(
        support::loopback_policy(),
        Arc::new(StaticResolver::new()),
        None,
    );
    let err = client
        .send(Request::get("http://nowhere.example.com/"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "unresolvable");
}

#[tokio::test]
async fn redirects_are_not_followed() {
    for location in ["http://169.254.169.254/", "/elsewhere"] {
        let loc = location.to_owned();
        let server = Server::plain(move |_| Reply::Raw {
            head: format!("HTTP/1.1 302 Found\r\nlocation: {loc}\r\ncontent-length: 0"),
            body: vec![],
        })
        .await;
        let client = support::client(
            support::loopback_policy(),
            Arc::new(StaticResolver::new()),
            None,
        );
        let err = client
            .send(Request::get(format!("http://127.0.0.1:{}/", server.port())))
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the server answered 302 (a redirect), which is not followed"
        );
        assert_eq!(server.seen().len(), 1, "{location}: followed");
    }
}

#[tokio::test]
async fn the_body_cap_is_exact_and_binary_is_refused() {
    let policy = EgressPolicy {
        max_body_bytes: 1000,
        ..support::loopback_policy()
    };
    let client = support::client(policy, Arc::new(StaticResolver::new()), None);
    for (size, content_type, want) in [
        (1000, "text/plain", None),
        (1001, "text/plain", Some("too_large")),
        (10, "application/octet-stream", Some("not_text")),
        (10, "image/png", Some("not_text")),
    ] {
        let server = Server::plain(move |_| Reply::ok(content_type, vec![b'a'; size])).await;
        let result = client
            .send(Request::get(format!("http://127.0.0.1:{}/", server.port())))
            .await;
        match want {
            None => assert_eq!(result.unwrap().body().len(), size),
            Some(kind) => assert_eq!(result.unwrap_err().kind(), kind),
        }
    }
}

#[tokio::test]
async fn a_trickling_server_hits_the_whole_call_deadline() {
    let server = Server::plain(|_| Reply::Trickle {
        head: "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 100000".into(),
        every: Duration::from_millis(20),
    })
    .await;
    let policy = EgressPolicy {
        deadline: Duration::from_millis(300),
        ..support::loopback_policy()
    };
    let client = support::client(policy, Arc::new(StaticResolver::new()), None);
    let err = client
        .send(Request::get(format!("http://127.0.0.1:{}/", server.port())))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "no answer in 300 ms");
}

#[tokio::test]
async fn one_deadline_covers_every_request_of_a_call() {
    let server = Server::plain(|seen| {
        if seen.head.starts_with("GET /slow") {
            Reply::Trickle {
                head: "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 100000"
                    .into(),
                every: Duration::from_millis(20),
            }
        } else {
            json_ok()
        }
    })
    .await;
    let policy = EgressPolicy {
        deadline: Duration::from_millis(300),
        ..support::loopback_policy()
    };
    let client = support::client(policy, Arc::new(StaticResolver::new()), None);
    let call = client.call();
    let base = format!("http://127.0.0.1:{}", server.port());
    call.send(Request::get(format!("{base}/fast")))
        .await
        .unwrap();
    assert_eq!(
        call.send(Request::get(format!("{base}/slow")))
            .await
            .unwrap_err()
            .kind(),
        "timeout"
    );
    // The deadline has passed: the next request of the same call fails at once.
    assert_eq!(
        call.send(Request::get(format!("{base}/fast")))
            .await
            .unwrap_err()
            .kind(),
        "timeout"
    );
}

#[tokio::test]
async fn credentials_never_travel_over_plain_http_except_to_allowed_loopback() {
    let server = Server::plain(|_| json_ok()).await;
    let bearer = || HeaderValue::from_static("Bearer secret-token");
    // Operator-allowed loopback: allowed.
    let client = support::client(
        support::loopback_policy(),
        support::resolver("sidecar.example.com", &["127.0.0.1"]),
        None,
    );
    let url = format!("http://sidecar.example.com:{}/", server.port());
    client
        .send(Request::get(url).header(AUTHORIZATION, bearer()))
        .await
        .unwrap();
    // A public address over http: refused before connecting, and the message has no secret.
    let client = support::client(
        EgressPolicy::default(),
        support::resolver("api.example.com", &["93.184.215.14"]),
        None,
    );
    for request in [
        Request::get("http://api.example.com/").header(AUTHORIZATION, bearer()),
        Request::get("http://api.example.com/?key=secret-token").with_credential(),
    ] {
        let err = client.send(request).await.unwrap_err();
        assert_eq!(err.kind(), "blocked_scheme");
        assert!(!err.to_string().contains("secret"), "{err}");
    }
}

#[tokio::test]
async fn a_trailing_dot_name_is_pinned_under_its_exact_host() {
    let server = Server::plain(|_| json_ok()).await;
    let client = support::client(
        support::loopback_policy(),
        support::resolver("api.example.com", &["127.0.0.1"]),
        None,
    );
    let url = format!("http://API.Example.COM.:{}/", server.port());
    client.send(Request::get(url)).await.unwrap();
    assert_eq!(
        server.seen()[0].header("host").unwrap(),
        format!("api.example.com.:{}", server.port())
    );
}

#[tokio::test]
async fn calls_with_the_same_checked_addresses_share_connections() {
    let server = Server::plain(|_| json_ok()).await;
    let client = support::client(
        support::loopback_policy(),
        support::resolver("api.example.com", &["127.0.0.1"]),
        None,
    );
    let url = format!("http://api.example.com:{}/", server.port());
    for _ in 0..3 {
        client.send(Request::get(url.clone())).await.unwrap();
    }
    assert_eq!(server.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_prepared_client_reaches_only_its_pinned_name() {
    let server = Server::plain(|_| Reply::Raw {
        head: "HTTP/1.1 301 Moved\r\nlocation: http://other.example.com/\r\ncontent-length: 0"
            .into(),
        body: vec![],
    })
    .await;
    let client = support::client(
        support::loopback_policy(),
        support::resolver("api.example.com", &["127.0.0.1"]),
        None,
    );
    let prepared = client
        .prepare(
            &format!("http://api.example.com:{}/mcp", server.port()),
            false,
        )
        .await
        .unwrap();
    assert_eq!(
        prepared.addresses,
        [SocketAddr::from(([127, 0, 0, 1], server.port()))]
    );
    // The reqwest client itself follows no redirect ...
    let reply = prepared
        .client
        .post(prepared.url.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 301);
    assert_eq!(
        server.seen()[0].header("accept-encoding").as_deref(),
        Some("identity")
    );
    // ... and reaches no name it was not pinned to: not another name, not even `localhost`
    // (which system DNS would answer with the very loopback address the server listens on).
    for other in ["other.example.com", "localhost"] {
        let err = prepared
            .client
            .get(format!("http://{other}:{}/", server.port()))
            .send()
            .await
            .unwrap_err();
        assert!(err.is_connect(), "{other}: {err}");
    }
    assert_eq!(server.seen().len(), 1);
}
