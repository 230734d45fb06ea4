//! A short-session `tools/call` to the loopback testkit upstream through [`McpClient`] versus a
//! bare reqwest POST of the same `tools/call` JSON (no initialize). Prints p50/p99 of each.
//! Run: `cargo bench -p airlock-mcp --bench short_session`.
//!
//! airlock's call is three HTTP round trips (initialize, notifications/initialized,
//! tools/call), plus a DELETE when the server issues a session id (the testkit upstream does
//! not); the bare POST is one.

#![allow(clippy::unwrap_used, missing_docs)]

use std::time::{Duration, Instant};

use airlock_egress::{EgressPolicy, GuardedClient};
use airlock_mcp::{McpClient, McpTarget, ToolCall};
use airlock_testkit::{Script, Server};
use serde_json::json;

const WARMUP: usize = 50;
const RUNS: usize = 1000;

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    (at(0.50), at(0.99))
}

async fn measure<F, Fut>(mut once: F) -> (Duration, Duration)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for _ in 0..WARMUP {
        once().await;
    }
    let mut samples = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let start = Instant::now();
        once().await;
        samples.push(start.elapsed());
    }
    percentiles(samples)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let server = Server::start(Script::default()).await;
        let url = server.loopback_url();
        let policy = EgressPolicy {
            allow_cidrs: vec!["127.0.0.1/32".parse().unwrap()],
            ..EgressPolicy::default()
        };
        let client = McpClient::new(GuardedClient::new(policy).unwrap());
        let target = McpTarget::new(url.clone());
        let call = ToolCall::new("echo", json!({"q": "acme"}));
        let (p50, p99) = measure(|| async {
            client.call_tool(&target, &call).await.unwrap();
        })
        .await;
        println!("airlock McpClient short session: p50 {p50:?}  p99 {p99:?}");

        let bare = reqwest::Client::new();
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": "echo", "arguments": {"q": "acme"}}});
        let (p50, p99) = measure(|| async {
            let reply = bare
                .post(&url)
                .header("accept", "application/json, text/event-stream")
                .json(&body)
                .send()
                .await
                .unwrap();
            assert!(reply.status().is_success());
            reply.bytes().await.unwrap();
        })
        .await;
        println!("bare reqwest tools/call POST:    p50 {p50:?}  p99 {p99:?}");
        let methods = server.methods();
        let per_call = methods
            .iter()
            .filter(|m| m.as_str() == "initialize")
            .count();
        println!(
            "requests seen: {} ({} short sessions of 3 requests each + {} bare POSTs)",
            methods.len(),
            per_call,
            WARMUP + RUNS
        );
    });
}
