//! Bench binary: what one declared limit adds to a call (docs/rules.md POLICY-58): the same
//! ungated idempotent local no-op called 2,000 times one after another on SQLite, without a
//! limit and with one (`calls`, a cap no call reaches), alternating call by call; reports durable
//! commits per call (a limit must add none) and the process's CPU time per call, read from
//! `/proc/self/task/*/schedstat` (Linux, nanoseconds). Run with `cargo bench -p airlock-runtime --bench limit_cost`.

#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use airlock_runtime::ledger::{SqliteStore, Store, StoreConfig};
use airlock_runtime::{CallContext, Gateway};
use airlock_spec::{Limit, LimitBy, LimitOver, Measure, ScopeId};
use serde_json::json;

const CALLS: usize = 2_000;

#[path = "support/noop.rs"]
mod noop;

#[path = "support/cpu.rs"]
mod cpu;
use cpu::cpu;

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

/// One call of the no-op through `gateway`, in a session of its own; (durable commits, CPU).
async fn one_call(store: &SqliteStore, gateway: &Gateway, call_id: String) -> (u64, Duration) {
    let (commits, cpu0) = (store.commits(), cpu());
    let session = gateway
        .open_session("bench", Some("bench".into()), &ScopeId::Gateway)
        .await
        .unwrap();
    let ctx = CallContext {
        scope: ScopeId::Gateway,
        session,
        call_id,
        principal: Some("bench".into()),
        groups: None,
        channel: "bench",
        downstream: Default::default(),
    };
    let outcome = gateway.call(&ctx, "noop", json!({})).await.unwrap();
    assert!(outcome.invocation().error.is_none());
    (store.commits() - commits, cpu() - cpu0)
}

/// `CALLS` pairs, one call without the limit and one with it, alternating call by call so
/// both kinds meet the same machine; per kind (commits per call, CPU per call).
async fn round(
    store: &SqliteStore,
    plain: &Gateway,
    limited: &Gateway,
    r: usize,
) -> [(f64, Duration); 2] {
    let mut totals = [(0u64, Duration::ZERO); 2];
    // `LIMIT_COST_ONLY=with` (or `without`) runs one kind alone, to profile it by itself.
    let only = std::env::var("LIMIT_COST_ONLY").ok();
    let kinds: Vec<(usize, &Gateway)> = [plain, limited]
        .into_iter()
        .enumerate()
        .filter(|(k, _)| only.as_deref().is_none_or(|o| (o == "with") == (*k == 1)))
        .collect();
    for i in 0..CALLS {
        for &(k, gateway) in &kinds {
            let (commits, cpu) = one_call(store, gateway, format!("{r}-{k}-{i}")).await;
            totals[k].0 += commits;
            totals[k].1 += cpu;
        }
    }
    let n = u32::try_from(CALLS).unwrap();
    totals.map(|(commits, cpu)| (commits as f64 / CALLS as f64, cpu / n))
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
        let [without, with] = round(&store, &plain, &limited, r).await;
        let micros = |d: Duration| d.as_secs_f64() * 1e6;
        println!(
            "round {r}: without {:.2} commits/call, CPU {:>6.1} µs/call; with one limit {:.2} commits/call, CPU {:>6.1} µs/call; added {:>+6.1} µs",
            without.0,
            micros(without.1),
            with.0,
            micros(with.1),
            micros(with.1) - micros(without.1)
        );
    }
}
