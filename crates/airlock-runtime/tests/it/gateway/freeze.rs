//! The kill switch on the one path (docs/rules.md POLICY-51 … POLICY-55), on both backends,
//! with two gateways on one database standing for two replicas: a freeze made through one is
//! refused by the other once its copy is refreshed, and by its own refresh loop within a
//! bounded wait; a frozen call is recorded `denied` by the freeze and never runs; decisions that
//! would let a frozen call run are refused while denials are taken; an approved call waits the
//! freeze out and runs once it is lifted.

use airlock_ledger::{FREEZE, FreezeTarget, LedgerError};
use airlock_runtime::GatewayError;
use airlock_runtime::decisions;
use airlock_runtime::freeze::Covered;

use super::*;

/// Two gateways (replicas A and B) on one fresh ledger, `count` gated by `approval` on both.
async fn replicas(
    backend: Backend,
    approval: Approval,
    dir: &tempfile::TempDir,
) -> Option<(Fixture, Fixture)> {
    let location = location(backend, dir).await?;
    let a = open(&location, StoreConfig::default()).await;
    let b = open(&location, StoreConfig::default()).await;
    let fixture = |store| {
        let others: [ToolSpec; 0] = [];
        counter_gateway(
            store,
            policy(approval),
            "",
            others,
            tempfile::tempdir().unwrap(),
        )
    };
    Some((fixture(a), fixture(b)))
}

/// POLICY-52: a freeze made on replica B refuses replica A's next call once A's copy is
/// refreshed: recorded `denied` in the freeze's name, with its reason, and never run. Lifting
/// it restores the call.
pub(super) async fn a_freeze_on_one_replica_refuses_the_next_call_on_another(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some((a, b)) = replicas(backend, Approval::Never, &dir).await else {
        return;
    };
    let tool = FreezeTarget::Tool("count".into());
    b.gateway
        .freezes()
        .freeze(tool.clone(), "incident 7", "ops")
        .await
        .unwrap();
    a.gateway.freezes().refresh().await.unwrap();
    let ctx = a.ctx("c1").await;
    let refused = a
        .gateway
        .call(&ctx, "count", json!({"amount": 1}))
        .await
        .unwrap();
    let row = expect(refused, OutcomeKind::Denied);
    let decision = row.decision.unwrap();
    assert_eq!(decision.by, FREEZE);
    let reason = decision.reason.unwrap();
    assert!(
        reason.contains("tool `count` is frozen by ops (incident 7)"),
        "{reason}"
    );
    assert_eq!(a.runs(), 0);
    b.gateway.freezes().unfreeze(tool, "ops").await.unwrap();
    a.gateway.freezes().refresh().await.unwrap();
    let ctx = a.ctx("c2").await;
    let ran = a
        .gateway
        .call(&ctx, "count", json!({"amount": 1}))
        .await
        .unwrap();
    assert_eq!(
        expect(ran, OutcomeKind::Completed).state,
        InvocationState::Succeeded
    );
    assert_eq!(a.runs(), 1);
}

/// POLICY-51: a replica's refresh loop brings another replica's freeze in within a bounded
/// wait, and every kind of target covers what it names and nothing else.
pub(super) async fn the_refresh_loop_brings_in_another_replicas_freeze(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some((a, b)) = replicas(backend, Approval::Never, &dir).await else {
        return;
    };
    let stop = tokio_util::sync::CancellationToken::new();
    let watch = Arc::clone(a.gateway.freezes());
    let every = Duration::from_millis(10);
    let looping = tokio::spawn({
        let stop = stop.clone();
        async move { watch.run(every, stop).await }
    });
    let principal = FreezeTarget::Principal("eve".into());
    b.gateway
        .freezes()
        .freeze(principal, "compromised", "ops")
        .await
        .unwrap();
    let spec = a
        .gateway
        .scope(&ScopeId::Gateway)
        .unwrap()
        .get("count")
        .unwrap()
        .clone();
    let scope = ScopeId::Gateway;
    let by = |who: &'static str| Covered::call(&scope, Some(who), &spec);
    let arrived = tokio::time::timeout(Duration::from_secs(10), async {
        while a.gateway.freezes().covering(&by("eve")).is_none() {
            tokio::time::sleep(every).await;
        }
    });
    arrived.await.expect("the freeze reached replica A");
    assert!(
        a.gateway.freezes().covering(&by("ada")).is_none(),
        "only eve is frozen"
    );
    let agent = ScopeId::Agent("support".into());
    let in_agent = Covered::call(&agent, Some("ada"), &spec);
    assert!(a.gateway.freezes().covering(&in_agent).is_none());
    b.gateway
        .freezes()
        .freeze(FreezeTarget::Agent("support".into()), "loops", "ops")
        .await
        .unwrap();
    a.gateway.freezes().refresh().await.unwrap();
    assert!(a.gateway.freezes().covering(&in_agent).is_some());
    assert!(
        a.gateway.freezes().covering(&by("ada")).is_none(),
        "the gateway scope is not"
    );
    stop.cancel();
    looping.await.unwrap();
}

/// POLICY-53, POLICY-54: while everything is frozen, approving or answering a parked call is
/// refused naming the freeze, a denial is taken; an approved call the freeze catches before it
/// runs stays approved, and runs once when the freeze is lifted.
pub(super) async fn decisions_wait_out_a_freeze_and_approved_calls_run_after_it(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some((a, b)) = replicas(backend, Approval::Always, &dir).await else {
        return;
    };
    let store = Arc::clone(a.gateway.store());
    let mut parked = Vec::new();
    for call_id in ["p1", "p2", "p3"] {
        let ctx = a.ctx(call_id).await;
        let outcome = a
            .gateway
            .call(&ctx, "count", json!({"amount": 1}))
            .await
            .unwrap();
        parked.push(expect(outcome, OutcomeKind::Parked).id);
    }
    // p3 is approved before the freeze, and caught by it before it runs.
    store
        .decide(parked[2], "bob", Decision::Approve)
        .await
        .unwrap();
    b.gateway
        .freezes()
        .freeze(FreezeTarget::Everything, "audit in progress", "ops")
        .await
        .unwrap();
    let refused = decisions::decide(&a.gateway, parked[0], "bob", Decision::Approve, "api").await;
    match refused {
        Err(GatewayError::Ledger(LedgerError::DecisionRefused { reason, .. })) => {
            assert!(reason.contains("everything is frozen by ops"), "{reason}");
        }
        other => panic!("an approval under a freeze must be refused, got {other:?}"),
    }
    let deny = Decision::Deny {
        reason: "no".into(),
    };
    let denied = decisions::record(store.as_ref(), &[], parked[1], "bob", deny, "cli").await;
    assert_eq!(denied.unwrap().state, InvocationState::Denied);
    a.gateway.freezes().refresh().await.unwrap();
    let held = a.gateway.continue_approved(parked[2]).await.unwrap();
    assert_eq!(held.invocation().state, InvocationState::Approved);
    assert_eq!(a.runs(), 0);
    b.gateway
        .freezes()
        .unfreeze(FreezeTarget::Everything, "ops")
        .await
        .unwrap();
    a.gateway.freezes().refresh().await.unwrap();
    let ran = a.gateway.continue_approved(parked[2]).await.unwrap();
    assert_eq!(ran.invocation().state, InvocationState::Succeeded);
    let approved = decisions::decide(&a.gateway, parked[0], "bob", Decision::Approve, "api").await;
    assert_eq!(approved.unwrap().state, InvocationState::Approved);
}

/// POLICY-53: the decisions worker runs an approved call the freeze held back as soon as the
/// freeze is lifted — woken by the lift, not by its safety-net poll (an hour here).
pub(super) async fn the_worker_runs_a_held_approval_when_the_freeze_is_lifted(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some((a, _b)) = replicas(backend, Approval::Always, &dir).await else {
        return;
    };
    let ctx = a.ctx("held").await;
    let outcome = a
        .gateway
        .call(&ctx, "count", json!({"amount": 1}))
        .await
        .unwrap();
    let id = expect(outcome, OutcomeKind::Parked).id;
    a.gateway
        .freezes()
        .freeze(FreezeTarget::Everything, "change window", "ops")
        .await
        .unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let worker = tokio::spawn(airlock_runtime::decisions::worker::work_polling_every(
        Arc::clone(&a.gateway),
        stop.clone(),
        Duration::from_secs(3600),
    ));
    // Decided in the ledger before the freeze reached the decider (the worker is woken by it).
    let store = Arc::clone(a.gateway.store());
    let approved = store.decide(id, "bob", Decision::Approve).await.unwrap();
    let seen = Some(approved.version);
    let deadline = tokio::time::Instant::now() + Duration::from_millis(300);
    let held = store.wait_for_change(id, seen, deadline).await.unwrap();
    assert_eq!(
        held.state,
        InvocationState::Approved,
        "held back by the freeze"
    );
    a.gateway
        .freezes()
        .unfreeze(FreezeTarget::Everything, "ops")
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut row = held;
    while !row.state.is_terminal() && tokio::time::Instant::now() < deadline {
        row = store
            .wait_for_change(id, Some(row.version), deadline)
            .await
            .unwrap();
    }
    assert_eq!(row.state, InvocationState::Succeeded, "{row:?}");
    assert_eq!(a.runs(), 1);
    stop.cancel();
    worker.await.unwrap();
}

/// POLICY-53: approved calls a freeze holds back never crowd out the approvals behind them —
/// with more held calls than one look lists, a later approval of a caller nobody froze runs.
pub(super) async fn held_approvals_do_not_starve_the_worker(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some((a, _b)) = replicas(backend, Approval::Always, &dir).await else {
        return;
    };
    let store = Arc::clone(a.gateway.store());
    let frozen = FreezeTarget::Principal("ada".into());
    a.gateway
        .freezes()
        .freeze(frozen, "token leaked", "ops")
        .await
        .unwrap();
    // Approved in the ledger directly: the freeze refuses new calls, not these older rows.
    let principal = Some("ada".to_owned());
    let session = a.gateway.open_session("test", principal, &ScopeId::Gateway);
    let session = session.await.unwrap();
    for n in 0..70 {
        let mut call = NewInvocation::new(session, "test", "count", json!({"amount": n}), "d");
        call.approval = Approval::Always;
        call.principal = Some("ada".into());
        call.call_id = format!("held-{n}");
        let row = store.record(call).await.unwrap().invocation;
        store
            .decide(row.id, "bob", Decision::Approve)
            .await
            .unwrap();
    }
    let ctx = ctx_on(&a.gateway, "bea", "free").await;
    let outcome = a.gateway.call(&ctx, "count", json!({"amount": 1})).await;
    let id = expect(outcome.unwrap(), OutcomeKind::Parked).id;
    let stop = tokio_util::sync::CancellationToken::new();
    let worker = tokio::spawn(airlock_runtime::decisions::worker::work_polling_every(
        Arc::clone(&a.gateway),
        stop.clone(),
        Duration::from_millis(50),
    ));
    let approved = store.decide(id, "bob", Decision::Approve).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut row = approved;
    while !row.state.is_terminal() && tokio::time::Instant::now() < deadline {
        row = store
            .wait_for_change(id, Some(row.version), deadline)
            .await
            .unwrap();
    }
    assert_eq!(row.state, InvocationState::Succeeded, "{row:?}");
    assert_eq!(a.runs(), 1, "only bea's call ran");
    stop.cancel();
    worker.await.unwrap();
}
