//! Bench binary: bounded resources of a real `airlock serve` (issue #20 item 0).
//! Run with `cargo bench -p airlock --bench memory`.
//!
//! It starts the `airlock` binary on a fresh deployment (durable SQLite ledger, a connection
//! file to the `airlock-testkit` upstream on 127.0.0.1, `approval: never`) and measures:
//!
//! 1. **idle connections**: the p50/p99 of 200 sequential authorized `tools/call`s, first alone,
//!    then while 2,000 TCP connections that never send a byte (no token) are held open — they
//!    must not delay the call (docs/rules.md OPS-12);
//! 2. **big calls**: three rounds of 64 concurrent `tools/call`s, each carrying ≈ 3.9 MB of
//!    arguments (the endpoint's body cap is 4 MiB) to the upstream's `count` tool (a short
//!    reply), with the serve process's resident memory sampled every 10 ms (its peak, and
//!    `VmHWM`), then read again 2 s after each round: memory must stay under the documented
//!    peak and come back.
//!
//! Memory is the serve process's own (`/proc/<pid>/status`), not this process's.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "common/serve_process.rs"]
mod serve_process;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use airlock_testkit::{Script, Server, free_port};
use serde_json::{Value, json};
use serve_process::{start_serve, status_mib};
use tokio::net::TcpStream;

const TOKEN: &str = "mcp-memory-bench-0c2f6a1d9e8b4b7a";
const IDLE_CONNECTIONS: usize = 2000;
const PROBE_CALLS: usize = 200;
const BIG_CALLS: usize = 64;
const ROUNDS: usize = 3;
/// The text argument of a big call: with the JSON-RPC envelope it stays under the 4 MiB cap.
const BIG_TEXT_BYTES: usize = 3_900_000;

fn deployment(dir: &Path, upstream: &str, port: u16) {
    std::fs::create_dir_all(dir.join("connections")).unwrap();
    std::fs::write(
        dir.join("connections/up.yml"),
        format!("url: {upstream}\napproval: never\n"),
    )
    .unwrap();
    std::fs::write(
        dir.join("credentials.yml"),
        format!("airlock:\n  mcp_token: {TOKEN}\n"),
    )
    .unwrap();
    std::fs::write(
        dir.join("airlock.toml"),
        format!(
            "listen = \"127.0.0.1:{port}\"\n\
             [mcp]\nallowed_hosts = [\"localhost\", \"127.0.0.1\"]\n\
             [[mcp.tokens]]\ncredential = \"airlock.mcp_token\"\nprincipal = \"bench\"\n\
             [egress]\nallow = [\"127.0.0.1/32\"]\nallow_fetch = true\n\
             [credentials]\nfile = \"credentials.yml\"\n"
        ),
    )
    .unwrap();
}

async fn call(http: &reqwest::Client, url: &str, arguments: Value) -> Duration {
    try_call(http, url, arguments).await.unwrap()
}

/// One `tools/call`; what went wrong, if the call did not complete.
async fn try_call(http: &reqwest::Client, url: &str, arguments: Value) -> Result<Duration, String> {
    let start = Instant::now();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "up__count", "arguments": arguments}});
    let response = http
        .post(url)
        .bearer_auth(TOKEN)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .json(&body)
        .send()
        .await
        .map_err(|e| format!("{e:?}"))?;
    let status = response.status();
    let reply: Value = response
        .json()
        .await
        .map_err(|e| format!("{status}: {e}"))?;
    if status.is_success() && reply["result"].is_object() && reply["result"]["isError"] != true {
        Ok(start.elapsed())
    } else {
        Err(format!("{status}: {reply}"))
    }
}

/// p50 and p99, in ms, of `PROBE_CALLS` sequential small calls over one connection.
async fn probe(url: &str) -> (f64, f64) {
    let http = reqwest::Client::new();
    let mut samples = Vec::with_capacity(PROBE_CALLS);
    for i in 0..PROBE_CALLS {
        samples.push(call(&http, url, json!({"text": format!("probe {i}")})).await);
    }
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    (at(0.5), at(0.99))
}

/// One round of big calls: the peak resident memory sampled while they ran, in MiB, the
/// round's wall time, and the first failure with how many calls failed.
async fn big_round(url: &str, pid: u32) -> (f64, Duration, Option<(usize, String)>) {
    let text = Arc::new("a".repeat(BIG_TEXT_BYTES));
    let done = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (done, peak) = (Arc::clone(&done), Arc::clone(&peak));
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                let kib = (status_mib(pid, "VmRSS:") * 1024.0) as u64;
                peak.fetch_max(kib, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    let start = Instant::now();
    let calls: Vec<_> = (0..BIG_CALLS)
        .map(|_| {
            let (url, text) = (url.to_owned(), Arc::clone(&text));
            tokio::spawn(async move {
                let http = reqwest::Client::new();
                try_call(&http, &url, json!({"text": text.as_str()})).await
            })
        })
        .collect();
    let mut failed: Option<(usize, String)> = None;
    for c in calls {
        if let Err(e) = c.await.unwrap() {
            let entry = failed.get_or_insert((0, e));
            entry.0 += 1;
        }
    }
    let took = start.elapsed();
    done.store(true, Ordering::Relaxed);
    sampler.await.unwrap();
    (peak.load(Ordering::Relaxed) as f64 / 1024.0, took, failed)
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
            "name": "count",
            "description": "Counts the bytes of its arguments.",
            "inputSchema": {"type": "object"}
        })]);
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        deployment(dir.path(), &upstream.loopback_url(), port);
        let serve = start_serve(dir.path(), port).await;
        let pid = serve.pid();
        let url = format!("http://127.0.0.1:{port}/mcp");
        probe(&url).await; // warm-up: discovery done, connections and caches warm
        println!(
            "serve RSS after warm-up: {:.1} MiB",
            status_mib(pid, "VmRSS:")
        );

        let (alone50, alone99) = probe(&url).await;
        let mut idle = Vec::with_capacity(IDLE_CONNECTIONS);
        for _ in 0..IDLE_CONNECTIONS {
            if let Ok(s) = TcpStream::connect(("127.0.0.1", port)).await {
                idle.push(s);
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (held50, held99) = probe(&url).await;
        println!(
            "authorized call, 200 sequential: alone p50 {alone50:.2} ms, p99 {alone99:.2} ms; \
             with {} idle connections without a token held open: p50 {held50:.2} ms, \
             p99 {held99:.2} ms",
            idle.len()
        );
        drop(idle);
        tokio::time::sleep(Duration::from_secs(1)).await;

        println!(
            "{BIG_CALLS} concurrent calls of {:.1} MB each, {ROUNDS} rounds:",
            BIG_TEXT_BYTES as f64 / 1e6
        );
        let before = status_mib(pid, "VmRSS:");
        println!("  RSS before: {before:.1} MiB");
        for round in 1..=ROUNDS {
            let (peak, took, failed) = big_round(&url, pid).await;
            if let Some((n, first)) = failed {
                println!("  round {round}: {n} of {BIG_CALLS} calls failed; the first: {first}");
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
            println!(
                "  round {round}: {:.2} s, peak RSS {peak:.1} MiB (sampled every 10 ms), \
                 RSS 2 s after {:.1} MiB",
                took.as_secs_f64(),
                status_mib(pid, "VmRSS:")
            );
        }
        println!(
            "  VmHWM (the process's peak over the whole bench): {:.1} MiB",
            status_mib(pid, "VmHWM:")
        );
    });
}
