//! What a background worker picks up: approved rows nobody has claimed, oldest first.

use std::time::Duration;

use airlock_ledger::{Approval, Decision, InvocationState as S, LedgerError, Resolution};
use serde_json::json;

use crate::harness::{Harness, LEASE};

/// `approved_unclaimed` lists approved (and resolved-as-not-run) rows oldest first, honours
/// its limit, and drops a row as soon as it is claimed; of two claimers exactly one wins.
pub(crate) async fn approved_unclaimed_oldest_first_until_claimed(h: &Harness) {
    let s = h.session().await;
    let mut ids = Vec::new();
    for n in 0..3 {
        let mut call = h.call(s, "refund", json!({"n": n}));
        call.approval = Approval::Always;
        ids.push(h.store.record(call).await.unwrap().invocation.id);
        h.clock.advance(Duration::from_millis(5));
    }
    // An ungated row is pending, not approved: never listed.
    let pending = h
        .store
        .record(h.call(s, "lookup", json!({})))
        .await
        .unwrap();
    assert_eq!(pending.invocation.state, S::Pending);
    assert!(h.store.approved_unclaimed(10).await.unwrap().is_empty());

    // Approve out of order: the listing still follows recording order.
    for &id in [ids[2], ids[0]].iter() {
        h.store
            .decide(id, "alice", Decision::Approve)
            .await
            .unwrap();
    }
    let listed: Vec<_> = h.store.approved_unclaimed(10).await.unwrap();
    assert_eq!(
        listed.iter().map(|i| i.id).collect::<Vec<_>>(),
        [ids[0], ids[2]]
    );
    assert!(listed.iter().all(|i| i.state == S::Approved));
    assert_eq!(h.store.approved_unclaimed(1).await.unwrap()[0].id, ids[0]);

    h.store.claim(ids[0], "w1", LEASE).await.unwrap();
    assert!(matches!(
        h.store.claim(ids[0], "w2", LEASE).await,
        Err(LedgerError::Taken { .. })
    ));
    let listed = h.store.approved_unclaimed(10).await.unwrap();
    assert_eq!(listed.iter().map(|i| i.id).collect::<Vec<_>>(), [ids[2]]);

    // An in-doubt row resolved as "did not run" is approved again: the worker may run it.
    h.clock.advance(LEASE + Duration::from_secs(1));
    let report = h.store.sweep(h.clock_now()).await.unwrap();
    assert_eq!(report.in_doubt, [ids[0]]);
    h.store
        .decide(
            ids[0],
            "bob",
            Decision::Resolve {
                resolution: Resolution::DidNotRun,
                note: "upstream has no record".into(),
            },
        )
        .await
        .unwrap();
    let listed = h.store.approved_unclaimed(10).await.unwrap();
    assert_eq!(
        listed.iter().map(|i| i.id).collect::<Vec<_>>(),
        [ids[0], ids[2]]
    );
}
