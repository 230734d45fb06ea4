//! Approvers on the one path (docs/rules.md POLICY-61, POLICY-63), on both backends, with two
//! gateways on one database standing for two replicas: a call nobody decided in time is
//! escalated once, whichever replicas run the pass, and its escalation's people may then
//! decide it where they could not before.

use airlock_ledger::LedgerError;
use airlock_runtime::GatewayError;
use airlock_runtime::decisions;
use airlock_spec::{Approvers, Escalation};

use super::*;

/// POLICY-63: escalated once across two replicas; `carol` may decide only once escalated.
pub(super) async fn a_call_nobody_decided_is_escalated_once_across_replicas(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some(location) = location(backend, &dir).await else {
        return;
    };
    let approvers = Approvers {
        deciders: vec!["alice".into()],
        escalate: Some(Escalation {
            after: Duration::ZERO,
            to: vec!["carol".into()],
        }),
        ..Approvers::default()
    };
    let gated = Policy {
        approvers,
        ..policy(Approval::Always)
    };
    let replica = |store| {
        let others: [ToolSpec; 0] = [];
        counter_gateway(
            store,
            gated.clone(),
            "",
            others,
            tempfile::tempdir().unwrap(),
        )
    };
    let a = replica(open(&location, StoreConfig::default()).await);
    let b = replica(open(&location, StoreConfig::default()).await);
    let ctx = a.ctx("late").await;
    let outcome = a.gateway.call(&ctx, "count", json!({"amount": 1})).await;
    let id = expect(outcome.unwrap(), OutcomeKind::Parked).id;
    let early = decisions::decide(&a.gateway, id, "carol", Decision::Approve, "api").await;
    match early {
        Err(GatewayError::Ledger(LedgerError::DecisionRefused { reason, .. })) => {
            assert!(
                reason.contains("not one of this call's deciders"),
                "{reason}"
            );
        }
        other => panic!("carol may not decide before the escalation, got {other:?}"),
    }
    let (on_a, on_b) = tokio::join!(
        decisions::escalations::escalate_due(&a.gateway),
        decisions::escalations::escalate_due(&b.gateway),
    );
    assert_eq!(on_a.unwrap() + on_b.unwrap(), 1, "escalated once");
    assert_eq!(
        decisions::escalations::escalate_due(&b.gateway)
            .await
            .unwrap(),
        0
    );
    assert!(a.gateway.store().escalated(id).await.unwrap());
    let row = decisions::decide(&b.gateway, id, "carol", Decision::Approve, "api").await;
    assert_eq!(row.unwrap().state, InvocationState::Approved);
}
