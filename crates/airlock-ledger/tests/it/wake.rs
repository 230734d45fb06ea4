//! Cross-process wake-ups on every backend (DECIDE-10, DECIDE-12): a change committed by one
//! store — a CLI process's, another replica's — wakes waiters and the approvals signal of a
//! serving store on the same database. On SQLite the serving store listens on its wake socket
//! beside the database file; the deciding store is opened as the CLI opens it (not listening).
//!
//! Each wait is bounded by a timeout far below its own deadline: a wait that returns in time
//! was woken by the change, not by its deadline.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use airlock_ledger::{Approval, Decision, InvocationId, InvocationState as S, Store, StoreConfig};
use serde_json::json;
use tokio::time::{Instant, timeout};

use crate::harness::{Harness, config};

/// Far beyond the test's bound: reaching it would mean nobody woke the waiter.
const DEADLINE: Duration = Duration::from_secs(120);
/// What a woken waiter may take at most, on a loaded machine.
const BOUND: Duration = Duration::from_secs(15);

/// A store as `airlock serve` opens it.
async fn serving(h: &Harness) -> Arc<dyn Store> {
    h.reopen(StoreConfig {
        listen: true,
        ..config(&h.clock)
    })
    .await
}

fn wake_dir(h: &Harness) -> PathBuf {
    PathBuf::from(format!("{}.wake", h.location))
}

/// A row parked for approval, recorded through `h.store`.
async fn parked(h: &Harness, arguments: serde_json::Value) -> airlock_ledger::Invocation {
    let s = h.session().await;
    let mut call = h.call(s, "refund", arguments);
    call.approval = Approval::Always;
    h.store.record(call).await.unwrap().invocation
}

/// Waits on `store` for `id` to move past `version`, failing if that takes longer than BOUND.
async fn woken(store: Arc<dyn Store>, id: InvocationId, version: i64) -> S {
    let wait = store.wait_for_change(id, Some(version), Instant::now() + DEADLINE);
    let row = timeout(BOUND, wait)
        .await
        .expect("not woken by the other store's commit")
        .unwrap();
    row.state
}

/// The waiter and the deciding store's commit, the decision by a store that does not listen.
async fn a_decision_by_another_store_wakes_the_serving_store(h: &Harness) {
    let serve = serving(h).await;
    let cli = h.reopen(config(&h.clock)).await;
    let row = parked(h, json!({"amount": 5})).await;
    let waiter = tokio::spawn(woken(Arc::clone(&serve), row.id, row.version));
    let mut approvals = serve.approvals();
    tokio::task::yield_now().await;
    cli.decide(row.id, "bob", Decision::Approve).await.unwrap();
    assert_eq!(waiter.await.unwrap(), S::Approved);
    timeout(BOUND, approvals.changed())
        .await
        .expect("the approvals signal was not raised by the other store's approval")
        .unwrap();
    // A denial wakes it the same way, and its waiter sees the denial.
    let row = parked(h, json!({"amount": 6})).await;
    let waiter = tokio::spawn(woken(serve, row.id, row.version));
    tokio::task::yield_now().await;
    let deny = Decision::Deny {
        reason: "no".into(),
    };
    cli.decide(row.id, "bob", deny).await.unwrap();
    assert_eq!(waiter.await.unwrap(), S::Denied);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_decision_by_another_store_wakes_the_serving_store() {
    a_decision_by_another_store_wakes_the_serving_store(&Harness::sqlite().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_decision_by_another_store_wakes_the_serving_store() {
    let Some(h) = Harness::postgres().await else {
        return;
    };
    a_decision_by_another_store_wakes_the_serving_store(&h).await;
}

/// Two serving processes on one SQLite file both hear a third's decision (no socket is
/// taken from another), and the directory and sockets are the deployment user's alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_serving_store_hears_and_only_the_owner_can_send() {
    let h = Harness::sqlite().await;
    let serve = [serving(&h).await, serving(&h).await];
    let row = parked(&h, json!({"amount": 5})).await;
    let waiters = serve
        .clone()
        .map(|s| tokio::spawn(woken(s, row.id, row.version)));
    tokio::task::yield_now().await;
    h.store
        .decide(row.id, "bob", Decision::Approve)
        .await
        .unwrap();
    for waiter in waiters {
        assert_eq!(waiter.await.unwrap(), S::Approved);
    }
    let dir = wake_dir(&h);
    assert_eq!(mode(&dir), 0o700);
    let sockets = sockets(&dir);
    assert_eq!(sockets.len(), 2, "{sockets:?}");
    assert!(sockets.iter().all(|s| mode(s) == 0o600), "{sockets:?}");
}

/// A socket file left by a crashed server is cleared — by the next server that starts, or by
/// the first sender that finds it refusing — and never fails a commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_servers_socket_is_cleared_and_fails_nothing() {
    let h = Harness::sqlite().await;
    let dir = wake_dir(&h);
    std::fs::create_dir(&dir).unwrap();
    let stale = |name: &str| drop(UnixDatagram::bind(dir.join(name)).unwrap());
    stale("crashed-1.sock");
    // A decision with only a dead listener is committed and answered as usual.
    let row = parked(&h, json!({"amount": 5})).await;
    h.store
        .decide(row.id, "bob", Decision::Approve)
        .await
        .unwrap();
    assert!(sockets(&dir).is_empty(), "{:?}", sockets(&dir));
    // A server starting beside another crashed one's socket clears it and listens.
    stale("crashed-2.sock");
    let serve = serving(&h).await;
    assert_eq!(sockets(&dir).len(), 1, "{:?}", sockets(&dir));
    let row = parked(&h, json!({"amount": 6})).await;
    let waiter = tokio::spawn(woken(serve, row.id, row.version));
    tokio::task::yield_now().await;
    h.store
        .decide(row.id, "bob", Decision::Approve)
        .await
        .unwrap();
    assert_eq!(waiter.await.unwrap(), S::Approved);
}

/// What reaches a listener is the changed ids (and an "approved" marker), never a row's
/// arguments; a store that is dropped removes its socket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_name_ids_only_and_a_stopped_server_leaves_no_socket() {
    let h = Harness::sqlite().await;
    let serve = serving(&h).await;
    let dir = wake_dir(&h);
    let ear = UnixDatagram::bind(dir.join("ear.sock")).unwrap();
    ear.set_read_timeout(Some(BOUND)).unwrap();
    let row = parked(&h, json!({"token": "sk-live-secret"})).await;
    let recorded = heard(&ear);
    assert_eq!(recorded, row.id.to_string());
    h.store
        .decide(row.id, "bob", Decision::Approve)
        .await
        .unwrap();
    assert_eq!(heard(&ear), format!("approved,{}", row.id));
    drop(serve);
    // The listener task ends with its store; its socket file goes with it.
    let mut left = sockets(&dir);
    for _ in 0..200 {
        if left.len() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        left = sockets(&dir);
    }
    assert_eq!(left, vec![dir.join("ear.sock")]);
}

fn heard(ear: &UnixDatagram) -> String {
    let mut buf = [0; 16 * 1024];
    let n = ear.recv(&mut buf).expect("nothing announced");
    String::from_utf8(buf[..n].to_vec()).unwrap()
}

fn sockets(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    found.sort();
    found
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}
