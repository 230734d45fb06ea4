//! Bench binary: the inbox's acceptance figures (issue #18). Run with
//! `cargo bench -p airlock --bench inbox`.
//!
//! Over [`ROUNDS`] gated calls (`gated__echo`, a connection file with `approval: always` on the
//! `airlock-testkit` echo upstream on 127.0.0.1), on the ledger as `serve` runs it (SQLite, WAL,
//! `synchronous = FULL`), it prints p50 and p99 of:
//!
//! - **parked → in the list**: from the MCP client holding the "awaiting approval" reply to a
//!   signed-in `GET /inbox` that lists the call having returned. The list is read when it is
//!   asked for, so the first GET after a park shows it (the bench asserts that it does). A
//!   browser sees it at its next reload: a live list reloads every second.
//! - **inbox approval → awaiting client woken**: a client long-polls `airlock_await_decision`;
//!   the bench posts the card's Approve form (session cookie and CSRF token, as a browser does);
//!   from sending the form to the client holding the call's result (the await runs the approved
//!   call itself). The same with the approval sent over the JSON API
//!   (`POST /v1/invocations/{id}/approve`) alternates with it, for comparison on the same
//!   machine at the same moment.
//!
//! Everything (clients, airlock, upstream) shares one tokio runtime in this process.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "common/inbox_person.rs"]
mod inbox_person;
#[path = "common/percentiles.rs"]
mod percentiles;

use std::path::Path;
use std::time::{Duration, Instant};

use airlock::boot::boot;
use airlock::http::{AppState, app, serve};
use airlock_testkit::{Script, Server};
use inbox_person::{Person, field};
use percentiles::percentiles;
use serde_json::{Value, json};
use tokio::net::TcpListener;

const ROUNDS: usize = 200;
const WARMUP: usize = 20;
const MCP_TOKEN: &str = "mcp-bench-5d41402abc4b2a76b9719d911017c592";
const ADMIN_TOKEN: &str = "admin-bench-7d793037a0760186574b0282f2f435e7";

/// A deployment with MCP and admin tokens, loopback egress, and `gated` on `upstream`.
fn deployment(upstream: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let toml = "[[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"alice\"\n\
                [[mcp.tokens]]\ncredential = \"airlock.bench\"\nprincipal = \"bench\"\n\
                [egress]\nallow = [\"127.0.0.1/32\"]\n[credentials]\nfile = \"creds.yml\"\n";
    let creds = format!("airlock:\n  admin: {ADMIN_TOKEN}\n  bench: {MCP_TOKEN}\n");
    std::fs::write(dir.path().join("airlock.toml"), toml).unwrap();
    std::fs::write(dir.path().join("creds.yml"), creds).unwrap();
    let connections = dir.path().join("connections");
    std::fs::create_dir(&connections).unwrap();
    let file = format!("url: {upstream}\napproval: always\neffect: idempotent\n");
    std::fs::write(connections.join("gated.yml"), file).unwrap();
    dir
}

async fn serve_airlock(dir: &Path) -> String {
    let booted = boot(dir).await.unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = AppState {
        gateway: booted.gateway,
        agents: booted.agents,
        admin: booted.admin,
        mcp: booted.mcp,
        limits: booted.deployment.config.server,
        slack: booted.slack,
        max_grant: booted.deployment.config.max_grant,
    };
    let limits = state.limits;
    let never = tokio_util::sync::CancellationToken::new();
    tokio::spawn(serve(listener, app(state), limits, never));
    format!("http://{addr}")
}

/// `tools/call` through `POST /mcp`; the structured content.
async fn mcp(http: &reqwest::Client, base: &str, tool: &str, arguments: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": tool, "arguments": arguments}});
    let reply: Value = http
        .post(format!("{base}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-11-25")
        .header("authorization", format!("Bearer {MCP_TOKEN}"))
        .body(body.to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    reply["result"]["structuredContent"].clone()
}

/// The inbox's own decisions, beside the shared sign-in and reads.
impl Person {
    /// Approves `id` over the JSON API, as `curl` would (the same decision, for comparison).
    async fn approve_over_api(&self, base: &str, id: &str) {
        let answer = self
            .http
            .post(format!("{base}/v1/invocations/{id}/approve"))
            .header("authorization", format!("Bearer {ADMIN_TOKEN}"))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status().as_u16(), 200);
    }

    /// Approves `id` from its card's form, with the page's CSRF token `csrf`.
    async fn approve(&self, base: &str, id: &str, csrf: &str) {
        let answer = self
            .http
            .post(format!("{base}/inbox/invocations/{id}/approve"))
            .header("cookie", &self.cookie)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("csrf={csrf}"))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status().as_u16(), 303);
    }
}

/// Where a round's approval is taken.
#[derive(Clone, Copy, PartialEq)]
enum Via {
    Inbox,
    Api,
}

/// One round: park, see it listed, approve it (from the inbox, or over the API for comparison)
/// while a client awaits it. Returns (parked → listed, approval sent → client woken).
async fn round(
    base: &str,
    person: &Person,
    csrf: &str,
    caller: &reqwest::Client,
    i: usize,
    via: Via,
) -> (Duration, Duration) {
    let parked = mcp(caller, base, "gated__echo", json!({"i": i})).await;
    assert_eq!(parked["status"], "awaiting_approval", "{parked}");
    let id = parked["invocation_id"].as_str().unwrap().to_owned();
    let parked_at = Instant::now();
    let list = person.get(base, "/inbox?live=off").await;
    assert!(
        list.contains(&id),
        "a parked call is not in the list read after its park"
    );
    let listed = parked_at.elapsed();

    let waiter = reqwest::Client::new();
    let (b, arguments) = (
        base.to_owned(),
        json!({"invocation_id": id, "wait_seconds": 20}),
    );
    let task = tokio::spawn(async move {
        let result = mcp(&waiter, &b, "airlock_await_decision", arguments).await;
        (result, Instant::now())
    });
    // Let the await reach its long poll (one that arrives late returns at once, which this
    // measure would count the same way).
    tokio::time::sleep(Duration::from_millis(5)).await;
    let sent = Instant::now();
    match via {
        Via::Inbox => person.approve(base, &id, csrf).await,
        Via::Api => person.approve_over_api(base, &id).await,
    }
    let (result, woke) = task.await.unwrap();
    assert!(
        result["status"] == "completed" && result["result"]["received"]["i"] == i,
        "{result}"
    );
    (listed, woke.saturating_duration_since(sent))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let upstream = Server::start(Script {
            unrecorded: true,
            ..Script::default()
        })
        .await;
        upstream.set_tools(vec![json!({
            "name": "echo",
            "description": "Echoes the arguments.",
            "inputSchema": {"type": "object", "properties": {"i": {"type": "integer"}}}
        })]);
        let dir = deployment(&upstream.loopback_url());
        let base = serve_airlock(dir.path()).await;
        let person = Person::sign_in(&base, ADMIN_TOKEN).await;
        let csrf = field(&person.get(&base, "/inbox").await, "csrf");
        let caller = reqwest::Client::new();
        let (mut listed, mut woken, mut by_api) = (Vec::new(), Vec::new(), Vec::new());
        // Inbox and API approvals alternate, so both see the same machine.
        for i in 0..2 * (WARMUP + ROUNDS) {
            let via = if i % 2 == 0 { Via::Inbox } else { Via::Api };
            let (l, w) = round(&base, &person, &csrf, &caller, i, via).await;
            if i >= 2 * WARMUP {
                listed.push(l);
                if via == Via::Inbox {
                    woken.push(w);
                } else {
                    by_api.push(w);
                }
            }
        }
        let (l50, l99) = percentiles(listed);
        let (w50, w99) = percentiles(woken);
        let (a50, a99) = percentiles(by_api);
        println!(
            "{ROUNDS} rounds, {} cores",
            std::thread::available_parallelism().map_or(0, usize::from)
        );
        println!(
            "parked -> in the inbox list: p50 {:.2} ms, p99 {:.2} ms (< 1 s: {})",
            ms(l50),
            ms(l99),
            l99 < Duration::from_secs(1)
        );
        println!(
            "inbox approval -> awaiting client woken: p50 {:.2} ms, p99 {:.2} ms (< 50 ms: {})",
            ms(w50),
            ms(w99),
            w99 < Duration::from_millis(50)
        );
        println!(
            "the same over the JSON API, for comparison: p50 {:.2} ms, p99 {:.2} ms",
            ms(a50),
            ms(a99)
        );
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        println!("load average at end {}", load.trim());
    });
}
