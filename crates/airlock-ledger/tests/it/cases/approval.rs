//! Approval policies (docs/rules.md POLICY-1 to POLICY-6).

use std::time::Duration;

use airlock_ledger::{Approval, Decision, InvocationState as S, LedgerError, NewInvocation};
use serde_json::json;

use crate::harness::{Harness, LEASE, TTL};

fn with(mut call: NewInvocation, approval: Approval) -> NewInvocation {
    call.approval = approval;
    call
}

/// POLICY-1: `always` parks every call with `expires_at` = now + TTL; nothing runs.
pub(crate) async fn policy_1_always_parks(h: &Harness) {
    let s = h.session().await;
    for n in 0..2 {
        let row = h
            .store
            .record(with(
                h.call(s, "refund", json!({"amount": 5})),
                Approval::Always,
            ))
            .await
            .unwrap()
            .invocation;
        assert_eq!(row.state, S::AwaitingApproval, "call {n}");
        assert_eq!(row.expires_at, Some(h.clock_now() + TTL));
        let err = h.store.claim(row.id, "w1", LEASE).await.unwrap_err();
        assert!(
            matches!(
                err,
                LedgerError::WrongState {
                    actual: S::AwaitingApproval,
                    ..
                }
            ),
            "{err}"
        );
    }
    // A per-call TTL overrides the store's.
    let mut call = with(h.call(s, "refund", json!({"amount": 6})), Approval::Always);
    call.approval_ttl = Some(Duration::from_secs(60));
    let row = h.store.record(call).await.unwrap().invocation;
    assert_eq!(
        row.expires_at,
        Some(h.clock_now() + Duration::from_secs(60))
    );
}

/// POLICY-2: `never` runs at once; the row records no approval.
pub(crate) async fn policy_2_never_runs_at_once(h: &Harness) {
    let s = h.session().await;
    let row = h
        .store
        .record(h.call(s, "lookup", json!({})))
        .await
        .unwrap()
        .invocation;
    assert_eq!(row.state, S::Pending);
    assert_eq!(
        (row.decision.clone(), row.approval_ref, row.expires_at),
        (None, None, None)
    );
    let running = h.store.claim(row.id, "w1", LEASE).await.unwrap();
    assert_eq!(running.state, S::Running);
    assert!(running.decision.is_none());
}

/// POLICY-3: `once`: the first call parks; after approval an identical call (key order ignored) in
/// the same scope runs without parking.
pub(crate) async fn policy_3_once_identical_call_runs(h: &Harness) {
    let s = h.session_for(None).await;
    let first = h
        .store
        .record(with(
            h.call(s, "refund", json!({"amount": 5, "currency": "EUR"})),
            Approval::Once,
        ))
        .await
        .unwrap()
        .invocation;
    assert_eq!(first.state, S::AwaitingApproval);
    // Before the approval an identical call parks too.
    let early = h
        .store
        .record(with(
            h.call(s, "refund", json!({"currency": "EUR", "amount": 5})),
            Approval::Once,
        ))
        .await
        .unwrap()
        .invocation;
    assert_eq!(early.state, S::AwaitingApproval);
    h.store
        .decide(first.id, "bob", Decision::Approve)
        .await
        .unwrap();
    let again = h
        .store
        .record(with(
            h.call(s, "refund", json!({"currency": "EUR", "amount": 5})),
            Approval::Once,
        ))
        .await
        .unwrap()
        .invocation;
    assert_eq!(again.state, S::Pending);
    assert_eq!(again.approval_ref, Some(first.id));
    assert_eq!(again.arguments_hash, first.arguments_hash);
}

/// POLICY-3: `once` with different arguments parks again (5 never approves 5000).
pub(crate) async fn policy_3_once_different_arguments_park(h: &Harness) {
    let s = h.session().await;
    let five = h
        .store
        .record(with(
            h.call(s, "refund", json!({"amount": 5})),
            Approval::Once,
        ))
        .await
        .unwrap()
        .invocation;
    h.store
        .decide(five.id, "bob", Decision::Approve)
        .await
        .unwrap();
    let big = h
        .store
        .record(with(
            h.call(s, "refund", json!({"amount": 5000})),
            Approval::Once,
        ))
        .await
        .unwrap()
        .invocation;
    assert_eq!(big.state, S::AwaitingApproval);
    let other_tool = h
        .store
        .record(with(
            h.call(s, "charge", json!({"amount": 5})),
            Approval::Once,
        ))
        .await
        .unwrap()
        .invocation;
    assert_eq!(other_tool.state, S::AwaitingApproval);
}

/// POLICY-4: (ledger side) Each MCP call is its own session: `once` is scoped to the principal, so
/// the same principal's identical call runs and another principal's parks.
pub(crate) async fn policy_4_once_scoped_to_principal(h: &Harness) {
    let args = json!({"page": "home"});
    let s1 = h.session_for(Some("token:ci-bot")).await;
    let first = h
        .store
        .record(with(
            h.call(s1, "cms__publish", args.clone()),
            Approval::Once,
        ))
        .await
        .unwrap()
        .invocation;
    assert_eq!(first.principal.as_deref(), Some("token:ci-bot"));
    h.store
        .decide(first.id, "editor", Decision::Approve)
        .await
        .unwrap();
    let s2 = h.session_for(Some("token:ci-bot")).await;
    let same = h
        .store
        .record(with(
            h.call(s2, "cms__publish", args.clone()),
            Approval::Once,
        ))
        .await
        .unwrap()
        .invocation;
    assert_eq!(
        (same.state, same.approval_ref),
        (S::Pending, Some(first.id))
    );
    let s3 = h.session_for(Some("token:someone-else")).await;
    let other = h
        .store
        .record(with(
            h.call(s3, "cms__publish", args.clone()),
            Approval::Once,
        ))
        .await
        .unwrap()
        .invocation;
    assert_eq!(other.state, S::AwaitingApproval);
    // Sessions without a principal never match each other.
    let anon1 = h.session_for(None).await;
    let anon2 = h.session_for(None).await;
    let a = h
        .store
        .record(with(
            h.call(anon1, "cms__publish", json!({"p": 1})),
            Approval::Once,
        ))
        .await
        .unwrap()
        .invocation;
    h.store
        .decide(a.id, "editor", Decision::Approve)
        .await
        .unwrap();
    let b = h
        .store
        .record(with(
            h.call(anon2, "cms__publish", json!({"p": 1})),
            Approval::Once,
        ))
        .await
        .unwrap()
        .invocation;
    assert_eq!(b.state, S::AwaitingApproval);
}

/// POLICY-5: An approved row executes without evaluating the policy again.
pub(crate) async fn policy_5_approved_row_runs_without_policy(h: &Harness) {
    let s = h.session().await;
    let row = h
        .store
        .record(with(
            h.call(s, "wire", json!({"amount": 1})),
            Approval::Always,
        ))
        .await
        .unwrap()
        .invocation;
    h.store
        .decide(row.id, "bob", Decision::Approve)
        .await
        .unwrap();
    let running = h.store.claim(row.id, "w1", LEASE).await.unwrap();
    assert_eq!(
        (running.state, running.approval),
        (S::Running, Approval::Always)
    );
    let done = h
        .store
        .finish(row.id, "w1", Ok(json!("wired")))
        .await
        .unwrap();
    assert_eq!(done.decision.unwrap().by, "bob");
}

/// POLICY-6: An approval is bound to the arguments hash and the definitions digest.
pub(crate) async fn policy_6_approval_bound_to_digest_and_arguments(h: &Harness) {
    let s = h.session().await;
    let first = h
        .store
        .record(with(
            h.call(s, "refund", json!({"amount": 5})),
            Approval::Once,
        ))
        .await
        .unwrap()
        .invocation;
    h.store
        .decide(first.id, "bob", Decision::Approve)
        .await
        .unwrap();
    let mut changed = with(h.call(s, "refund", json!({"amount": 5})), Approval::Once);
    changed.definitions_digest = "digest-2".into();
    let row = h.store.record(changed).await.unwrap().invocation;
    assert_eq!(
        row.state,
        S::AwaitingApproval,
        "a new declaration needs a new approval"
    );

    // Editing an approved row's arguments in the database does not let it run.
    let parked = h
        .store
        .record(with(
            h.call(s, "refund", json!({"amount": 7})),
            Approval::Always,
        ))
        .await
        .unwrap()
        .invocation;
    h.store
        .decide(parked.id, "bob", Decision::Approve)
        .await
        .unwrap();
    h.raw
        .exec(&format!(
            "UPDATE invocations SET arguments = '{{\"amount\":7000}}' WHERE id = '{}'",
            parked.id
        ))
        .await;
    let err = h.store.claim(parked.id, "w1", LEASE).await.unwrap_err();
    assert!(matches!(err, LedgerError::Corrupt { .. }), "{err}");
}
