//! Crash: a child process (this test binary, re-executed in child mode) claims an at-most-once
//! call and an idempotent twin, and is SIGKILLed while "the tool runs". After the lease the
//! sweeper marks the first in doubt (never re-run) and releases the twin for exactly one re-run.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use airlock_ledger::{
    Effect, InvocationId, InvocationState as S, LedgerError, PgStore, SqliteStore, Store,
    StoreConfig,
};
use serde_json::json;
use time::OffsetDateTime;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::harness::{Harness, Kind, LEASE, pg_options, pg_url};

const CHILD_ENV: &str = "AIRLOCK_LEDGER_CRASH_CHILD";

/// Child mode: only does something when re-executed by [`scenario`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let store: Arc<dyn Store> = match parts[0] {
        "sqlite" => Arc::new(
            SqliteStore::open(parts[1], StoreConfig::default())
                .await
                .unwrap(),
        ),
        _ => {
            let url = pg_url().unwrap();
            Arc::new(
                PgStore::connect(pg_options(&url, parts[1]), StoreConfig::default())
                    .await
                    .unwrap(),
            )
        }
    };
    for id in &parts[2..] {
        let id: InvocationId = id.parse().unwrap();
        store.claim(id, "child", LEASE).await.unwrap();
    }
    println!("CLAIMED");
    // The tool "runs" until the parent kills this process.
    std::future::pending::<()>().await;
}

async fn scenario(h: &Harness) {
    let s = h.session().await;
    let amo = h
        .store
        .record(h.call(s, "charge", json!({"cents": 100})))
        .await
        .unwrap()
        .invocation;
    let mut twin = h.call(s, "charge_idempotent", json!({"cents": 100}));
    twin.effect = Effect::Idempotent;
    let twin = h.store.record(twin).await.unwrap().invocation;

    let backend = if h.kind == Kind::Sqlite {
        "sqlite"
    } else {
        "postgres"
    };
    let spec = format!("{backend}|{}|{}|{}", h.location, amo.id, twin.id);
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "crash::crash_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, spec)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let claimed = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("CLAIMED") {
                return true;
            }
        }
        false
    })
    .await
    .unwrap();
    assert!(claimed, "the child did not claim");
    child.kill().await.unwrap(); // SIGKILL: no cleanup, no lease release

    for id in [amo.id, twin.id] {
        let row = h.store.get(id).await.unwrap();
        assert_eq!(
            (row.state, row.lease.unwrap().owner.as_str()),
            (S::Running, "child")
        );
    }
    // The child's lease ran on the system clock; sweep as of just after it.
    let after = OffsetDateTime::now_utc() + LEASE + Duration::from_secs(1);
    let report = h.store.sweep(after).await.unwrap();
    assert_eq!(
        (report.in_doubt, report.retried),
        (vec![amo.id], vec![twin.id])
    );

    let err = h.store.claim(amo.id, "parent", LEASE).await.unwrap_err();
    assert!(
        matches!(
            err,
            LedgerError::Taken {
                state: S::InDoubt,
                ..
            }
        ),
        "{err}"
    );
    let rerun = h.store.claim(twin.id, "parent", LEASE).await.unwrap();
    assert_eq!(
        (rerun.idempotency_key.as_str(), rerun.attempts),
        (twin.idempotency_key.as_str(), 2)
    );
    h.store
        .finish(twin.id, "parent", Ok(json!("charged")))
        .await
        .unwrap();
    assert!(h.store.claim(twin.id, "other", LEASE).await.is_err());
    let later = h.store.sweep(after + LEASE * 10).await.unwrap();
    assert!(later.retried.is_empty() && later.in_doubt.is_empty());
    assert_eq!(h.store.get(amo.id).await.unwrap().state, S::InDoubt);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_child_killed_mid_call() {
    scenario(&Harness::sqlite().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_child_killed_mid_call() {
    let Some(h) = Harness::postgres().await else {
        return;
    };
    scenario(&h).await;
}
