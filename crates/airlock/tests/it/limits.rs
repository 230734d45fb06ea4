//! What clients may hold of `airlock serve` (docs/rules.md OPS-12, OPS-13), against a real
//! child process configured with small bounds: idle connections cannot lock callers out, a
//! header sent too slowly ends its connection, and requests beyond the in-flight bounds are
//! answered 503 with `Retry-After`.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::airlock;
use crate::support::{Server, deployment_with, http, mcp_request};

const ALICE: &str = "mcp-alice-4f0c2b8e9d1a47c3b5e6f708192a3b4c";
const BOB: &str = "mcp-bob-9e8d7c6b5a4f43e2d1c0b9a8f7e6d5c4";
const ADMIN: &str = "admin-limits-0a1b2c3d4e5f60718293a4b5c6d7e8f9";

/// Two MCP principals and an admin.
fn deployment(server: &str) -> tempfile::TempDir {
    let toml = format!(
        "listen = \"127.0.0.1:0\"\n[[mcp.tokens]]\ncredential = \"airlock.alice\"\nprincipal = \"alice\"\n[[mcp.tokens]]\ncredential = \"airlock.bob\"\nprincipal = \"bob\"\n[[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"root\"\n[credentials]\nfile = \"creds.yml\"\n[server]\n{server}"
    );
    deployment_with(
        &toml,
        &format!("airlock:\n  alice: {ALICE}\n  bob: {BOB}\n  admin: {ADMIN}\n"),
    )
}

/// `airlock serve` with at most `fds` file descriptors, as a host with a low limit has.
fn serve_with_fd_limit(dir: &std::path::Path, fds: u32) -> Server {
    let mut command = std::process::Command::new("sh");
    command
        .arg("-c")
        .arg(format!("ulimit -n {fds} && exec \"$0\" \"$@\""))
        .arg(airlock().get_program())
        .arg("serve")
        .arg(dir)
        .args(["--listen", "127.0.0.1:0"])
        .env("NO_COLOR", "1");
    Server::spawn(command)
}

/// A JSON-RPC request by `token`; (status, retry-after, body).
async fn rpc(base: &str, token: &str, method: &str, params: Value) -> (u16, Option<String>, Value) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let response = mcp_request(base)
        .bearer_auth(token)
        .timeout(Duration::from_secs(30))
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let retry = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    let text = response.text().await.unwrap();
    (
        status,
        retry,
        serde_json::from_str(&text).unwrap_or(Value::Null),
    )
}

/// OPS-12: far more connections that never send a byte than the cap (and than the process's
/// file descriptors) do not keep an authorized `tools/list` or `/healthz` from answering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_do_not_lock_callers_out() {
    let dir = deployment("max_connections = 8\n");
    let server = serve_with_fd_limit(dir.path(), 128);
    let mut idle = Vec::new();
    for _ in 0..200 {
        idle.push(TcpStream::connect(&server.addr).await.unwrap());
    }
    let base = format!("http://{}", server.addr);
    let listed = tokio::time::timeout(Duration::from_secs(10), async {
        // While the flood arrives a caller may be told to come back (503, Retry-After: 1) or
        // have its connection closed; it must not be kept out.
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
        loop {
            let sent = mcp_request(&base)
                .bearer_auth(ALICE)
                .body(body.clone())
                .send()
                .await;
            if let Ok(response) = sent
                && response.status() != 503
            {
                return response.json::<Value>().await.unwrap();
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    })
    .await
    .expect("an authorized call is answered while idle connections are held");
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    let health = tokio::time::timeout(
        Duration::from_secs(10),
        http(server.addr.parse().unwrap(), "GET", "/healthz", None, None),
    )
    .await
    .expect("/healthz is answered while idle connections are held");
    assert_eq!(health.0, 200, "{health:?}");
    drop(idle);
}

/// OPS-12: a connection that sends part of a header and stops is closed by the server after
/// `header_timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_header_is_cut_off() {
    let dir = deployment("header_timeout = \"1s\"\n");
    let server = Server::start(dir.path(), &[]);
    let mut stream = TcpStream::connect(&server.addr).await.unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        .await
        .unwrap();
    let mut buf = [0_u8; 512];
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the server kept a half-sent header open");
}

/// OPS-13: beyond `max_in_flight_per_principal` a principal's request is answered 503 with
/// `Retry-After` while another principal is served; beyond `max_in_flight` everyone's is,
/// the decisions API's too; health checks are not counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_beyond_the_in_flight_bounds_are_answered_503() {
    let dir = deployment("max_in_flight = 2\nmax_in_flight_per_principal = 1\n");
    let server = Server::start(dir.path(), &[]);
    let base = format!("http://{}", server.addr);
    let _alice_waits = hold_a_request(&base, ALICE).await;
    let (status, retry, body) = rpc(&base, ALICE, "tools/list", json!({})).await;
    assert_eq!((status, retry.as_deref()), (503, Some("1")), "{body}");
    assert_eq!(body["error"], "busy", "{body}");
    let (status, _, body) = rpc(&base, BOB, "tools/list", json!({})).await;
    assert_eq!(status, 200, "another principal is served: {body}");

    let _bob_waits = hold_a_request(&base, BOB).await;
    let addr = server.addr.parse().unwrap();
    let (status, body, head) = http(addr, "GET", "/v1/approvals", Some(ADMIN), None).await;
    assert_eq!(status, 503, "{body}");
    assert!(head.contains("retry-after: 1"), "{head}");
    assert_eq!(http(addr, "GET", "/healthz", None, None).await.0, 200);
}

/// Opens a request by `token` whose body never finishes arriving, so it stays in progress;
/// returns once the server counts it (the same principal is then refused). A probe can overtake
/// the request and have it refused; then it is opened again.
async fn hold_a_request(base: &str, token: &str) -> TcpStream {
    let addr = base.trim_start_matches("http://");
    let mut busy = open_a_request(addr, token).await;
    for _ in 0..100 {
        if rpc(base, token, "tools/list", json!({})).await.0 == 503 {
            return busy;
        }
        if matches!(busy.try_read(&mut [0_u8; 512]), Ok(n) if n > 0) {
            busy = open_a_request(addr, token).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the request was never counted as in flight");
}

/// A `POST /mcp` by `token` sent up to the middle of its body.
async fn open_a_request(addr: &str, token: &str) -> TcpStream {
    let mut busy = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer {token}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: 1000\r\n\r\n{{\"jsonrpc\""
    );
    busy.write_all(head.as_bytes()).await.unwrap();
    busy
}

/// OPS-12: when every connection under `max_connections` is serving a request, a new one is
/// answered 503 with `Retry-After` and closed instead of waiting unanswered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_beyond_a_busy_cap_is_answered_503() {
    let dir = deployment("max_connections = 1\n");
    let server = Server::start(dir.path(), &[]);
    // The only connection is busy: its request's body is still arriving.
    let busy = open_a_request(&server.addr, ALICE).await;
    let addr = server.addr.parse().unwrap();
    let (status, body, head) = http(addr, "GET", "/healthz", None, None).await;
    assert_eq!(status, 503, "{body}");
    assert!(head.contains("retry-after: 1"), "{head}");
    assert_eq!(body["error"], "busy", "{body}");
    drop(busy);
}
