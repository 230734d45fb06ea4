//! Decisions from the command line against the deployment's database, and the `serve`
//! worker that runs an approval made there although no client waits for it.

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use airlock::boot::boot;
use airlock_ledger::InvocationState;
use airlock_runtime::{CallContext, Gateway};
use airlock_spec::ScopeId;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

use crate::serve::deployment;
use crate::{airlock, text};

/// A running `airlock serve`, its stderr lines on a channel; killed when dropped.
pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) addr: String,
    stderr: mpsc::Receiver<String>,
}

impl Server {
    /// Starts `airlock serve DIR --listen 127.0.0.1:0 EXTRA…` and waits for its banner.
    pub(crate) fn start(dir: &Path, extra: &[&str]) -> Self {
        let mut child = airlock()
            .arg("serve")
            .arg(dir)
            .args(["--listen", "127.0.0.1:0"])
            .args(extra)
            .env("NO_COLOR", "1")
            .env("AIRLOCK_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, stderr) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().unwrap().unwrap();
        let addr = first
            .strip_prefix("airlock listening on http://")
            .unwrap_or_else(|| panic!("{first}"))
            .to_owned();
        std::thread::spawn(move || lines.for_each(drop));
        Self {
            child,
            addr,
            stderr,
        }
    }

    /// Waits (bounded) for a log line containing every one of `needles`.
    pub(crate) fn await_log(&self, needles: &[&str], within: Duration) -> String {
        let deadline = std::time::Instant::now() + within;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(line) if needles.iter().all(|n| line.contains(n)) => return line,
                Ok(line) => seen.push(line),
                Err(_) => panic!("no log line with {needles:?} within {within:?}; saw {seen:#?}"),
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `airlock ARGS… --dir DIR` (decisions as `alice`).
pub(crate) fn cli(dir: &Path, args: &[&str]) -> Output {
    airlock()
        .args(args)
        .arg("--dir")
        .arg(dir)
        .env("USER", "alice")
        .output()
        .unwrap()
}

/// Parks `tool` in the gateway scope, as a client of the same database would.
async fn park(gateway: &Gateway, tool: &str, arguments: Value) -> airlock_ledger::Invocation {
    let session = gateway
        .open_session("test", Some("bob".into()), &ScopeId::Gateway)
        .await
        .unwrap();
    let ctx = CallContext {
        scope: ScopeId::Gateway,
        session,
        call_id: "1".into(),
        principal: Some("bob".into()),
    };
    let row = gateway
        .call(&ctx, tool, arguments)
        .await
        .unwrap()
        .invocation()
        .clone();
    assert!(row.state.is_parked(), "{row:?}");
    row
}

#[tokio::test]
async fn the_cli_lists_decides_and_shows() {
    let dir = deployment();
    let d = dir.path();
    let gateway = boot(d).await.unwrap().gateway;
    let fetch = park(&gateway, "fetch", json!({"url": "http://127.0.0.1:9/"})).await;
    let question = park(
        &gateway,
        "ask_human",
        json!({"question": "Which warehouse?"}),
    )
    .await;
    let (fetch_id, question_id) = (fetch.id.to_string(), question.id.to_string());

    let out = cli(d, &["approvals", "list"]);
    assert!(out.status.success(), "{}", text(&out));
    let listing = String::from_utf8(out.stdout).unwrap();
    assert!(
        listing.contains(&fetch_id) && listing.contains(&question_id),
        "{listing}"
    );
    assert!(
        listing.contains("awaiting_approval") && listing.contains("bob"),
        "{listing}"
    );
    let out = cli(
        d,
        &[
            "approvals",
            "list",
            "--tool",
            "ask_human",
            "--principal",
            "bob",
        ],
    );
    let listing = String::from_utf8(out.stdout).unwrap();
    assert!(
        !listing.contains(&fetch_id) && listing.contains(&question_id),
        "{listing}"
    );

    let out = cli(
        d,
        &["answer", &question_id, "--text", "Rosario", "--as", "dora"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("by dora"),
        "{}",
        text(&out)
    );
    let out = cli(d, &["deny", &fetch_id, "--reason", "not today"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(&format!("denied {fetch_id}")));

    // A second decision is refused naming the first decider (the OS user here).
    let out = cli(d, &["approve", &fetch_id]);
    assert!(!out.status.success());
    assert!(text(&out).contains("alice"), "{}", text(&out));
    let out = cli(
        d,
        &["resolve", &fetch_id, "--outcome", "ran", "--note", "n"],
    );
    assert!(!out.status.success(), "{}", text(&out));

    let out = cli(d, &["invocations", "show", &question_id]);
    assert!(out.status.success(), "{}", text(&out));
    let shown = String::from_utf8(out.stdout).unwrap();
    assert!(shown.contains("state       succeeded"), "{shown}");
    assert!(shown.contains("answered by dora"), "{shown}");
    assert!(shown.contains("Rosario"), "{shown}");
    assert!(
        String::from_utf8(cli(d, &["approvals", "list"]).stdout)
            .unwrap()
            .contains("nothing waits")
    );

    // Without --as and without an OS user, nobody can decide.
    let out = airlock()
        .args(["approve", &fetch_id, "--dir"])
        .arg(d)
        .env_remove("USER")
        .env_remove("LOGNAME")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(text(&out).contains("--as NAME"), "{}", text(&out));
}

/// An upstream that answers once, and says when it was asked.
async fn page() -> (std::net::SocketAddr, tokio::sync::oneshot::Receiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 2048];
        let _ = socket.read(&mut buf).await;
        let _ = tx.send(());
        let _ = socket.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello").await;
    });
    (addr, rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_from_the_cli_runs_in_serve_without_a_waiter() {
    let dir = deployment();
    let d = dir.path();
    let server = Server::start(d, &[]);
    let (upstream, asked) = page().await;
    let gateway = boot(d).await.unwrap().gateway;
    let row = park(
        &gateway,
        "fetch",
        json!({"url": format!("http://{upstream}/")}),
    )
    .await;
    drop(gateway);
    let id = row.id.to_string();

    let out = cli(d, &["approve", &id]);
    assert!(out.status.success(), "{}", text(&out));
    // Nobody awaits the call: serve's worker picks it up.
    tokio::time::timeout(Duration::from_secs(20), asked)
        .await
        .unwrap()
        .unwrap();
    server.await_log(
        &["worker ran an approved call", &id, "succeeded"],
        Duration::from_secs(20),
    );
    let out = cli(d, &["invocations", "show", &id]);
    let shown = String::from_utf8(out.stdout).unwrap();
    assert!(shown.contains("state       succeeded"), "{shown}");
    assert!(shown.contains("hello"), "{shown}");
    let store = airlock::boot::open_store(
        &format!("sqlite://{}", d.join("airlock.sqlite").display()),
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    assert_eq!(
        store.get(row.id).await.unwrap().state,
        InvocationState::Succeeded
    );
}
