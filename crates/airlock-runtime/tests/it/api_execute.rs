//! The api executor end to end: a real HTTP server on 127.0.0.1, reached only through the
//! egress guard with loopback allowed by policy, exactly as an operator would configure it.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use airlock_egress::{EgressPolicy, GuardedClient, StaticResolver};
use airlock_runtime::api::execute;
use airlock_spec::{ApiAuth, ApiConnection, ApiOperation, CredentialPath, Credentials, Method};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const TOKEN: &str = "tok-9f86d081884c7d659a2feaa0c55ad015";

/// A one-shot HTTP server: answers one request with `response` and hands back the request head.
async fn server(response: &'static str) -> (u16, tokio::task::JoinHandle<String>) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut buf = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = socket.read(&mut buf).await.unwrap();
            assert!(n > 0, "client closed early");
            head.extend_from_slice(&buf[..n]);
        }
        socket.write_all(response.as_bytes()).await.unwrap();
        socket.shutdown().await.ok();
        String::from_utf8_lossy(&head).into_owned()
    });
    (port, task)
}

fn client(allow_loopback: bool) -> GuardedClient {
    let mut policy = EgressPolicy::default();
    if allow_loopback {
        policy.allow_cidrs.push("127.0.0.1/32".parse().unwrap());
    }
    let resolver = StaticResolver::new()
        .with("api.tenant.example.com", [IpAddr::V4(Ipv4Addr::LOCALHOST)])
        .with(
            "public.tenant.example.com",
            ["93.184.215.14".parse().unwrap()],
        );
    GuardedClient::builder(policy)
        .resolver(Arc::new(resolver))
        .build()
        .unwrap()
}

fn operation(path: &str, select: Option<&str>) -> ApiOperation {
    ApiOperation {
        slug: "erp".into(),
        operation: "get".into(),
        connection: "erp_main".into(),
        auth: ApiAuth::Bearer,
        method: Method::Get,
        path: path.into(),
        query: vec![("cuit".into(), "{cuit}".into())],
        body: None,
        allow_slashes: Vec::new(),
        select: select.map(str::to_owned),
    }
}

fn connection(base_url: &str) -> ApiConnection {
    ApiConnection {
        // A loopback test upstream: the operator vouches for it (EGRESS-38).
        use_egress_allow: true,
        base_url: base_url.into(),
        credential: Some(CredentialPath::try_from("erp.token").unwrap()),
        per_principal: None,
    }
}

fn creds() -> Credentials {
    Credentials::from_pairs([("erp.token".to_owned(), TOKEN.to_owned())])
}

/// Runs `operation(path, select)` against `base` with the test credential and arguments.
async fn run(
    allow_loopback: bool,
    path: &str,
    select: Option<&str>,
    base: &str,
) -> Result<Value, airlock_runtime::ToolError> {
    execute(
        &client(allow_loopback),
        &operation(path, select),
        &connection(base),
        &creds(),
        &args(),
    )
    .await
}

fn args() -> Map<String, Value> {
    json!({"cuit": "30-1"}).as_object().unwrap().clone()
}

#[tokio::test]
async fn a_read_goes_through_the_guard_with_its_credential() {
    let (port, head) = server("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 27\r\nconnection: close\r\n\r\n{\"data\":{\"name\":\"ACME SA\"}}").await;
    let base = format!("http://api.tenant.example.com:{port}/v1");
    let out = run(true, "/clientes", Some("data.name"), &base).await;
    assert_eq!(out.unwrap(), json!("ACME SA"));
    let head = head.await.unwrap().to_ascii_lowercase();
    assert!(
        head.starts_with("get /v1/clientes?cuit=30-1 http/1.1\r\n"),
        "{head}"
    );
    assert!(
        head.contains(&format!("host: api.tenant.example.com:{port}\r\n")),
        "{head}"
    );
    assert!(
        head.contains(&format!("authorization: bearer {TOKEN}")),
        "{head}"
    );
    assert!(head.contains("accept-encoding: identity"), "{head}");
}

#[tokio::test]
async fn a_private_host_is_a_tool_error_and_nothing_is_sent() {
    let (port, head) = server("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").await;
    let base = format!("http://api.tenant.example.com:{port}");
    let err = run(false, "/x", None, &base).await.unwrap_err();
    assert_eq!(err.kind.as_str(), "blocked");
    assert!(err.message.contains("refused"), "{}", err.message);
    assert!(!err.message.contains(TOKEN));
    head.abort();
}

#[tokio::test]
async fn internal_names_are_refused_without_resolving() {
    for base in [
        "https://erp.svc",
        "https://erp.cluster.local",
        "https://localhost",
        "https://erp",
    ] {
        let err = run(true, "/x", None, base).await.unwrap_err();
        assert_eq!(err.kind.as_str(), "blocked", "{base}");
        assert!(err.message.contains("refused"), "{base}: {}", err.message);
    }
}

#[tokio::test]
async fn a_credential_never_travels_over_plain_http_to_a_public_host() {
    let err = run(true, "/x", None, "http://public.tenant.example.com")
        .await
        .unwrap_err();
    assert_eq!(err.kind.as_str(), "blocked");
    assert!(err.message.starts_with("scheme refused"), "{}", err.message);
}

#[tokio::test]
async fn an_upstream_failure_keeps_status_and_body() {
    let (port, _head) = server("HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\ncontent-length: 11\r\nconnection: close\r\n\r\nmaintenance").await;
    let base = format!("http://api.tenant.example.com:{port}");
    let err = run(true, "/x", None, &base).await.unwrap_err();
    assert_eq!(err.kind.as_str(), "upstream_error");
    assert_eq!(err.message, "HTTP 503: maintenance");
}

#[tokio::test]
async fn a_redirect_is_not_followed() {
    let (port, _head) = server("HTTP/1.1 302 Found\r\nlocation: http://169.254.169.254/\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").await;
    let base = format!("http://api.tenant.example.com:{port}");
    let err = run(true, "/x", None, &base).await.unwrap_err();
    assert!(err.message.contains("302"), "{}", err.message);
}
