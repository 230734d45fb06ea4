//! DECIDE-12: the serving process's worker runs an approval committed by another process — the
//! CLI's store on SQLite, another pool on PostgreSQL — when the ledger signals it. Its
//! safety-net poll is an hour away here, so nothing but the signal can have started the run.

use std::time::Duration;

use airlock_runtime::decisions::worker;
use tokio::time::{Instant, timeout};

use super::*;

/// The serving store (listening, as `serve` opens it) and another process's store.
async fn serving_and_other(
    backend: Backend,
    dir: &tempfile::TempDir,
) -> Option<(Arc<dyn Store>, Arc<dyn Store>)> {
    let serving = StoreConfig {
        listen: true,
        ..StoreConfig::default()
    };
    match backend {
        Backend::Sqlite => {
            let path = dir.path().join("ledger.sqlite");
            let serve = SqliteStore::open(&path, serving).await.unwrap();
            let other = SqliteStore::open(&path, StoreConfig::default()).await;
            Some((Arc::new(serve), Arc::new(other.unwrap())))
        }
        Backend::Postgres => {
            let options = fresh_schema().await?;
            let serve = PgStore::connect(options.clone(), serving).await.unwrap();
            let other = PgStore::connect(options, StoreConfig::default()).await;
            Some((Arc::new(serve), Arc::new(other.unwrap())))
        }
    }
}

pub(super) async fn the_worker_runs_an_approval_committed_by_another_process(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some((serving, other)) = serving_and_other(backend, &dir).await else {
        return;
    };
    let f = gateway_on(serving, policy(Approval::Always), "", dir).await;
    let ctx = f.ctx("c1").await;
    let parked = f.gateway.call(&ctx, "count", json!({"amount": 5})).await;
    let row = expect(parked.unwrap(), OutcomeKind::Parked);
    let Fixture {
        gateway,
        runs,
        _dir,
    } = f;
    let gateway = Arc::new(gateway);
    let stop = tokio_util::sync::CancellationToken::new();
    let safety_net = Duration::from_secs(3600);
    let working = tokio::spawn(worker::work_polling_every(
        Arc::clone(&gateway),
        stop.clone(),
        safety_net,
    ));

    // Ordering only (no timing is asserted): the worker's first look, at start, is over and
    // found nothing, so the approval is news to it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let approved = other.decide(row.id, "alice", Decision::Approve).await;
    let approved = approved.unwrap();
    let mut seen = approved.version;
    let store = gateway.store();
    let deadline = Instant::now() + safety_net;
    let settled = timeout(Duration::from_secs(15), async {
        loop {
            let now = store.wait_for_change(row.id, Some(seen), deadline).await;
            let now = now.unwrap();
            if now.state.is_terminal() {
                return now;
            }
            seen = now.version;
        }
    })
    .await
    .expect("the worker did not run the other process's approval");
    assert_eq!(settled.state, InvocationState::Succeeded, "{settled:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    stop.cancel();
    working.await.unwrap();
}
