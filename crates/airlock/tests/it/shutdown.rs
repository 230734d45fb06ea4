//! `airlock serve`'s shutdown (docs/rules.md OPS-9), driven as an operator would: signals to a
//! real child process. The bounds below are far under the waits they cut short (a 25 s await,
//! a 120 s grace period), so they tell "answered at once" from "waited it out".

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdout, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

use crate::airlock;
use crate::support::{deployment_with, listening_addr, mcp_request, metrics, sigterm};

const TOKEN: &str = "mcp-1b7c0e5d2f3a48c6a9e1d2c3b4a5f607";
const ADMIN: &str = "admin-2f9c41d7e08b4a6c95d3e1f0a7b8c6d5";

/// A deployment with an MCP token, an admin token (for `/metrics`), `ask_human` (parks) and
/// `fetch` (runs at once).
fn deployment() -> tempfile::TempDir {
    let toml = "listen = \"127.0.0.1:0\"\n[[mcp.tokens]]\ncredential = \"airlock.mcp\"\nprincipal = \"claude\"\n[[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"ops\"\n[egress]\nallow = [\"127.0.0.1/32\"]\nallow_fetch = true\n[credentials]\nfile = \"creds.yml\"\n[builtins.ask_human]\n[builtins.fetch]\n";
    deployment_with(
        toml,
        &format!("airlock:\n  mcp: {TOKEN}\n  admin: {ADMIN}\n"),
    )
}

/// Waits (bounded) until the server holds `n` admitted requests (OPS-60's gauge).
async fn in_flight_reaches(base: &str, n: u32) {
    let want = format!("airlock_requests_in_flight {n}");
    for _ in 0..400 {
        if metrics(base, ADMIN).await.lines().any(|l| l == want) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!(
        "the server never held {n} requests:\n{}",
        metrics(base, ADMIN).await
    );
}

/// `airlock serve --dir DIR EXTRA…` on a free port; its address and the rest of its stdout.
fn start(dir: &Path, extra: &[&str]) -> (Child, String, std::io::Lines<BufReader<ChildStdout>>) {
    let mut child = airlock()
        .args(["serve", "--listen", "127.0.0.1:0", "--dir"])
        .arg(dir)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = listening_addr(&lines.next().unwrap().unwrap());
    (child, addr, lines)
}

/// Waits (bounded) for the child to exit; panics naming `what` if it does not.
async fn exits_within(child: &mut Child, bound: Duration, what: &str) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + bound;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: still running after {bound:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn tools_call(base: &str, name: &str, arguments: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}});
    let text = mcp_request(base)
        .bearer_auth(TOKEN)
        .body(body.to_string())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    serde_json::from_str(&text).unwrap_or_else(|_| panic!("{text}"))
}

/// The first signal answers a client waiting in `airlock_await_decision` at once with the usual
/// "still waiting" result (the row stays parked), and the process exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_answers_a_waiting_await_at_once_and_keeps_the_row_parked() {
    let dir = deployment();
    let (mut child, addr, _lines) = start(dir.path(), &[]);
    let base = format!("http://{addr}");
    let parked = tools_call(&base, "ask_human", json!({"question": "Which warehouse?"})).await;
    let id = parked["result"]["structuredContent"]["invocation_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{parked}"))
        .to_owned();
    let waiting = {
        let (base, id) = (base.clone(), id.clone());
        tokio::spawn(async move {
            tools_call(
                &base,
                "airlock_await_decision",
                json!({"invocation_id": id, "wait_seconds": 25}),
            )
            .await
        })
    };
    // The await must be inside the server (not in the accept queue) when the signal comes.
    in_flight_reaches(&base, 1).await;
    sigterm(child.id());
    let answer = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the await is answered at once, not after its 25 s")
        .unwrap();
    let status = &answer["result"]["structuredContent"];
    assert_eq!(status["status"], "awaiting_answer", "{answer}");
    assert_eq!(status["invocation_id"], id.as_str(), "{answer}");
    let exit = exits_within(&mut child, Duration::from_secs(15), "after SIGTERM").await;
    assert!(exit.success(), "{exit}");

    let shown = crate::support::cli(dir.path(), &["invocations", "show", &id, "--json"]);
    let row: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(row["state"], "awaiting_answer", "nothing is lost: {row}");
}

/// An upstream that accepts one request and never answers; says when it was asked.
async fn silent_upstream() -> (String, tokio::sync::oneshot::Receiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let (asked, asked_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 2048];
        let _ = socket.read(&mut buf).await;
        let _ = asked.send(());
        // Holds the connection open without a word until the test ends.
        std::future::pending::<()>().await;
    });
    (url, asked_rx)
}

/// A running call keeps the grace period busy; a second signal exits at once (status 1),
/// and a grace period that runs out exits too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_or_the_end_of_the_grace_period_exits_at_once() {
    for second_signal in [true, false] {
        let dir = deployment();
        let grace = if second_signal { "120" } else { "1" };
        let (mut child, addr, mut lines) = start(dir.path(), &["--grace", grace]);
        let base = format!("http://{addr}");
        let (page, asked) = silent_upstream().await;
        let running =
            tokio::spawn(async move { tools_call(&base, "fetch", json!({"url": page})).await });
        tokio::time::timeout(Duration::from_secs(20), asked)
            .await
            .unwrap()
            .unwrap();
        sigterm(child.id());
        // The first signal is taken (standard signals sent twice before that count once).
        let said = tokio::task::spawn_blocking(move || {
            lines.find(|l| l.as_ref().is_ok_and(|l| l.starts_with("shutting down")))
        })
        .await
        .unwrap();
        assert!(said.is_some(), "no shutdown line");
        if second_signal {
            sigterm(child.id());
        }
        let exit = exits_within(&mut child, Duration::from_secs(20), grace).await;
        assert_eq!(exit.code(), Some(1), "cut off (grace {grace}): {exit}");
        running.abort();
    }
}

/// A deployment whose `fetch` waits for an approval, and whose notifications go to `hook`.
fn gated_deployment(hook: &str) -> tempfile::TempDir {
    let toml = format!(
        "listen = \"127.0.0.1:0\"\n[[mcp.tokens]]\ncredential = \"airlock.mcp\"\nprincipal = \"claude\"\n[[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"ops\"\n[egress]\nallow = [\"127.0.0.1/32\"]\nallow_fetch = true\n[credentials]\nfile = \"creds.yml\"\n[builtins.fetch]\napproval = \"always\"\n[[notify.webhooks]]\nurl = \"{hook}\"\nsecret = \"hooks.secret\"\n"
    );
    let creds = format!(
        "airlock:\n  mcp: {TOKEN}\n  admin: {ADMIN}\nhooks:\n  secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n"
    );
    deployment_with(&toml, &creds)
}

/// An upstream that answers its one request only once told; says when it was asked.
async fn upstream_answering_when_told() -> (
    String,
    tokio::sync::oneshot::Receiver<()>,
    tokio::sync::oneshot::Sender<()>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let (asked, asked_rx) = tokio::sync::oneshot::channel();
    let (answer, told) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 2048];
        let _ = socket.read(&mut buf).await;
        let _ = asked.send(());
        if told.await.is_ok() {
            let reply = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 4\r\nconnection: close\r\n\r\nlate";
            let _ = socket.write_all(reply).await;
        }
    });
    (url, asked_rx, answer)
}

/// Every task `serve` started beside its server has ended before it exits 0 (OPS-9). An
/// approved call runs in a background task no request waits for; the signal comes while it
/// runs, its upstream answers only after that, and the call is recorded as finished — so the
/// process waited for it (whether the approval's own task or the worker ran it). Meanwhile the
/// delivery of notifications is mid-send to a receiver that never answers: it stops at once,
/// so the exit comes far inside a 120 s grace period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_task_serve_started_has_ended_when_it_exits() {
    let (hook, hooked) = silent_upstream().await;
    let dir = gated_deployment(&hook);
    let (mut child, addr, mut lines) = start(dir.path(), &["--grace", "120"]);
    let base = format!("http://{addr}");
    let (page, asked, answer) = upstream_answering_when_told().await;
    let parked = tools_call(&base, "fetch", json!({"url": page})).await;
    let id = parked["result"]["structuredContent"]["invocation_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{parked}"))
        .to_owned();
    // The park's notice is on its way to the receiver that never answers.
    tokio::time::timeout(Duration::from_secs(20), hooked)
        .await
        .expect("the park was never notified")
        .unwrap();
    let approved = reqwest::Client::new()
        .post(format!("{base}/v1/invocations/{id}/approve"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status(), 200, "{}", approved.text().await.unwrap());
    tokio::time::timeout(Duration::from_secs(20), asked)
        .await
        .expect("the approved call never reached its upstream")
        .unwrap();
    sigterm(child.id());
    let said = tokio::task::spawn_blocking(move || {
        lines.find(|l| l.as_ref().is_ok_and(|l| l.starts_with("shutting down")))
    })
    .await
    .unwrap();
    assert!(said.is_some(), "no shutdown line");
    answer.send(()).unwrap();
    let exit = exits_within(&mut child, Duration::from_secs(15), "after SIGTERM").await;
    assert!(exit.success(), "{exit}");

    let shown = crate::support::cli(dir.path(), &["invocations", "show", &id, "--json"]);
    let row: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(row["state"], "succeeded", "the call ran to its end: {row}");
}
