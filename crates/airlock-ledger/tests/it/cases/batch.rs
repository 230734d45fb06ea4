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
    let first = h.store.vote(ids[1], "ann", 2, None).await.unwrap();
    assert_eq!(first.invocation.state, S::AwaitingApproval);
    assert!(matches!(
        h.store.vote(ids[1], "ann", 2, None).await,
        Err(LedgerError::AlreadyDecided { .. })
    ));
    let votes = (0..50).map(|n| {
        let store = if n % 2 == 0 { &h.store } else { &other };
        let voter = format!("voter-{n}");
        async move { store.vote(id, &voter, 2, None).await }
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

/// A call of `tool` with `arguments` in `session` by the harness's principal, parking.
fn gated(h: &Harness, session: airlock_ledger::SessionId, n: u32) -> airlock_ledger::NewInvocation {
    let mut call = h.call(session, "refund", json!({ "n": n }));
    call.approval = Approval::Always;
    call
}

/// LEDGER-77: a grant given with an approval lets `uses` identical calls of the same principal
/// through (recorded pending, naming the approved call), then calls park again; a grant for the
/// tool covers other arguments; a session grant only its session; an ended grant nothing.
pub(crate) async fn ledger_77_a_grant_lets_bounded_calls_through(h: &Harness) {
    let s = h.session().await;
    let first = h.store.record(gated(h, s, 1)).await.unwrap().invocation;
    let lasts = std::time::Duration::from_secs(1800);
    let grant = airlock_ledger::Grant {
        reach: airlock_ledger::GrantReach::SameCall,
        uses: Some(2),
        lasts,
        session: false,
    };
    let approved = h.store.grant(first.id, "alice", grant).await.unwrap();
    assert_eq!(approved.state, S::Approved);
    let other_session = h.session().await;
    for session in [s, other_session] {
        let row = h
            .store
            .record(gated(h, session, 1))
            .await
            .unwrap()
            .invocation;
        assert_eq!((row.state, row.approval_ref), (S::Pending, Some(first.id)));
    }
    assert_eq!(
        h.store
            .record(gated(h, s, 1))
            .await
            .unwrap()
            .invocation
            .state,
        S::AwaitingApproval,
        "two uses, then a person again"
    );
    assert_eq!(
        h.store
            .record(gated(h, s, 2))
            .await
            .unwrap()
            .invocation
            .state,
        S::AwaitingApproval,
        "other arguments are not covered"
    );
    // The tool, in one session, for as long as it lasts.
    let second = h.store.record(gated(h, s, 3)).await.unwrap().invocation;
    let tool = airlock_ledger::Grant {
        reach: airlock_ledger::GrantReach::Tool,
        uses: None,
        lasts,
        session: true,
    };
    h.store.grant(second.id, "alice", tool).await.unwrap();
    let row = h.store.record(gated(h, s, 4)).await.unwrap().invocation;
    assert_eq!((row.state, row.approval_ref), (S::Pending, Some(second.id)));
    let elsewhere = h.store.record(gated(h, other_session, 5)).await.unwrap();
    assert_eq!(elsewhere.invocation.state, S::AwaitingApproval);
    h.clock.advance(std::time::Duration::from_secs(1801));
    let late = h.store.record(gated(h, s, 6)).await.unwrap().invocation;
    assert_eq!(late.state, S::AwaitingApproval, "the grant has ended");
    // A call of nobody cannot be granted again, and the refusal decides nothing.
    let anonymous = h.session_for(None).await;
    let nobodys = h
        .store
        .record(gated(h, anonymous, 7))
        .await
        .unwrap()
        .invocation;
    let grant = airlock_ledger::Grant {
        reach: airlock_ledger::GrantReach::Tool,
        uses: Some(1),
        lasts: std::time::Duration::from_secs(60),
        session: false,
    };
    let refused = h.store.grant(nobodys.id, "alice", grant).await;
    assert!(
        matches!(refused, Err(LedgerError::Invalid(_))),
        "{refused:?}"
    );
    let row = h.store.get(nobodys.id).await.unwrap();
    assert_eq!(row.state, S::AwaitingApproval, "nothing decided");
    assert!(h.store.verify().await.unwrap().first_break.is_none());
}

/// LEDGER-77: 100 identical calls at once from two stores against a three-use grant: exactly
/// three get through.
pub(crate) async fn ledger_77_concurrent_calls_use_a_grant_at_most_its_uses(h: &Harness) {
    let other = h.second_store().await;
    let s = h.session().await;
    let first = h.store.record(gated(h, s, 1)).await.unwrap().invocation;
    let grant = airlock_ledger::Grant {
        reach: airlock_ledger::GrantReach::SameCall,
        uses: Some(3),
        lasts: std::time::Duration::from_secs(600),
        session: false,
    };
    h.store.grant(first.id, "alice", grant).await.unwrap();
    let calls = (0..100).map(|n| {
        let store = if n % 2 == 0 { &h.store } else { &other };
        let mut call = gated(h, s, 1);
        call.call_id = format!("redeem-{n}");
        async move { store.record(call).await.unwrap().invocation.state }
    });
    let states = futures::future::join_all(calls).await;
    let through = states.iter().filter(|s| **s == S::Pending).count();
    assert_eq!(through, 3, "{states:?}");
    assert_eq!(states.len() - through, 97);
}

/// LEDGER-79: a delegation is in force from the ledger's time until its end, then no longer;
/// one to oneself, or ending before it starts, is refused.
pub(crate) async fn ledger_79_a_delegation_holds_for_its_window(h: &Harness) {
    let hour = std::time::Duration::from_secs(3600);
    let delegate = |from: &str, lasts| h.store.delegate(from.into(), "dave".into(), lasts);
    let given = delegate("alice", hour).await.unwrap();
    assert_eq!(given.until, h.clock_now() + hour, "from the ledger's time");
    let held = h.store.delegations_to("dave".into()).await.unwrap();
    assert_eq!(held, vec![given]);
    assert!(
        h.store
            .delegations_to("eve".into())
            .await
            .unwrap()
            .is_empty()
    );
    for (from, lasts) in [("dave", hour), ("bob", std::time::Duration::ZERO)] {
        assert!(matches!(
            delegate(from, lasts).await,
            Err(LedgerError::Invalid(_))
        ));
    }
    h.clock.advance(std::time::Duration::from_secs(3601));
    assert!(
        h.store
            .delegations_to("dave".into())
            .await
            .unwrap()
            .is_empty()
    );
}

/// LEDGER-77: a call recorded as not grantable (its tool names its approvers) parks whatever
/// grant covers it, and uses none.
pub(crate) async fn ledger_77_a_call_not_grantable_uses_no_grant(h: &Harness) {
    let s = h.session().await;
    let first = h.store.record(gated(h, s, 1)).await.unwrap().invocation;
    let grant = airlock_ledger::Grant {
        reach: airlock_ledger::GrantReach::SameCall,
        uses: Some(1),
        lasts: std::time::Duration::from_secs(600),
        session: false,
    };
    h.store.grant(first.id, "alice", grant).await.unwrap();
    let mut named = gated(h, s, 1);
    named.grantable = false;
    let parked = h.store.record(named).await.unwrap().invocation;
    assert_eq!(parked.state, S::AwaitingApproval);
    let through = h.store.record(gated(h, s, 1)).await.unwrap().invocation;
    assert_eq!(
        through.state,
        S::Pending,
        "the use was left for a call that may take it"
    );
}
