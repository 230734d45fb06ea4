//! LEDGER-56..LEDGER-58: the lease on an agent run being driven — granted with the run's start
//! or resume, renewed only by its holder, cleared when the run parks or ends, and taken over
//! once expired by exactly one of any number of takers, across processes.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use airlock_ledger::{NewRun, ResumeOutcome, RunId, RunLease, RunStatus, SessionId, Store};
use serde_json::json;

use crate::harness::{DIGEST, Harness};

const RUN_LEASE: Duration = Duration::from_secs(30);

fn lease(owner: &str) -> RunLease {
    RunLease {
        owner: owner.into(),
        ttl: RUN_LEASE,
    }
}

async fn run(h: &Harness, s: SessionId, lease: Option<RunLease>) -> RunId {
    let new = NewRun {
        session_id: s,
        agent: "support".into(),
        definitions_digest: DIGEST.into(),
        definitions_snapshot: json!({}),
        lease,
    };
    h.store.create_run(new).await.unwrap().id
}

/// The stored lease of `run`: (owner, deadline in microseconds).
async fn stored(h: &Harness, run: RunId) -> (Option<String>, Option<i64>) {
    let sql = format!("SELECT lease_owner, lease_deadline FROM runs WHERE id = '{run}'");
    let row = h.raw.row_json(&sql, &["lease_deadline"]).await;
    let owner = row["lease_owner"].as_str().map(str::to_owned);
    (owner, row["lease_deadline"].as_i64())
}

fn micros(t: time::OffsetDateTime) -> i64 {
    i64::try_from(t.unix_timestamp_nanos() / 1000).unwrap()
}

/// LEDGER-56: a run started under a lease holds it until it parks; its resumer holds a new one;
/// ending clears it. A run started without one never holds one.
pub(crate) async fn ledger_56_a_run_holds_its_lease_while_running(h: &Harness) {
    let now = h.clock_now();
    let held = run(h, h.session().await, Some(lease("a"))).await;
    let deadline = micros(now + RUN_LEASE);
    assert_eq!(stored(h, held).await, (Some("a".into()), Some(deadline)));
    let plain = run(h, h.session().await, None).await;
    assert_eq!(stored(h, plain).await, (None, None));

    h.store.park_run(held).await.unwrap();
    assert_eq!(stored(h, held).await, (None, None));
    h.clock.advance(Duration::from_secs(5));
    let resumed = h.store.resume_run_leased(held, lease("b")).await.unwrap();
    assert_eq!(resumed, ResumeOutcome::Resumed);
    let deadline = micros(now + Duration::from_secs(5) + RUN_LEASE);
    assert_eq!(stored(h, held).await, (Some("b".into()), Some(deadline)));
    h.store
        .end_run(held, RunStatus::Succeeded, None)
        .await
        .unwrap();
    assert_eq!(stored(h, held).await, (None, None));
}

/// LEDGER-57: only the holder renews; a renewal keeps the run from being taken over; once taken
/// over, the old holder's renewal says so.
pub(crate) async fn ledger_57_only_the_holder_renews(h: &Harness) {
    let id = run(h, h.session().await, Some(lease("a"))).await;
    h.clock.advance(Duration::from_secs(20));
    assert!(h.store.renew_run_lease(id, "a", RUN_LEASE).await.unwrap());
    assert!(!h.store.renew_run_lease(id, "b", RUN_LEASE).await.unwrap());
    // Past the first grant, within the renewal: nothing to take over.
    h.clock.advance(Duration::from_secs(20));
    assert!(
        h.store
            .take_over_runs(lease("b"), 10)
            .await
            .unwrap()
            .is_empty()
    );
    // Past the renewal: taken over, and the old holder learns it lost the run.
    h.clock.advance(Duration::from_secs(11));
    assert_eq!(
        h.store.take_over_runs(lease("b"), 10).await.unwrap(),
        vec![id]
    );
    assert!(!h.store.renew_run_lease(id, "a", RUN_LEASE).await.unwrap());
    assert!(h.store.renew_run_lease(id, "b", RUN_LEASE).await.unwrap());
    assert_eq!(stored(h, id).await.0.as_deref(), Some("b"));
}

/// LEDGER-58: runs whose lease ran out are taken over by exactly one of sixteen concurrent
/// takers on two stores (two processes); a run without a lease, a parked run and a run whose
/// lease still holds are never taken, and a holder never takes its own run.
pub(crate) async fn ledger_58_one_taker_per_expired_run(h: &Harness) {
    let mut expired = HashSet::new();
    for _ in 0..3 {
        expired.insert(run(h, h.session().await, Some(lease("dead"))).await);
    }
    let _plain = run(h, h.session().await, None).await;
    let parked = run(h, h.session().await, Some(lease("dead"))).await;
    h.store.park_run(parked).await.unwrap();
    h.clock.advance(RUN_LEASE + Duration::from_secs(1));
    let live = run(h, h.session().await, Some(lease("live"))).await;
    assert!(
        h.store
            .take_over_runs(lease("dead"), 10)
            .await
            .unwrap()
            .is_empty()
    );

    let second = h.second_store().await;
    let mut takers = Vec::new();
    for i in 0..16 {
        let store: Arc<dyn Store> = if i % 2 == 0 {
            Arc::clone(&h.store)
        } else {
            Arc::clone(&second)
        };
        takers.push(tokio::spawn(async move {
            store
                .take_over_runs(lease(&format!("t{i}")), 10)
                .await
                .unwrap()
        }));
    }
    let mut taken = Vec::new();
    for t in takers {
        taken.extend(t.await.unwrap());
    }
    let distinct: HashSet<RunId> = taken.iter().copied().collect();
    assert_eq!(
        taken.len(),
        distinct.len(),
        "a run was taken twice: {taken:?}"
    );
    assert_eq!(distinct, expired);
    assert!(!distinct.contains(&live));
    for id in expired {
        let owner = stored(h, id).await.0.unwrap();
        assert!(owner.starts_with('t'), "{owner}");
    }
}

/// AGENT-7: the resume worker's listing skips runs still waiting for a person, so any number of
/// them, parked longer, never hide a run that may resume.
pub(crate) async fn agent_7_parked_listing_skips_runs_still_waiting(h: &Harness) {
    let s = h.session().await;
    let waiting = run(h, s, None).await;
    let mut call = h.call(s, "refund", json!({"amount": 1}));
    call.approval = airlock_ledger::Approval::Always;
    call.run_id = Some(waiting);
    h.store.record(call).await.unwrap();
    h.store.park_run(waiting).await.unwrap();
    let resumable = run(h, h.session().await, None).await;
    h.store.park_run(resumable).await.unwrap();
    assert_eq!(h.store.parked_root_runs(1).await.unwrap(), vec![resumable]);
}
