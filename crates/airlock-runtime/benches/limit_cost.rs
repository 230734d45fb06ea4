//! Bench binary: what one declared limit adds to a call (docs/rules.md POLICY-58): the same
//! ungated idempotent local no-op called 2,000 times one after another on SQLite, without a
//! limit and with one (`calls`, a cap no call reaches), alternating rounds; reports durable
//! commits per call (a limit must add none) and the process's CPU time per call, read from
//! `/proc/self/task/*/schedstat` (Linux, nanoseconds). Run with `cargo bench -p airlock-runtime --bench limit_cost`.

#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use airlock_runtime::ledger::{SqliteStore, Store, StoreConfig};
use airlock_runtime::{CallContext, Gateway};
use airlock_spec::{Limit, LimitBy, LimitOver, Measure, ScopeId};
use serde_json::json;

const CALLS: usize = 2_000;

#[path = "support/noop.rs"]
mod noop;

/// The process's CPU time (Linux), in nanoseconds: the sum over its threads of the time each
/// spent running (`/proc/self/task/*/schedstat`), which `/proc/self/stat`'s 10 ms ticks are too
/// coarse for. The bench's threads (the runtime, SQLite's) live through every round.
fn cpu() -> Duration {
    let mut total = 0u64;
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let path = task.unwrap().path().join("schedstat");
        if let Ok(stat) = std::fs::read_to_string(path) {
            total += stat
                .split_whitespace()
                .next()
                .unwrap()
                .parse::<u64>()
                .unwrap();
        }
    }
    Duration::from_nanos(total)
}

/// One `calls` limit per principal, with a cap no call reaches.
fn limit() -> Limit {
    Limit {
        name: "sends".into(),
        measure: Measure::Calls,
        max: 1e9,
        per: Duration::from_secs(86_400),
        by: LimitBy::Principal,
        over: LimitOver::Deny,
    }
}

/// `CALLS` calls; (commits per call, CPU per call, wall per call).
async fn round(
    store: &Arc<SqliteStore>,
    gateway: &Gateway,
    tag: &str,
) -> (f64, Duration, Duration) {
    let commits = store.commits();
    let (cpu0, wall0) = (cpu(), Instant::now());
    for i in 0..CALLS {
        let session = gateway
            .open_session("bench", Some("bench".into()), &ScopeId::Gateway)
            .await
            .unwrap();
        let ctx = CallContext {
            scope: ScopeId::Gateway,
            session,
            call_id: format!("{tag}{i}"),
            principal: Some("bench".into()),
            groups: None,
            channel: "bench",
            downstream: Default::default(),
        };
        let outcome = gateway.call(&ctx, "noop", json!({})).await.unwrap();
        assert!(outcome.invocation().error.is_none());
    }
    let n = u32::try_from(CALLS).unwrap();
    (
        (store.commits() - commits) as f64 / CALLS as f64,
        (cpu() - cpu0) / n,
        wall0.elapsed() / n,
    )
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        SqliteStore::open(dir.path().join("bench.sqlite"), StoreConfig::default())
            .await
            .unwrap(),
    );
    let plain = noop::gateway(Arc::clone(&store) as Arc<dyn Store>, Vec::new());
    let limited = noop::gateway(Arc::clone(&store) as Arc<dyn Store>, vec![limit()]);
    for r in 0..3 {
        for (label, gw) in [("no limit", &plain), ("one limit", &limited)] {
            let (commits, cpu, wall) = round(&store, gw, &format!("{r}{label}")).await;
            println!(
                "round {r} {label:<9}: {commits:.2} commits/call (session included), CPU {:>6.1} µs/call, wall {:>6.1} µs/call",
                cpu.as_secs_f64() * 1e6,
                wall.as_secs_f64() * 1e6
            );
        }
    }
}
