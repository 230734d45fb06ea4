//! Bench binary: how long a freeze made through one replica takes to reach another — from the
//! freeze's commit returning on replica B to replica A's copy covering the call — with A
//! refreshing as `serve` does (every `freeze::REFRESH`), on SQLite (two stores on one file, as two
//! processes would open it) and on PostgreSQL (two pools; when `AIRLOCK_TEST_DATABASE_URL` is
//! set). Reports p50, p99 and the worst of 40 freezes made at spread phases of A's period, and
//! what judging a call against 100 freezes costs. Run with `cargo bench -p airlock-runtime --bench freeze_reach`.

#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use airlock_egress::{EgressPolicy, GuardedClient};
use airlock_runtime::Gateway;
use airlock_runtime::freeze::{self, Covered};
use airlock_runtime::ledger::{Freeze, FreezeTarget, PgStore, SqliteStore, Store, StoreConfig};
use airlock_spec::{Credentials, Policy, ScopeId, ToolDefinition, ToolName, ToolSource, ToolSpec};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const FREEZES: usize = 40;

fn gateway(store: Arc<dyn Store>) -> Arc<Gateway> {
    let egress = GuardedClient::new(EgressPolicy::default()).unwrap();
    Arc::new(Gateway::builder(store, egress, Arc::new(Credentials::default())).build())
}

fn spec() -> ToolSpec {
    ToolSpec {
        definition: ToolDefinition {
            name: ToolName::try_from("send").unwrap(),
            description: "Sends.".into(),
            input_schema: json!({"type": "object"}),
        },
        source: ToolSource::Local,
        policy: Policy::default(),
    }
}

async fn reach(label: &str, a: Arc<dyn Store>, b: Arc<dyn Store>) {
    let (a, b) = (gateway(a), gateway(b));
    let stop = CancellationToken::new();
    let watch = Arc::clone(a.freezes());
    let refreshing = tokio::spawn({
        let stop = stop.clone();
        async move { watch.run(freeze::REFRESH, stop).await }
    });
    let spec = spec();
    let scope = ScopeId::Gateway;
    let call = Covered::call(&scope, Some("bench"), &spec);
    let mut took = Vec::with_capacity(FREEZES);
    for i in 0..FREEZES {
        // Freezes land at every phase of A's refresh period, as operators' do.
        let phase = freeze::REFRESH.mul_f64((i as f64 * 0.618_034).fract());
        tokio::time::sleep(phase).await;
        let target = FreezeTarget::Tool("send".into());
        b.freezes()
            .freeze(target.clone(), "bench", "ops")
            .await
            .unwrap();
        let committed = Instant::now();
        while a.freezes().covering(&call).is_none() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        took.push(committed.elapsed());
        b.freezes().unfreeze(target, "ops").await.unwrap();
        while a.freezes().covering(&call).is_some() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    stop.cancel();
    refreshing.await.unwrap();
    took.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{label:<10} freeze reach over {FREEZES}: p50 {:>6.1} ms  p99 {:>6.1} ms  max {:>6.1} ms",
        ms(took[took.len() / 2]),
        ms(took[took.len() * 99 / 100]),
        ms(took[took.len() - 1])
    );
}

/// What judging one call against `n` freezes none of which covers it costs.
fn judging(n: usize) {
    let freezes: Vec<Freeze> = (0..n)
        .map(|i| Freeze {
            target: FreezeTarget::Tool(format!("other_{i}")),
            reason: "bench".into(),
            by: "ops".into(),
            at: time::OffsetDateTime::now_utc(),
        })
        .collect();
    let spec = spec();
    let scope = ScopeId::Gateway;
    let call = Covered::call(&scope, Some("bench"), &spec);
    let rounds = 100_000;
    let start = Instant::now();
    for _ in 0..rounds {
        std::hint::black_box(freeze::covering(std::hint::black_box(&freezes), &call));
    }
    let each = start.elapsed().as_secs_f64() / f64::from(rounds) * 1e9;
    println!("judging a call against {n:>3} freezes: {each:>7.1} ns");
}

#[tokio::main]
async fn main() {
    judging(0);
    judging(100);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bench.sqlite");
    let a: Arc<dyn Store> = Arc::new(
        SqliteStore::open(&path, StoreConfig::default())
            .await
            .unwrap(),
    );
    let b: Arc<dyn Store> = Arc::new(
        SqliteStore::open(&path, StoreConfig::default())
            .await
            .unwrap(),
    );
    reach("sqlite", a, b).await;
    if let Ok(url) = std::env::var("AIRLOCK_TEST_DATABASE_URL") {
        let a: Arc<dyn Store> = Arc::new(
            PgStore::connect_url(&url, StoreConfig::default())
                .await
                .unwrap(),
        );
        let b: Arc<dyn Store> = Arc::new(
            PgStore::connect_url(&url, StoreConfig::default())
                .await
                .unwrap(),
        );
        reach("postgres", a, b).await;
    } else {
        println!("postgres: skipped (AIRLOCK_TEST_DATABASE_URL is not set)");
    }
}
