//! Ambiguous outcomes (docs/rules.md LEDGER-19, LEDGER-20): an unanswered request of an
//! at-most-once call parks in doubt instead of failing, and a finisher whose lease the sweeper
//! took still records the answer it holds, unless a person settled the row first.

use std::time::Duration;

use airlock_ledger::{
    Decision, Effect, InvocationId, InvocationState as S, LedgerError, RELAYED_CALL_ID, Resolution,
    SourceKind, ToolError, ToolErrorKind,
};
use serde_json::json;

use crate::harness::{Harness, LEASE, TTL};

/// A running at-most-once api call claimed by `w1`.
async fn running(h: &Harness, effect: Effect) -> InvocationId {
    let s = h.session().await;
    let mut call = h.call(s, "erp_create_invoice", json!({"cents": 500}));
    call.source_kind = SourceKind::Api;
    call.effect = effect;
    let row = h.store.record_and_claim(call, "w1", LEASE).await.unwrap();
    assert_eq!(row.invocation.state, S::Running);
    row.invocation.id
}

fn no_answer() -> ToolError {
    ToolError::new(ToolErrorKind::Timeout, "no answer in 2 s").into_unanswered()
}

/// How many events the audit chain holds for `id`.
async fn chain_states(h: &Harness, id: InvocationId) -> i64 {
    h.raw
        .count(&format!(
            "SELECT COUNT(*) FROM ledger_events WHERE entity_id = '{id}'"
        ))
        .await
}

/// LEDGER-19: the finisher's unanswered failure of an at-most-once call parks the row in doubt
/// (audited, with the error, the lease owner and the approval TTL), never `failed`; an
/// answered failure and an idempotent call's unanswered one still fail.
pub(crate) async fn ledger_19_unanswered_at_most_once_parks_in_doubt(h: &Harness) {
    let id = running(h, Effect::AtMostOnce).await;
    let doubted = h.store.finish(id, "w1", Err(no_answer())).await.unwrap();
    assert_eq!(doubted.state, S::InDoubt);
    assert_eq!(doubted.expires_at, Some(h.clock_now() + TTL));
    assert_eq!(doubted.lease.as_ref().unwrap().owner, "w1");
    let stored = doubted.error.clone().unwrap();
    assert_eq!(
        (stored.kind, stored.message.as_str()),
        (ToolErrorKind::Timeout, "no answer in 2 s")
    );
    assert_eq!(
        h.store.get(id).await.unwrap(),
        doubted,
        "read back as returned"
    );
    assert_eq!(h.store.in_doubt().await.unwrap()[0].id, id);
    assert_eq!(chain_states(h, id).await, 3, "recorded, running, in doubt");
    let audit = h.store.verify().await.unwrap();
    assert!(audit.first_break.is_none(), "{audit:?}");

    // It did not run: a person says so, and the re-run's answer replaces the error.
    h.store
        .decide(
            id,
            "olga",
            Decision::Resolve {
                resolution: Resolution::DidNotRun,
                note: "no invoice upstream".into(),
            },
        )
        .await
        .unwrap();
    h.store.claim(id, "w1", LEASE).await.unwrap();
    let done = h
        .store
        .finish(id, "w1", Ok(json!({"id": 7})))
        .await
        .unwrap();
    assert_eq!((done.state, done.error), (S::Succeeded, None));

    let answered = running(h, Effect::AtMostOnce).await;
    let status = ToolError::new(ToolErrorKind::UpstreamError, "the server answered 500");
    let row = h.store.finish(answered, "w1", Err(status)).await.unwrap();
    assert_eq!(row.state, S::Failed, "an answer is not ambiguous");

    let idempotent = running(h, Effect::Idempotent).await;
    let row = h
        .store
        .finish(idempotent, "w1", Err(no_answer()))
        .await
        .unwrap();
    assert_eq!(
        row.state,
        S::Failed,
        "an idempotent call is safe to call again"
    );
}

/// LEDGER-20: the sweeper marks a call in doubt while it is still in flight (a stall longer
/// than the lease); the finisher's answer then wins, as an audited transition. Once a person
/// settled the row, the late answer is refused and the person's decision stands.
pub(crate) async fn ledger_20_late_answer_wins_over_the_sweep(h: &Harness) {
    let id = running(h, Effect::AtMostOnce).await;
    h.clock.advance(LEASE + Duration::from_secs(1));
    assert_eq!(h.store.sweep(h.clock_now()).await.unwrap().in_doubt, [id]);
    assert!(matches!(
        h.store.renew_lease(id, "w1", LEASE).await,
        Err(LedgerError::LeaseLost {
            state: S::InDoubt,
            ..
        })
    ));
    // An unanswered failure on a row already in doubt changes nothing.
    let still = h.store.finish(id, "w1", Err(no_answer())).await.unwrap();
    assert_eq!((still.state, still.version), (S::InDoubt, 3));
    let done = h
        .store
        .finish(id, "w1", Ok(json!({"id": 8})))
        .await
        .unwrap();
    assert_eq!(done.state, S::Succeeded);
    assert_eq!(done.result, Some(json!({"id": 8})));
    assert_eq!(
        chain_states(h, id).await,
        4,
        "recorded, running, in doubt, succeeded"
    );
    let audit = h.store.verify().await.unwrap();
    assert!(audit.first_break.is_none(), "{audit:?}");

    let resolved = running(h, Effect::AtMostOnce).await;
    h.clock.advance(LEASE + Duration::from_secs(1));
    h.store.sweep(h.clock_now()).await.unwrap();
    let ran = Decision::Resolve {
        resolution: Resolution::Ran,
        note: "the invoice exists".into(),
    };
    let settled = h.store.decide(resolved, "olga", ran).await.unwrap();
    assert!(matches!(
        h.store.finish(resolved, "w1", Ok(json!({"id": 9}))).await,
        Err(LedgerError::LeaseLost { .. } | LedgerError::AlreadyFinished { .. })
    ));
    assert_eq!(h.store.get(resolved).await.unwrap(), settled);
}

/// LEDGER-87: a request relayed to a principal's MCP client is settled with that client's
/// answer by whichever process received it, not only the lease holder; another principal's
/// answer finds no such row, and a row settled once is not settled again.
pub(crate) async fn ledger_87_a_relayed_request_is_settled_by_its_principals_answer(h: &Harness) {
    // A tool call's row is never settled by a client's answer, even its principal's.
    let s = h.session().await;
    let mut call = h.call(s, "erp_create_invoice", json!({"cents": 5}));
    call.principal = Some("alice".into());
    let call = h
        .store
        .record_and_claim(call, "replica-a", LEASE)
        .await
        .unwrap();
    let call = call.invocation.id;
    let forged = h.store.answer_relayed(call, "alice", Ok(json!({}))).await;
    assert!(
        matches!(forged, Err(LedgerError::NotFound(got)) if got == call),
        "{forged:?}"
    );
    // Nor is a row that only borrows the call id: its tool must be a client's request.
    let s = h.session().await;
    let mut borrowed = h.call(s, "erp_create_invoice", json!({"cents": 6}));
    borrowed.call_id = RELAYED_CALL_ID.into();
    borrowed.principal = Some("alice".into());
    let borrowed = h
        .store
        .record_and_claim(borrowed, "replica-a", LEASE)
        .await
        .unwrap();
    let borrowed = borrowed.invocation.id;
    let forged = h
        .store
        .answer_relayed(borrowed, "alice", Ok(json!({})))
        .await;
    assert!(
        matches!(forged, Err(LedgerError::NotFound(_))),
        "{forged:?}"
    );
    let s = h.session().await;
    let mut asked = h.call(s, "elicitation/create", json!({"message": "Name?"}));
    asked.call_id = RELAYED_CALL_ID.into();
    asked.principal = Some("alice".into());
    let id = h
        .store
        .record_and_claim(asked, "replica-a", LEASE)
        .await
        .unwrap()
        .invocation
        .id;
    let answer = json!({"action": "accept", "content": {"name": "Al"}});
    let theirs = h
        .store
        .answer_relayed(id, "mallory", Ok(answer.clone()))
        .await;
    assert!(
        matches!(theirs, Err(LedgerError::NotFound(got)) if got == id),
        "{theirs:?}"
    );
    assert_eq!(h.store.get(id).await.unwrap().state, S::Running);
    let settled = h
        .store
        .answer_relayed(id, "alice", Ok(answer.clone()))
        .await
        .unwrap();
    assert_eq!(
        (settled.state, settled.result),
        (S::Succeeded, Some(answer))
    );
    let again = h.store.answer_relayed(id, "alice", Ok(json!({}))).await;
    assert!(
        matches!(again, Err(LedgerError::AlreadyFinished { .. })),
        "{again:?}"
    );
    // The lease holder's own finish after the answer changes nothing either.
    let late = h.store.finish(id, "replica-a", Ok(json!({}))).await;
    assert!(
        matches!(late, Err(LedgerError::AlreadyFinished { .. })),
        "{late:?}"
    );
    // A refusal settles the row failed, with the client's error.
    let s = h.session().await;
    let mut refused = h.call(s, "sampling/createMessage", json!({"maxTokens": 5}));
    refused.call_id = RELAYED_CALL_ID.into();
    refused.principal = Some("alice".into());
    let id = h
        .store
        .record_and_claim(refused, "replica-a", LEASE)
        .await
        .unwrap()
        .invocation
        .id;
    let error = ToolError::new(ToolErrorKind::BadRequest, "the user declined");
    let failed = h
        .store
        .answer_relayed(id, "alice", Err(error))
        .await
        .unwrap();
    assert_eq!(failed.state, S::Failed);
    let audit = h.store.verify().await.unwrap();
    assert!(audit.first_break.is_none(), "{audit:?}");
}
