//! The server: the decisions API over a real SQLite ledger and a loopback upstream, and the
//! `airlock serve` binary's start-up and graceful shutdown.

use std::io::{BufRead as _, BufReader, Lines};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, ChildStdout, Stdio};
use std::time::Duration;

use airlock_ledger::InvocationState;
use airlock_runtime::OutcomeKind;
use airlock_spec::ScopeId;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

use crate::airlock;
use crate::support::{
    Server, call_context, deployment_with, hello_upstream, http, listening_addr, metrics,
    serve_in_process, sigterm,
};

pub(crate) const ADMIN: &str = "admin-token-7c4a8d09ca3762af61e59520943dc264";

/// A POST by the admin; returns (status, JSON body or Null).
pub(crate) async fn post(addr: SocketAddr, path: &str, body: Option<Value>) -> (u16, Value) {
    let (status, body, _) = http(addr, "POST", path, Some(ADMIN), body).await;
    (status, body)
}

/// The deployment of the API tests: an admin token for `alice`, `ask_human`, gated `fetch`.
pub(crate) fn deployment() -> tempfile::TempDir {
    let toml = "listen = \"127.0.0.1:0\"\n[[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"alice\"\n[egress]\nallow = [\"127.0.0.1/32\"]\nallow_fetch = true\n[credentials]\nfile = \"creds.yml\"\n[builtins.ask_human]\n[builtins.fetch]\napproval = \"always\"\n";
    deployment_with(toml, &format!("airlock:\n  admin: {ADMIN}\n"))
}

#[tokio::test]
async fn decisions_api_is_deny_by_default_and_runs_approved_calls_once() {
    let dir = deployment();
    let (addr, gateway) = serve_in_process(dir.path()).await;

    let page = hello_upstream().await;
    let ctx = call_context(&gateway, ScopeId::Gateway, Some("bob"), "1").await;
    let outcome = gateway
        .call(&ctx, "fetch", json!({"url": format!("http://{page}/")}))
        .await
        .unwrap();
    assert_eq!(outcome.kind(), OutcomeKind::Parked, "{outcome:?}");
    let row = outcome.into_invocation();

    assert!(row.expires_at.is_some(), "{row:?}");
    let (status, _, head) = http(addr, "GET", "/v1/approvals", None, None).await;
    assert_eq!(status, 401);
    assert!(head.contains("www-authenticate: bearer"), "{head}");
    assert_eq!(
        http(addr, "GET", "/v1/approvals", Some("wrong"), None)
            .await
            .0,
        401
    );

    let (status, list, _) = http(addr, "GET", "/v1/approvals?tool=fetch", Some(ADMIN), None).await;
    assert_eq!(status, 200);
    assert_eq!(list["approvals"][0]["id"], row.id.to_string());
    assert_eq!(list["approvals"][0]["state"], "awaiting_approval");

    let path = format!("/v1/approvals/{}/decision", row.id);
    let (status, body) = post(
        addr,
        &path,
        Some(json!({"decision": "approve", "by": "mallory"})),
    )
    .await;
    assert_eq!(
        status, 422,
        "unknown fields, including a self-chosen decider, are refused: {body}"
    );
    let (status, body) = post(addr, &path, Some(json!({"decision": "approve"}))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["decision"]["by"], "alice");
    let (status, body) = post(
        addr,
        &path,
        Some(json!({"decision": "deny", "reason": "late"})),
    )
    .await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("by alice"),
        "{body}"
    );

    // The approved call runs in the background; wait for the row to settle (woken, not polled).
    let mut current = gateway.store().get(row.id).await.unwrap();
    for _ in 0..20 {
        if current.state == InvocationState::Succeeded {
            break;
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        current = gateway
            .store()
            .wait_for_change(row.id, Some(current.version), deadline)
            .await
            .unwrap();
    }
    assert_eq!(current.state, InvocationState::Succeeded);
    assert_eq!(
        airlock::result::result_json(&current).unwrap()["body"],
        "hello"
    );

    let (status, shown, _) = http(
        addr,
        "GET",
        &format!("/v1/invocations/{}", row.id),
        Some(ADMIN),
        None,
    )
    .await;
    assert_eq!((status, shown["state"].as_str()), (200, Some("succeeded")));
    assert_eq!(
        http(addr, "GET", "/v1/invocations/nope", Some(ADMIN), None)
            .await
            .0,
        400
    );
    assert_eq!(http(addr, "GET", "/healthz", None, None).await.0, 200);
    assert_eq!(http(addr, "GET", "/readyz", None, None).await.0, 200);
}

#[tokio::test]
async fn a_question_is_answered_over_the_api() {
    let dir = deployment();
    let (addr, gateway) = serve_in_process(dir.path()).await;
    let ctx = call_context(&gateway, ScopeId::Gateway, None, "q").await;
    let parked = gateway
        .call(&ctx, "ask_human", json!({"question": "Which warehouse?"}))
        .await
        .unwrap();
    let path = format!("/v1/approvals/{}/decision", parked.invocation().id);
    let (status, body) = post(
        addr,
        &path,
        Some(json!({"decision": "answer", "text": "Rosario"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["state"], "succeeded");
    assert_eq!(body["result"]["answer"], "Rosario");
    let (status, body) = post(addr, &path, Some(json!({"decision": "maybe"}))).await;
    assert_eq!(status, 422, "{body}");
}

/// `airlock serve DIR` as a child with both outputs piped, past its banner: the child, the
/// address the banner names and the rest of its stdout.
fn spawn_serve(dir: &Path) -> (Child, String, Lines<BufReader<ChildStdout>>) {
    let mut child = airlock()
        .arg("serve")
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = listening_addr(&lines.next().unwrap().unwrap());
    (child, addr, lines)
}

#[test]
fn serve_starts_prints_endpoints_and_stops_on_sigterm() {
    let dir = deployment();
    let (mut child, addr, _lines) = spawn_serve(dir.path());
    let health = std::process::Command::new("curl")
        .args(["-sS", &format!("http://{addr}/healthz")])
        .output();
    if let Ok(out) = health {
        assert_eq!(String::from_utf8_lossy(&out.stdout), "ok");
    }
    assert!(
        dir.path().join("airlock.sqlite").exists(),
        "the SQLite ledger is created on first start"
    );
    sigterm(child.id());
    let status = child.wait().unwrap();
    assert!(status.success(), "graceful shutdown exits 0: {status}");
}

/// POLICY-13: `serve` starts on a deployment whose api tool carries `confirm:`, and logs the
/// warning naming its file, line and key.
#[test]
fn serve_logs_a_confirm_warning_and_starts() {
    let dir = deployment();
    let toml = std::fs::read_to_string(dir.path().join("airlock.toml")).unwrap();
    let toml = format!("{toml}[connections.erp_main]\nbase_url = \"https://erp.example.com\"\n");
    std::fs::write(dir.path().join("airlock.toml"), toml).unwrap();
    std::fs::create_dir(dir.path().join("agents")).unwrap();
    let manifest = "apiVersion: airlock/v1\nkind: Agent\nmetadata:\n  name: erp\nspec:\n  model: { provider: openai, model: gpt-4o-mini }\n  prompts: { system: test }\n  tools:\n    - name: erp-cliente\n      type: api\n      connection: erp_main\n      auth: { scheme: none }\n      confirm: true\n      operations:\n        - name: buscar\n          description: Find.\n          writes: false\n          request: { method: GET, path: /clientes }\n";
    std::fs::write(dir.path().join("agents/erp.yml"), manifest).unwrap();
    let (child, _, _lines) = spawn_serve(dir.path());
    sigterm(child.id());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("agents/erp.yml:13:7: spec.tools[0].confirm: `confirm` is not read"),
        "{stderr}"
    );
}

#[test]
fn serve_fails_loudly_on_a_bad_deployment() {
    let dir = deployment();
    std::fs::write(dir.path().join("airlock.toml"), "listen = 5\n").unwrap();
    let out = airlock().arg("serve").arg(dir.path()).output().unwrap();
    assert!(!out.status.success());
    assert!(
        crate::text(&out).contains("airlock.toml:1:1: listen: expected a string"),
        "{}",
        crate::text(&out)
    );
}

/// SIGTERM while a call is in flight: the server stops accepting, the call finishes and its
/// client gets the result, and the process exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_lets_an_in_flight_call_finish() {
    let token = "mcp-5994471abb01112afcc18159f6cc74b4";
    let toml = "listen = \"127.0.0.1:0\"\n[[mcp.tokens]]\ncredential = \"airlock.mcp\"\nprincipal = \"claude\"\n[egress]\nallow = [\"127.0.0.1/32\"]\nallow_fetch = true\n[credentials]\nfile = \"creds.yml\"\n[builtins.fetch]\n";
    let dir = deployment_with(toml, &format!("airlock:\n  mcp: {token}\n"));

    // An upstream that answers only when the test says so.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let page = format!("http://{}/", listener.local_addr().unwrap());
    let (arrived_tx, arrived_rx) = tokio::sync::oneshot::channel::<()>();
    let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 2048];
        let _ = socket.read(&mut buf).await;
        arrived_tx.send(()).unwrap();
        go_rx.await.unwrap();
        socket.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 4\r\nconnection: close\r\n\r\nlate").await.unwrap();
    });

    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_airlock"))
        .arg("serve")
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = listening_addr(&lines.next_line().await.unwrap().unwrap());
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "fetch", "arguments": {"url": page}}});
    let call = tokio::spawn(async move {
        reqwest::Client::new()
            .post(format!("http://{addr}/mcp"))
            .header("authorization", format!("Bearer {token}"))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    });
    arrived_rx.await.unwrap();
    sigterm(child.id().unwrap());
    go_tx.send(()).unwrap();
    let reply: Value = serde_json::from_str(&call.await.unwrap()).unwrap();
    assert_eq!(
        reply["result"]["structuredContent"]["body"], "late",
        "{reply}"
    );
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn an_empty_token_credential_refuses_to_boot() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("airlock.toml"), "[[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"alice\"\n[credentials]\nfile = \"creds.yml\"\n").unwrap();
    std::fs::write(dir.path().join("creds.yml"), "airlock:\n  admin: \"\"\n").unwrap();
    let err = airlock::boot::boot(dir.path()).await.err().unwrap();
    assert!(
        format!("{err:#}")
            .contains("credential `airlock.admin` (token of principal alice) is empty"),
        "{err:#}"
    );
}

/// A page that answers an error status is a failed `fetch`, not a result (docs/rules.md CALL-5:
/// every failure after the record is a structured tool error, CALL-4).
#[tokio::test]
async fn fetch_of_a_page_answering_500_fails() {
    const ERROR: &[u8] = b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\ncontent-length: 4\r\nconnection: close\r\n\r\noops";
    let toml = "[egress]\nallow = [\"127.0.0.1/32\"]\nallow_fetch = true\n[credentials]\nfile = \"creds.yml\"\n[builtins.fetch]\n";
    let dir = deployment_with(toml, "airlock: {}\n");
    let gateway = airlock::boot::boot(dir.path()).await.unwrap().gateway;
    let page = crate::support::upstream_answering(ERROR).await;
    let ctx = call_context(&gateway, ScopeId::Gateway, Some("bob"), "1").await;
    let outcome = gateway
        .call(&ctx, "fetch", json!({"url": format!("http://{page}/")}))
        .await
        .unwrap();
    let row = outcome.invocation();
    assert_eq!(row.state, InvocationState::Failed, "{row:?}");
    let error = row.error.clone().unwrap();
    assert_eq!(error.kind, airlock_ledger::ToolErrorKind::UpstreamError);
    assert_eq!(error.message, "the server answered 500");
}

/// `/metrics` serves Prometheus text to an admin token (deny by default), counting calls by
/// tool and outcome.
#[tokio::test]
async fn metrics_count_calls_for_an_admin() {
    let dir = deployment();
    let (addr, gateway) = serve_in_process(dir.path()).await;
    let ctx = call_context(&gateway, ScopeId::Gateway, Some("bob"), "m1").await;
    let outcome = gateway
        .call(&ctx, "ask_human", json!({"question": "Which warehouse?"}))
        .await
        .unwrap();
    assert_eq!(outcome.kind(), OutcomeKind::Parked, "{outcome:?}");

    let (status, _, head) = http(addr, "GET", "/metrics", None, None).await;
    assert_eq!(status, 401);
    assert!(head.contains("www-authenticate: bearer"), "{head}");
    let response = reqwest::Client::new()
        .get(format!("http://{addr}/metrics"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let text = response.text().await.unwrap();
    let line = text
        .lines()
        .find(|l| {
            l.starts_with("airlock_tool_calls_total{")
                && l.contains("tool=\"ask_human\"")
                && l.contains("outcome=\"parked\"")
        })
        .unwrap_or_else(|| panic!("no ask_human line in:\n{text}"));
    let count: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(count >= 1.0, "{line}");

    // An approved call run later (here by the worker's path) counts as an execution.
    let page = hello_upstream().await;
    let ctx = call_context(&gateway, ScopeId::Gateway, Some("bob"), "m2").await;
    let parked = gateway
        .call(&ctx, "fetch", json!({"url": format!("http://{page}/")}))
        .await
        .unwrap();
    let id = parked.invocation().id;
    gateway
        .store()
        .decide(id, "alice", airlock_ledger::Decision::Approve)
        .await
        .unwrap();
    gateway.continue_approved(id).await.unwrap();
    let text = metrics(&format!("http://{addr}"), ADMIN).await;
    assert!(
        text.lines()
            .any(|l| l.starts_with("airlock_tool_runs_total{")
                && l.contains("tool=\"fetch\"")
                && l.contains("outcome=\"succeeded\"")),
        "{text}"
    );
}

/// OPS-66: `--workers` (or `AIRLOCK_WORKERS`) sets how many threads run requests; they are
/// named `airlock-worker`, apart from the blocking pool.
#[cfg(target_os = "linux")]
#[test]
fn serve_runs_the_workers_it_is_told_to() {
    let dir = deployment();
    let named = |server: &Server| {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", server.child.id())).unwrap();
        tasks
            .filter_map(|task| std::fs::read_to_string(task.unwrap().path().join("comm")).ok())
            .filter(|name| name.trim() == "airlock-worker")
            .count()
    };
    let runs_on = |server: &Server, n: usize| {
        let wanted = format!("requests run on {n} worker threads");
        server.await_log(&[&wanted], Duration::from_secs(10));
        assert!(named(server) >= n, "{} named workers", named(server));
    };
    runs_on(&Server::start(dir.path(), &["--workers", "3"]), 3);
    let mut command = Server::command(dir.path(), &[]);
    command
        .env("AIRLOCK_WORKERS", "2")
        .env("NO_COLOR", "1")
        .env("AIRLOCK_LOG", "info");
    runs_on(&Server::spawn(command), 2);
    let refused = airlock()
        .arg("serve")
        .arg(dir.path())
        .args(["--workers", "0"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--workers"));
}
