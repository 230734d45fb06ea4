//! `record_and_claim` (the fused path for ungated calls) and the batched writes behind it.

use std::sync::Arc;

use airlock_ledger::{
    Approval, InvocationId, InvocationState as S, LedgerError, Mode, NewSession, RoundUse,
    SessionId,
};
use serde_json::json;

use crate::harness::{Harness, LEASE};

/// An ungated call is recorded and claimed in one step; a replay of the same (session, call id)
/// returns the same row and never claims it again.
pub(crate) async fn fused_claims_an_ungated_call_once(h: &Harness) {
    let s = h.session().await;
    let call = h.call(s, "crm__search", json!({"q": "ada"}));
    let first = h
        .store
        .record_and_claim(call.clone(), "w1", LEASE)
        .await
        .unwrap();
    assert!(first.created);
    let inv = &first.invocation;
    assert_eq!(inv.state, S::Running);
    assert_eq!((inv.version, inv.attempts), (2, 1));
    assert_eq!(inv.lease.as_ref().map(|l| l.owner.as_str()), Some("w1"));
    assert_eq!(h.store.get(inv.id).await.unwrap().state, S::Running);

    let again = h
        .store
        .record_and_claim(call.clone(), "w2", LEASE)
        .await
        .unwrap();
    assert!(!again.created);
    assert_eq!(again.invocation.id, inv.id);
    assert_eq!(again.invocation.lease, inv.lease, "never claimed twice");

    h.store
        .finish(inv.id, "w1", Ok(json!({"hits": 1})))
        .await
        .unwrap();
    let replay = h
        .store
        .record_and_claim(call.clone(), "w3", LEASE)
        .await
        .unwrap();
    assert!(!replay.created);
    assert_eq!(replay.invocation.state, S::Succeeded);
    assert_eq!(replay.invocation.attempts, 1);
    let plain = h.store.record(call).await.unwrap();
    assert_eq!((plain.created, plain.invocation.id), (false, inv.id));
    // The chain holds both versions written by the fused step.
    let audit = h.store.verify().await.unwrap();
    assert!(audit.first_break.is_none(), "{audit:?}");
}

/// 16 callers racing to record-and-claim one call: one row, claimed exactly once.
pub(crate) async fn fused_racing_duplicates_claim_once(h: &Harness) {
    let s = h.session().await;
    let call = h.call(s, "refund", json!({"amount": 5}));
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let (store, call) = (Arc::clone(&h.store), call.clone());
            tokio::spawn(async move { store.record_and_claim(call, &format!("w{i}"), LEASE).await })
        })
        .collect();
    let mut created = 0;
    let mut ids = Vec::new();
    for t in tasks {
        let r = t.await.unwrap().unwrap();
        created += usize::from(r.created);
        ids.push(r.invocation.id);
    }
    assert_eq!(created, 1);
    assert!(ids.iter().all(|id| *id == ids[0]));
    let row = h.store.get(ids[0]).await.unwrap();
    assert_eq!((row.state, row.attempts, row.version), (S::Running, 1, 2));
}

/// A call that needs a person (approval always, once without a prior approval), a proposal, or
/// a question is recorded but not claimed.
pub(crate) async fn fused_leaves_gated_calls_unclaimed(h: &Harness) {
    let s = h.session().await;
    let mut always = h.call(s, "refund", json!({"amount": 5}));
    always.approval = Approval::Always;
    let mut once = h.call(s, "refund", json!({"amount": 6}));
    once.approval = Approval::Once;
    let mut propose = h.call(s, "crm__search", json!({"q": "x"}));
    propose.mode = Mode::Propose;
    for (call, state) in [
        (always, S::AwaitingApproval),
        (once, S::AwaitingApproval),
        (propose, S::Proposed),
    ] {
        let r = h.store.record_and_claim(call, "w1", LEASE).await.unwrap();
        assert!(r.created);
        assert_eq!(r.invocation.state, state);
        assert!(r.invocation.lease.is_none());
        assert_eq!(r.invocation.attempts, 0);
        assert_eq!(h.store.get(r.invocation.id).await.unwrap().state, state);
    }
}

/// Many callers at once (so writes share batches): every call runs once and settles, a
/// replayed call inside a busy batch gets its existing row, and the chain verifies.
pub(crate) async fn fused_batches_stay_exact(h: &Harness) {
    let s = h.session().await;
    let old = h.call(s, "crm__search", json!({"q": "old"}));
    let old_id = h.store.record(old.clone()).await.unwrap().invocation.id;
    let tasks: Vec<_> = (0..32)
        .map(|i| {
            let store = Arc::clone(&h.store);
            let call = if i == 7 {
                old.clone()
            } else {
                h.call(s, "crm__search", json!({ "q": i }))
            };
            tokio::spawn(async move {
                let owner = format!("w{i}");
                let r = store.record_and_claim(call, &owner, LEASE).await.unwrap();
                if r.created {
                    let id = r.invocation.id;
                    store.finish(id, &owner, Ok(json!(i))).await.unwrap();
                }
                r
            })
        })
        .collect();
    for (i, t) in tasks.into_iter().enumerate() {
        let r = t.await.unwrap();
        if i == 7 {
            assert!(!r.created);
            assert_eq!((r.invocation.id, r.invocation.state), (old_id, S::Pending));
        } else {
            assert!(r.created);
            let row = h.store.get(r.invocation.id).await.unwrap();
            assert_eq!((row.state, row.version, row.attempts), (S::Succeeded, 3, 1));
        }
    }
    let audit = h.store.verify().await.unwrap();
    assert!(audit.first_break.is_none(), "{audit:?}");
    assert_eq!(audit.rows, 1 + 32);
}

/// A session and its first call submitted together (as the MCP endpoint does) commit together,
/// many at once; a session id that already exists fails alone and leaves no call behind.
pub(crate) async fn sessions_and_first_calls_share_batches(h: &Harness) {
    let taken = h.session().await;
    let tasks: Vec<_> = (0..9)
        .map(|i| {
            let store = Arc::clone(&h.store);
            let id = if i == 4 { taken } else { SessionId::new() };
            let call = h.call(id, "crm__search", json!({ "q": i }));
            tokio::spawn(async move {
                let new = NewSession {
                    channel: "mcp".into(),
                    principal: Some(format!("p{i}")),
                    metadata: json!({}),
                };
                let (session, call) = tokio::join!(
                    store.create_session(id, new),
                    store.record_and_claim(call, "w", LEASE)
                );
                (session.map(|s| s.id), call)
            })
        })
        .collect();
    for (i, t) in tasks.into_iter().enumerate() {
        let (session, call) = t.await.unwrap();
        if i == 4 {
            assert!(session.is_err(), "a duplicate session id is refused");
            // The existing session was there, so its call stands on its own.
            assert!(call.unwrap().created);
            continue;
        }
        let id = session.unwrap();
        let call = call.unwrap();
        assert!(call.created);
        assert_eq!(call.invocation.state, S::Running);
        assert_eq!(call.invocation.session_id, id);
        assert_eq!(
            call.invocation.principal.as_deref(),
            Some(format!("p{i}").as_str())
        );
        assert_eq!(h.store.get_session(id).await.unwrap().channel, "mcp");
    }
    let audit = h.store.verify().await.unwrap();
    assert!(audit.first_break.is_none(), "{audit:?}");
}

/// A call this process runs is swept into `in_doubt` by another process (its lease ran out
/// there), so the writer's copy of the running row is stale. The owner's finish still settles
/// the row — from `in_doubt`, as the database holds it (version 4), not over the stale copy —
/// and the neighbour finished in the same moment is not disturbed.
pub(crate) async fn finish_after_another_process_swept_the_call(h: &Harness) {
    let s = h.session().await;
    let claim = |args| {
        let (store, call) = (Arc::clone(&h.store), h.call(s, "charge", args));
        async move {
            store
                .record_and_claim(call, "w1", LEASE)
                .await
                .unwrap()
                .invocation
        }
    };
    let swept = claim(json!({"cents": 1})).await;
    let neighbour = claim(json!({"cents": 2})).await;
    // Only the first call's lease runs out by the time the other process sweeps.
    let later = h.clock_now() + LEASE + std::time::Duration::from_secs(1);
    h.store
        .renew_lease(neighbour.id, "w1", LEASE * 3)
        .await
        .unwrap();
    let other = h.second_store().await;
    assert_eq!(other.sweep(later).await.unwrap().in_doubt, vec![swept.id]);

    let (settled, done) = tokio::join!(
        h.store.finish(swept.id, "w1", Ok(json!("ran"))),
        h.store.finish(neighbour.id, "w1", Ok(json!("ran"))),
    );
    let settled = settled.unwrap();
    assert_eq!((settled.state, settled.version), (S::Succeeded, 4));
    assert_eq!(h.store.get(swept.id).await.unwrap(), settled);
    assert_eq!(done.unwrap().state, S::Succeeded);
    // A second finish is refused as finished, not taken for the stale running copy.
    assert!(matches!(
        h.store.finish(swept.id, "w1", Ok(json!("again"))).await,
        Err(LedgerError::AlreadyFinished { .. })
    ));
    let audit = h.store.verify().await.unwrap();
    assert!(audit.first_break.is_none(), "{audit:?}");
}

/// LEDGER-90: a call that opens its own session records it in the same job: the session exists
/// with the call's principal, and both chain events are written; a call refused before it is
/// written (a round that follows nothing) leaves no session either.
pub(crate) async fn ledger_90_a_call_opens_its_session_in_its_own_commit(h: &Harness) {
    let opened = |principal: &str| NewSession {
        channel: "mcp".into(),
        principal: Some(principal.into()),
        metadata: json!({"scope": "gateway"}),
    };
    let id = SessionId::new();
    let mut call = h.call(id, "crm__search", json!({"q": "ada"}));
    call.principal = None;
    call.opens = Some(opened("ada"));
    let recorded = h.store.record_and_claim(call, "w", LEASE).await.unwrap();
    assert!(recorded.created);
    assert_eq!(recorded.invocation.state, S::Running);
    assert_eq!(recorded.invocation.principal.as_deref(), Some("ada"));
    let session = h.store.get_session(id).await.unwrap();
    assert_eq!(
        (session.channel.as_str(), session.principal.as_deref()),
        ("mcp", Some("ada"))
    );
    let events = format!(
        "SELECT count(*) FROM ledger_events WHERE entity_id IN ('{id}', '{}')",
        recorded.invocation.id
    );
    assert_eq!(
        h.raw.count(&events).await,
        3,
        "the session's event and the call's two"
    );

    let refused = SessionId::new();
    let mut round = h.call(refused, "crm__search", json!({"q": "eve"}));
    round.opens = Some(opened("eve"));
    round.follows = Some(RoundUse {
        nonce: "n-1".into(),
        previous: InvocationId::new(),
        by: "eve".into(),
    });
    assert!(h.store.record_and_claim(round, "w", LEASE).await.is_err());
    assert!(matches!(
        h.store.get_session(refused).await,
        Err(LedgerError::SessionNotFound(_))
    ));
    let audit = h.store.verify().await.unwrap();
    assert!(audit.first_break.is_none(), "{audit:?}");
}
