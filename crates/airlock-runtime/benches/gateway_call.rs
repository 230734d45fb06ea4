//! Bench binary: `Gateway::call` for an ungated idempotent local no-op tool, at 1 and 16
//! concurrent callers, on SQLite (a file in a temp dir) and on PostgreSQL (when
//! `AIRLOCK_TEST_DATABASE_URL` is set). Every call is durable: recorded and claimed in one
//! commit, finished in another. Run with `cargo bench -p airlock-runtime --bench gateway_call`.

#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use airlock_runtime::ledger::{PgStore, SqliteStore, Store, StoreConfig};
use airlock_runtime::{CallContext, Gateway};
use airlock_spec::ScopeId;
use serde_json::json;

const CALLS_PER_CALLER: usize = 200;

#[path = "support/noop.rs"]
mod noop;

async fn run(label: &str, gateway: &Arc<Gateway>, callers: usize) {
    let start = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let gateway = Arc::clone(gateway);
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(CALLS_PER_CALLER);
                for i in 0..CALLS_PER_CALLER {
                    let session = gateway
                        .open_session("bench", Some("bench".into()), &ScopeId::Gateway)
                        .await
                        .unwrap();
                    let ctx = CallContext {
                        scope: ScopeId::Gateway,
                        session,
                        call_id: i.to_string(),
                        principal: Some("bench".into()),
                        groups: None,
                        channel: "bench",
                        downstream: Default::default(),
                    };
                    let t = Instant::now();
                    let outcome = gateway.call(&ctx, "noop", json!({})).await.unwrap();
                    latencies.push(t.elapsed());
                    assert!(outcome.invocation().error.is_none());
                }
                latencies
            })
        })
        .collect();
    let mut all: Vec<Duration> = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    let elapsed = start.elapsed();
    all.sort();
    let (p50, p99) = (all[all.len() / 2], all[all.len() * 99 / 100]);
    println!(
        "{label:<10} {callers:>2} callers: {:>7.0} calls/s  p50 {:>6.2} ms  p99 {:>6.2} ms",
        all.len() as f64 / elapsed.as_secs_f64(),
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3
    );
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite: Arc<dyn Store> = Arc::new(
        SqliteStore::open(dir.path().join("bench.sqlite"), StoreConfig::default())
            .await
            .unwrap(),
    );
    let gw = noop::gateway(sqlite, Vec::new());
    for callers in [1, 16] {
        run("sqlite", &gw, callers).await;
    }
    if let Ok(url) = std::env::var("AIRLOCK_TEST_DATABASE_URL") {
        let pg: Arc<dyn Store> = Arc::new(
            PgStore::connect_url(&url, StoreConfig::default())
                .await
                .unwrap(),
        );
        let gw = noop::gateway(pg, Vec::new());
        for callers in [1, 16] {
            run("postgres", &gw, callers).await;
        }
    } else {
        println!("postgres: skipped (AIRLOCK_TEST_DATABASE_URL is not set)");
    }
}
