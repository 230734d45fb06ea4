//! DECIDE-19 on both backends: one decision on several calls commits for all of them or for
//! none, and the refusal names the call that stopped it.

use airlock_ledger::{Approval, Decision, InvocationId, InvocationState as S, LedgerError};
use serde_json::json;

use crate::harness::Harness;

/// Three calls of `session` waiting for approval.
async fn three_waiting(h: &Harness, tag: &str) -> Vec<InvocationId> {
    let s = h.session().await;
    let mut ids = Vec::new();
    for n in 0..3 {
        let mut call = h.call(s, "refund", json!({ "n": n, "tag": tag }));
        call.approval = Approval::Always;
        ids.push(h.store.record(call).await.unwrap().invocation.id);
    }
    ids
}

pub(crate) async fn decide_19_a_batch_decides_all_or_nothing(h: &Harness) {
    let ids = three_waiting(h, "a").await;
    let decided = h
        .store
        .decide_all(ids.clone(), "alice", Decision::Approve)
        .await
        .unwrap();
    assert_eq!(decided.iter().map(|r| r.id).collect::<Vec<_>>(), ids);
    for row in &decided {
        assert_eq!(row.state, S::Approved);
        assert_eq!(row.decision.as_ref().unwrap().by, "alice");
    }

    // One of three decided already: the batch is refused naming it, and the others still wait.
    let ids = three_waiting(h, "b").await;
    let deny = |reason: &str| Decision::Deny {
        reason: reason.into(),
    };
    h.store.decide(ids[1], "bob", deny("no")).await.unwrap();
    match h
        .store
        .decide_all(ids.clone(), "alice", Decision::Approve)
        .await
    {
        Err(LedgerError::AlreadyDecided { id, by, .. }) => {
            assert_eq!((id, by.as_str()), (ids[1], "bob"))
        }
        other => panic!("the batch must be refused naming the decided call, got {other:?}"),
    }
    for id in [ids[0], ids[2]] {
        assert_eq!(h.store.get(id).await.unwrap().state, S::AwaitingApproval);
    }
    let denied = h
        .store
        .decide_all(vec![ids[0], ids[2]], "carol", deny("all of them"))
        .await
        .unwrap();
    assert!(denied.iter().all(|r| r.state == S::Denied));

    // What a batch may not be.
    let waiting = three_waiting(h, "c").await;
    for (ids, decision) in [
        (Vec::new(), Decision::Approve),
        (vec![waiting[0], waiting[0]], Decision::Approve),
        (vec![waiting[0]], Decision::Answer { text: "x".into() }),
    ] {
        let refused = h.store.decide_all(ids, "alice", decision).await;
        assert!(
            matches!(refused, Err(LedgerError::Invalid(_))),
            "{refused:?}"
        );
    }
    assert_eq!(
        h.store.get(waiting[0]).await.unwrap().state,
        S::AwaitingApproval
    );
    assert!(h.store.verify().await.unwrap().first_break.is_none());
}

/// LEDGER-76: 50 votes at once from two stores on one database, for a call that needs two
/// approvals: exactly two are counted, the second makes the call approved (once, by both), and
/// every later vote is refused; a decider votes once.
pub(crate) async fn ledger_76_votes_complete_a_quorum_once(h: &Harness) {
    let other = h.second_store().await;
    let ids = three_waiting(h, "q").await;
    let id = ids[0];
    let first = h.store.vote(ids[1], "ann", 2).await.unwrap();
    assert_eq!(first.invocation.state, S::AwaitingApproval);
    assert!(matches!(
        h.store.vote(ids[1], "ann", 2).await,
        Err(LedgerError::AlreadyDecided { .. })
    ));
    let votes = (0..50).map(|n| {
        let store = if n % 2 == 0 { &h.store } else { &other };
        let voter = format!("voter-{n}");
        async move { store.vote(id, &voter, 2).await }
    });
    let results = futures::future::join_all(votes).await;
    let counted: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(counted.len(), 2, "{results:?}");
    let approved: Vec<_> = counted
        .iter()
        .filter(|v| v.invocation.state == S::Approved)
        .collect();
    assert_eq!(approved.len(), 1);
    assert_eq!(approved[0].voters.len(), 2);
    for refused in results.iter().filter_map(|r| r.as_ref().err()) {
        assert!(
            matches!(refused, LedgerError::AlreadyDecided { .. }),
            "{refused:?}"
        );
    }
    let row = h.store.get(id).await.unwrap();
    assert_eq!(row.state, S::Approved);
    assert_eq!(row.decision.unwrap().by, approved[0].voters.join(", "));
    assert!(h.store.verify().await.unwrap().first_break.is_none());
}
