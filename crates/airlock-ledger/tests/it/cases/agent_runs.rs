//! AGENT-54 and AGENT-55: what a run's step writes and reads, on both backends.

use airlock_ledger::{LedgerError, NewRun, RunDetail, RunId, RunStatus, RunStep, SessionId};
use serde_json::json;

use crate::harness::{DIGEST, Harness};

async fn run(h: &Harness, s: SessionId) -> RunId {
    h.store
        .create_run(NewRun {
            session_id: s,
            agent: "support".into(),
            definitions_digest: DIGEST.into(),
            definitions_snapshot: json!({}),
            lease: None,
        })
        .await
        .unwrap()
        .id
}

/// AGENT-54: a call is recorded in a run this store created, and in one another process
/// created (read once); a call naming a run nobody created is still refused.
pub(crate) async fn agent_54_a_run_is_read_once_and_an_unknown_one_refused(h: &Harness) {
    let s = h.session().await;
    let known = run(h, s).await;
    for (i, store) in [h.store.clone(), h.second_store().await].iter().enumerate() {
        for j in 0..2 {
            let mut call = h.call(s, "noop", json!({"i": i, "j": j}));
            call.run_id = Some(known);
            let recorded = store.record(call).await.unwrap();
            assert!(recorded.created);
            assert_eq!(recorded.invocation.run_id, Some(known));
        }
    }
    let unknown = RunId::new();
    let mut call = h.call(s, "noop", json!({"unknown": true}));
    call.run_id = Some(unknown);
    match h.store.record(call).await {
        Err(LedgerError::RunNotFound(id)) => assert_eq!(id, unknown),
        other => panic!("expected RunNotFound, got {other:?}"),
    }
}

/// AGENT-55: a step's commit upserts its steps and the run's details together and returns the
/// run's status; a later commit updates a step's results and the details in place.
pub(crate) async fn agent_55_steps_and_details_upsert_in_one_write(h: &Harness) {
    let s = h.session().await;
    let id = run(h, s).await;
    let detail = |n: i64| RunDetail {
        run_id: id,
        parent: None,
        detail: json!({"n": n}),
    };
    let step = |n: u32, results: Option<serde_json::Value>| RunStep {
        step: n,
        turn: json!({"turn": n}),
        results,
    };
    let status = h
        .store
        .save_run_steps(vec![step(1, None)], detail(1))
        .await
        .unwrap();
    assert_eq!(status, RunStatus::Running);
    let status = h
        .store
        .save_run_steps(
            vec![step(1, Some(json!(["done"]))), step(2, None)],
            detail(2),
        )
        .await
        .unwrap();
    assert_eq!(status, RunStatus::Running);
    let steps = h.store.run_steps(id).await.unwrap();
    assert_eq!(steps, vec![step(1, Some(json!(["done"]))), step(2, None)]);
    let stored = h.store.run_detail(id).await.unwrap().unwrap();
    assert_eq!(stored.detail, json!({"n": 2}));
    // Details alone (no steps) still write.
    let status = h.store.save_run_steps(Vec::new(), detail(3)).await.unwrap();
    assert_eq!(status, RunStatus::Running);
    let stored = h.store.run_detail(id).await.unwrap().unwrap();
    assert_eq!(stored.detail, json!({"n": 3}));
}
