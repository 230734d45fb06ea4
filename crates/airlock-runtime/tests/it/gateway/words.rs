//! States in words (docs/rules.md POLICY-15, DECIDE-4, MCP-10): an expired call is `expired`,
//! not `denied`, wherever it is read; a call in doubt given up as `abandoned` never runs and
//! reads back as abandoned, with who gave it up and why.

use airlock_mcp::{Caller, HostOutcome, ToolHost};
use airlock_runtime::ledger::{Resolution, SourceKind};

use super::*;

const LATER: Duration = Duration::from_secs(30 * 24 * 3600);

/// A call of `count` by `ada` through the MCP host, parked for approval.
async fn parked_for(f: &Fixture, ada: &Caller) -> String {
    let parked = f
        .host()
        .call_tool(&ScopeId::Gateway, ada, "count", json!({"amount": 1}))
        .await
        .unwrap();
    assert!(parked.is_parked(), "{parked:?}");
    parked.invocation_id
}

fn ada() -> Caller {
    Caller {
        principal: "ada".into(),
        groups: Vec::new(),
        ..Default::default()
    }
}

/// POLICY-15: nobody decided in time → the await answer, a retried call and the outcome all
/// say `expired`; the refusal the model reads is still `approval expired`.
pub(super) async fn an_expired_call_reads_back_as_expired(backend: Backend) {
    let Some(f) = fixture(backend, policy(Approval::Always), "").await else {
        return;
    };
    let ada = ada();
    let id = parked_for(&f, &ada).await;
    let ctx = f.ctx("x1").await;
    let direct = expect(
        f.gateway
            .call(&ctx, "count", json!({"amount": 2}))
            .await
            .unwrap(),
        OutcomeKind::Parked,
    );
    let later = time::OffsetDateTime::now_utc() + LATER;
    assert_eq!(
        f.gateway.store().sweep(later).await.unwrap().expired.len(),
        2
    );

    let awaited = f
        .host()
        .await_decision(&ScopeId::Gateway, &ada, &id, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(
        awaited.outcome,
        HostOutcome::Expired {
            reason: "approval expired".into()
        }
    );
    assert_eq!(awaited.decided_by, None, "nobody decided an expired call");
    // A retry of the same call id is answered from its row: expired, not denied.
    let again = f
        .gateway
        .call(&ctx, "count", json!({"amount": 2}))
        .await
        .unwrap();
    assert_eq!(again.invocation().id, direct.id);
    assert_eq!(again.kind(), OutcomeKind::Expired);
    assert_eq!(f.runs(), 0);
}

/// DECIDE-4: a call in doubt abandoned with a reason is terminal: the await answer names who
/// gave it up and why, a claim of it (a waiter, the worker) runs nothing, and a retry of its
/// call id reads `abandoned`.
pub(super) async fn an_abandoned_call_never_runs(backend: Backend) {
    let Some(f) = fixture(backend, policy(Approval::Never), "").await else {
        return;
    };
    let store = f.gateway.store();
    let (session, row) = f
        .in_doubt("count", json!({"amount": 1}), SourceKind::Local)
        .await;
    let reason = "the vendor has no record; refunded by hand";
    let abandon = Decision::Resolve {
        resolution: Resolution::Abandoned,
        note: reason.into(),
    };
    let settled = store.decide(row.id, "olga", abandon).await.unwrap();
    assert_eq!(settled.state, InvocationState::Abandoned);

    let awaited = f
        .host()
        .await_decision(
            &ScopeId::Gateway,
            &ada(),
            &row.id.to_string(),
            Duration::ZERO,
        )
        .await
        .unwrap();
    assert_eq!(
        awaited.outcome,
        HostOutcome::Abandoned {
            reason: reason.into()
        }
    );
    assert_eq!(awaited.decided_by.as_deref(), Some("olga"));
    let claimed = f.gateway.continue_approved(row.id).await.unwrap();
    assert_eq!(claimed.kind(), OutcomeKind::Abandoned);
    let ctx = CallContext {
        scope: ScopeId::Gateway,
        session,
        call_id: "c1".into(),
        principal: Some("ada".into()),
        groups: None,
        channel: "mcp",
        downstream: Default::default(),
    };
    let again = f
        .gateway
        .call(&ctx, "count", json!({"amount": 1}))
        .await
        .unwrap();
    assert_eq!(again.kind(), OutcomeKind::Abandoned);
    assert_eq!(f.runs(), 0, "an abandoned call never runs");
    assert_eq!(store.get(row.id).await.unwrap().attempts, 1);
}
