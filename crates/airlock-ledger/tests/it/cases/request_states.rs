//! Decisions through a sealed request state (docs/rules.md LEDGER-46, LEDGER-47).

use std::sync::Arc;

use airlock_ledger::{
    Approval, CallKind, Decision, InvocationState as S, LedgerError, SessionId, StateUse,
};
use serde_json::json;

use crate::harness::{Harness, LEASE};

async fn parked(h: &Harness, s: SessionId) -> airlock_ledger::Invocation {
    let mut call = h.call(s, "refund", json!({"amount": 5}));
    call.approval = Approval::Caller;
    h.store.record(call).await.unwrap().invocation
}

fn used(nonce: &str, row: &airlock_ledger::Invocation, decision: Decision) -> StateUse {
    StateUse {
        nonce: nonce.to_owned(),
        invocation: row.id,
        by: "claude".to_owned(),
        decision,
    }
}

/// LEDGER-46: `approval: caller` parks like `always`; the state's use approves and claims in
/// one commit, under the caller's name, and a second use of the same nonce is a replay.
pub(crate) async fn ledger_46_state_approves_and_claims_once(h: &Harness) {
    let s = h.session().await;
    let row = parked(h, s).await;
    assert_eq!(row.state, S::AwaitingApproval);
    let claim = Some(("me".to_owned(), LEASE));
    let claimed = h
        .store
        .decide_once(used("n1", &row, Decision::Approve), claim.clone())
        .await
        .unwrap();
    assert_eq!(claimed.state, S::Running);
    assert_eq!(claimed.decision.as_ref().unwrap().by, "claude");
    assert_eq!(claimed.lease.as_ref().unwrap().owner, "me");
    let again = h
        .store
        .decide_once(used("n1", &row, Decision::Approve), claim)
        .await;
    assert!(
        matches!(again, Err(LedgerError::RequestStateUsed { id }) if id == row.id),
        "{again:?}"
    );
    assert_eq!(h.raw.count("SELECT COUNT(*) FROM request_states").await, 1);
}

/// LEDGER-46: of sixteen concurrent uses of one state exactly one decides; the others are
/// replays (or find the row decided), and nothing is recorded twice.
pub(crate) async fn ledger_46_concurrent_uses_one_wins(h: &Harness) {
    let s = h.session().await;
    let row = parked(h, s).await;
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let store = Arc::clone(&h.store);
        let state = used("same", &row, Decision::Approve);
        tasks.push(tokio::spawn(async move {
            store
                .decide_once(state, Some(("me".to_owned(), LEASE)))
                .await
        }));
    }
    let mut won = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(row) => {
                assert_eq!(row.state, S::Running);
                won += 1;
            }
            Err(LedgerError::RequestStateUsed { .. } | LedgerError::AlreadyDecided { .. }) => {}
            Err(other) => panic!("unexpected refusal: {other}"),
        }
    }
    assert_eq!(won, 1);
    assert_eq!(h.raw.count("SELECT COUNT(*) FROM request_states").await, 1);
}

/// LEDGER-47: a refused use writes nothing — a state for a row someone else already decided
/// is refused with that decision, and its nonce stays unused; a question is answered through
/// a state, and a denial claims nothing.
pub(crate) async fn ledger_47_refused_use_writes_nothing(h: &Harness) {
    let s = h.session().await;
    let row = parked(h, s).await;
    h.store
        .decide(row.id, "bob", Decision::Approve)
        .await
        .unwrap();
    let late = h
        .store
        .decide_once(used("n2", &row, Decision::Approve), None)
        .await;
    assert!(
        matches!(late, Err(LedgerError::AlreadyDecided { ref by, .. }) if by == "bob"),
        "{late:?}"
    );
    assert_eq!(h.raw.count("SELECT COUNT(*) FROM request_states").await, 0);

    let mut question = h.call(s, "ask_human", json!({"question": "Ship it?"}));
    question.kind = CallKind::Question;
    let question = h.store.record(question).await.unwrap().invocation;
    let answer = Decision::Answer {
        text: "yes".to_owned(),
    };
    let answered = h
        .store
        .decide_once(
            used("n3", &question, answer),
            Some(("me".to_owned(), LEASE)),
        )
        .await
        .unwrap();
    assert_eq!(answered.state, S::Succeeded);
    assert_eq!(answered.result, Some(json!({"answer": "yes"})));

    let other = parked(h, h.session().await).await;
    let deny = Decision::Deny {
        reason: "declined at the client".to_owned(),
    };
    let denied = h
        .store
        .decide_once(used("n4", &other, deny), Some(("me".to_owned(), LEASE)))
        .await
        .unwrap();
    assert_eq!(denied.state, S::Denied);
    assert!(denied.lease.is_none());
}

/// A relayed round recorded, claimed and finished with input requests (LEDGER-61).
async fn asked_round(h: &Harness, s: SessionId) -> airlock_ledger::Invocation {
    let mut call = h.call(s, "refund", json!({"amount": 5}));
    call.approval = Approval::Caller;
    let row = h.store.record(call).await.unwrap().invocation;
    let claim = Some(("me".to_owned(), LEASE));
    let running = h
        .store
        .decide_once(used("first", &row, Decision::Approve), claim)
        .await
        .unwrap();
    let asked =
        json!({ airlock_ledger::INPUT_REQUIRED_KEY: {"inputRequests": {}, "requestState": "u1"} });
    h.store.finish(running.id, "me", Ok(asked)).await.unwrap()
}

fn next_round(
    h: &Harness,
    s: SessionId,
    nonce: &str,
    previous: &airlock_ledger::Invocation,
) -> airlock_ledger::NewInvocation {
    let mut call = h.call(s, "refund", json!({"amount": 5}));
    call.approval = Approval::Caller;
    call.follows = Some(airlock_ledger::RoundUse {
        nonce: nonce.to_owned(),
        previous: previous.id,
        by: "claude".to_owned(),
    });
    call
}

/// LEDGER-61, LEDGER-62: a round answered with input requests ends `input_required` (neither
/// a result nor an error); the next round is recorded ungated and claimed with its state's nonce
/// in one commit, a second use of the nonce is a replay that writes nothing, and only a round
/// that ended `input_required` can be followed.
pub(crate) async fn ledger_62_next_round_uses_its_state_once(h: &Harness) {
    let s = h.session().await;
    let first = asked_round(h, s).await;
    assert_eq!(first.state, S::InputRequired);
    assert!(first.error.is_none() && first.result.is_some());
    let s2 = h.session().await;
    let next = next_round(h, s2, "n2", &first);
    let recorded = h.store.record_and_claim(next, "me", LEASE).await.unwrap();
    assert_eq!(recorded.invocation.state, S::Running, "not gated again");
    let rows = h.raw.count("SELECT COUNT(*) FROM invocations").await;
    let s3 = h.session().await;
    let again = h
        .store
        .record_and_claim(next_round(h, s3, "n2", &first), "me", LEASE)
        .await;
    assert!(
        matches!(again, Err(LedgerError::RequestStateUsed { id }) if id == first.id),
        "{again:?}"
    );
    assert_eq!(h.raw.count("SELECT COUNT(*) FROM invocations").await, rows);
    let s4 = h.session().await;
    let of_running = next_round(h, s4, "n3", &recorded.invocation);
    let refused = h.store.record_and_claim(of_running, "me", LEASE).await;
    assert!(
        matches!(refused, Err(LedgerError::WrongState { .. })),
        "{refused:?}"
    );
}

/// LEDGER-62: of sixteen concurrent next rounds with one state exactly one is recorded.
pub(crate) async fn ledger_62_concurrent_next_rounds_one_wins(h: &Harness) {
    let s = h.session().await;
    let first = asked_round(h, s).await;
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let session = h.session().await;
        let next = next_round(h, session, "same", &first);
        let store = Arc::clone(&h.store);
        tasks.push(tokio::spawn(async move {
            store.record_and_claim(next, "me", LEASE).await
        }));
    }
    let mut won = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(recorded) => {
                assert_eq!(recorded.invocation.state, S::Running);
                won += 1;
            }
            Err(LedgerError::RequestStateUsed { .. }) => {}
            Err(other) => panic!("unexpected refusal: {other}"),
        }
    }
    assert_eq!(won, 1);
}
