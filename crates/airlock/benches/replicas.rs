//! Bench binary: a decision on one replica → the waiter on another woken (issue #20, docs/rules.md
//! DECIDE-15). Run with `AIRLOCK_TEST_DATABASE_URL=… cargo bench -p airlock --bench replicas`.
//!
//! Two `airlock serve` processes (A and B) on a fresh database of the PostgreSQL server the tests
//! use. Each round an MCP client parks `gated__echo` (a connection file with `approval: always`
//! on the `airlock-testkit` echo upstream) through A and long-polls `airlock_await_decision` on
//! A; the bench approves through B's API (`POST /v1/invocations/{id}/approve`) and measures from
//! sending the approval to the client holding the call's result. The wake-up crosses processes
//! through PostgreSQL `NOTIFY`; the await claims and runs the approved call itself, so the
//! figure includes the upstream call and its commits, as the inbox bench's does. It prints p50
//! and p99 over [`ROUNDS`] rounds after [`WARMUP`].

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    missing_docs
)]

/// The crash harness's replicas; this bench starts and kills them only.
#[allow(dead_code)]
#[path = "crash/fleet.rs"]
mod fleet;

use std::time::{Duration, Instant};

use airlock_testkit::Script;
use serde_json::{Value, json};

const ROUNDS: usize = 200;
const WARMUP: usize = 20;
const ADMIN: &str = "admin-replicas-c4ca4238a0b923820dcc509a6f75849b";
const CLIENT: &str = "mcp-replicas-c81e728d9d4c2f636f067f89cc14862c";

/// A fresh database on the server at `url`.
async fn fresh_database(url: &str) -> String {
    let name = format!("bench_replicas_{}", std::process::id());
    let admin = sqlx::PgPool::connect(url).await.unwrap();
    let drop = format!("DROP DATABASE IF EXISTS {name}");
    sqlx::query(sqlx::AssertSqlSafe(drop))
        .execute(&admin)
        .await
        .unwrap();
    let create = format!("CREATE DATABASE {name}");
    sqlx::query(sqlx::AssertSqlSafe(create))
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
    let mut fresh = url::Url::parse(url).unwrap();
    fresh.set_path(&name);
    fresh.to_string()
}

fn deployment(dir: &std::path::Path, database: &str, upstream: &str) {
    let toml = format!(
        "database_url = \"{database}\"\n\
         [[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"alice\"\n\
         [[mcp.tokens]]\ncredential = \"airlock.bench\"\nprincipal = \"bench\"\n\
         [egress]\nallow = [\"127.0.0.1/32\"]\n[credentials]\nfile = \"creds.yml\"\n"
    );
    std::fs::write(dir.join("airlock.toml"), toml).unwrap();
    let creds = format!("airlock:\n  admin: {ADMIN}\n  bench: {CLIENT}\n");
    std::fs::write(dir.join("creds.yml"), creds).unwrap();
    std::fs::create_dir(dir.join("connections")).unwrap();
    let file = format!("url: {upstream}\napproval: always\n");
    std::fs::write(dir.join("connections/gated.yml"), file).unwrap();
}

async fn mcp(http: &reqwest::Client, addr: &str, tool: &str, arguments: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}});
    let reply: Value = http
        .post(format!("http://{addr}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-11-25")
        .bearer_auth(CLIENT)
        .body(body.to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    reply["result"]["structuredContent"].clone()
}

/// One round: park through `a`, await on `a`, approve through `b`; the approval → result time.
async fn round(http: &reqwest::Client, a: &str, b: &str, n: usize) -> Duration {
    let parked = mcp(http, a, "gated__echo", json!({"n": n})).await;
    let id = parked["invocation_id"].as_str().unwrap().to_owned();
    let waiter = tokio::spawn({
        let (http, a, id) = (http.clone(), a.to_owned(), id.clone());
        async move {
            let args = json!({"invocation_id": id, "wait_seconds": 25});
            let settled = mcp(&http, &a, "airlock_await_decision", args).await;
            (settled, Instant::now())
        }
    });
    // Let the waiter's request reach A and register before the decision.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let sent = Instant::now();
    let approved = http
        .post(format!("http://{b}/v1/invocations/{id}/approve"))
        .bearer_auth(ADMIN)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status().as_u16(), 200);
    let (settled, woken) = waiter.await.unwrap();
    assert_eq!(settled["status"], "completed", "{settled}");
    woken - sent
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i].as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    let Ok(url) = std::env::var("AIRLOCK_TEST_DATABASE_URL") else {
        println!("replicas: skipped (AIRLOCK_TEST_DATABASE_URL is not set)");
        return;
    };
    let upstream = airlock_testkit::Server::start(Script {
        unrecorded: true,
        ..Script::default()
    })
    .await;
    upstream.set_tools(vec![
        json!({"name": "echo", "inputSchema": {"type": "object"}}),
    ]);
    let database = fresh_database(&url).await;
    let dir = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    deployment(dir.path(), &database, &upstream.loopback_url());
    let mut replicas = fleet::Fleet::start(dir.path(), logs.path(), 2, &[]).await;
    let addrs = replicas.addrs();
    let http = reqwest::Client::new();
    let mut samples = Vec::new();
    for n in 0..WARMUP + ROUNDS {
        let took = round(&http, &addrs[0], &addrs[1], n).await;
        if n >= WARMUP {
            samples.push(took);
        }
    }
    replicas.kill_all().await;
    samples.sort();
    println!(
        "decision on B -> await on A woken with the result, {ROUNDS} rounds: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        percentile(&samples, 0.50),
        percentile(&samples, 0.99),
        percentile(&samples, 1.0)
    );
}
