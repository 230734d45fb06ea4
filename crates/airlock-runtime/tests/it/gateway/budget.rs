//! Budgets on the one path (docs/rules.md POLICY-57 … POLICY-60, LEDGER-74), on both backends,
//! with two gateways on one database standing for two replicas: concurrent calls against a sum
//! cap never run past it; a call over a `deny` limit fails naming the limit and what is left;
//! one over an `approval` limit waits for a person with the figures, and runs once approved.

use std::sync::atomic::AtomicI64;

use airlock_runtime::ledger::ToolErrorKind;
use airlock_runtime::{GatewayError, decisions};
use airlock_spec::{Limit, LimitBy, LimitOver, Measure};

use super::*;

/// A local tool that adds up the `amount` of every call it runs.
struct Spend {
    limit: Limit,
    spent: Arc<AtomicI64>,
}

impl LocalTool for Spend {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: ToolName::try_from("spend").unwrap(),
            description: "Spends an amount.".into(),
            input_schema: json!({"type": "object", "properties": {"amount": {"type": "integer"}}}),
        }
    }
    fn policy(&self) -> Policy {
        Policy {
            limits: vec![self.limit.clone()],
            ..Policy::default()
        }
    }
    fn invoke(&self, arguments: Value) -> LocalBody {
        let spent = Arc::clone(&self.spent);
        LocalBody::Plain(Box::pin(async move {
            let amount = arguments["amount"].as_i64().unwrap_or(0);
            spent.fetch_add(amount, Ordering::SeqCst);
            Ok(json!({"spent": amount}))
        }))
    }
}

fn daily(max: f64, by: LimitBy, over: LimitOver) -> Limit {
    Limit {
        name: "daily".into(),
        measure: Measure::Amount {
            pointer: "/amount".into(),
            unit: Some("EUR".into()),
        },
        max,
        per: Duration::from_secs(86_400),
        by,
        over,
    }
}

fn spend_gateway(store: Arc<dyn Store>, limit: Limit, spent: &Arc<AtomicI64>) -> Arc<Gateway> {
    let tool = Arc::new(Spend {
        limit,
        spent: Arc::clone(spent),
    });
    let mut scope = Scope::new(ScopeId::Gateway);
    scope.add(spec_of(tool.as_ref())).unwrap();
    let egress = GuardedClient::new(EgressPolicy::default()).unwrap();
    let gateway = Gateway::builder(store, egress, Arc::new(Credentials::default()))
        .scope(scope)
        .unwrap()
        .local(tool)
        .build();
    Arc::new(gateway)
}

/// POLICY-58, LEDGER-74: 64 concurrent calls of 10 EUR from two replicas against a 300 EUR cap:
/// exactly 30 run and the tool spent exactly 300; every other call failed `over_limit` naming
/// the limit, and nothing of it was sent.
pub(super) async fn concurrent_calls_from_two_replicas_never_pass_a_sum_cap(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some(location) = location(backend, &dir).await else {
        return;
    };
    let spent = Arc::new(AtomicI64::new(0));
    let limit = daily(300.0, LimitBy::Tool, LimitOver::Deny);
    let replicas = [
        spend_gateway(
            open(&location, StoreConfig::default()).await,
            limit.clone(),
            &spent,
        ),
        spend_gateway(open(&location, StoreConfig::default()).await, limit, &spent),
    ];
    let calls = (0..64).map(|i| {
        let gateway = Arc::clone(&replicas[i % 2]);
        async move {
            let ctx = ctx_on(&gateway, "ada", &format!("c{i}")).await;
            gateway
                .call(&ctx, "spend", json!({"amount": 10}))
                .await
                .unwrap()
        }
    });
    let outcomes = futures::future::join_all(calls).await;
    let rows: Vec<Invocation> = outcomes.into_iter().map(Outcome::into_invocation).collect();
    let ran = rows
        .iter()
        .filter(|r| r.state == InvocationState::Succeeded)
        .count();
    assert_eq!(ran, 30, "exactly the cap's worth ran");
    assert_eq!(spent.load(Ordering::SeqCst), 300);
    for row in rows
        .iter()
        .filter(|r| r.state != InvocationState::Succeeded)
    {
        assert_eq!(row.state, InvocationState::Failed);
        let error = row.error.as_ref().unwrap();
        assert_eq!(error.kind, ToolErrorKind::OverLimit);
        assert!(
            error.message.contains("310 of 300 EUR in 1d (daily)"),
            "{}",
            error.message
        );
        assert!(error.message.contains("0 EUR left"), "{}", error.message);
    }
}

/// POLICY-59: over an `approval` limit a call waits for a person — whatever the tool's own
/// approval — with the figures kept for the card; approved, it runs once. Another principal's
/// budget is its own.
pub(super) async fn a_call_over_an_approval_limit_waits_for_a_person(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some(store) = store(backend, &dir).await else {
        return;
    };
    let spent = Arc::new(AtomicI64::new(0));
    let limit = daily(100.0, LimitBy::Principal, LimitOver::Approval);
    let gateway = spend_gateway(Arc::clone(&store), limit, &spent);
    let call = |who: &'static str, id: &'static str, amount: i64| {
        let gateway = Arc::clone(&gateway);
        async move {
            let ctx = ctx_on(&gateway, who, id).await;
            let outcome = gateway.call(&ctx, "spend", json!({"amount": amount}));
            outcome.await.unwrap().into_invocation()
        }
    };
    assert_eq!(
        call("ada", "a1", 60).await.state,
        InvocationState::Succeeded
    );
    let parked = call("ada", "a2", 60).await;
    assert_eq!(parked.state, InvocationState::AwaitingApproval);
    let uses = store.budget_uses(parked.id).await.unwrap();
    assert_eq!(uses.len(), 1);
    assert!(uses[0].over);
    assert_eq!(
        uses[0].figures(),
        "120 of 100 EUR in 1d (daily per principal ada)"
    );
    assert_eq!(
        call("bob", "b1", 60).await.state,
        InvocationState::Succeeded,
        "bob's own budget"
    );
    store
        .decide(parked.id, "alice", Decision::Approve)
        .await
        .unwrap();
    let ran = gateway.continue_approved(parked.id).await.unwrap();
    assert_eq!(ran.invocation().state, InvocationState::Succeeded);
    assert_eq!(spent.load(Ordering::SeqCst), 180);
    let usage = store.limit_usage().await.unwrap();
    let ada = usage
        .iter()
        .find(|u| u.key.ends_with("/principal:ada"))
        .unwrap();
    assert_eq!((ada.used, ada.cap), (120_000_000, 100_000_000));
}

/// DECIDE-21: a limit's share was judged and reserved when the call was recorded, so an edited
/// approval that changes what a limit counts is refused naming the limit, and nothing is
/// decided; an edit that leaves every share as it was is approved and runs with its arguments.
pub(super) async fn an_edit_may_not_change_a_limits_share(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some(store) = store(backend, &dir).await else {
        return;
    };
    let spent = Arc::new(AtomicI64::new(0));
    let limit = daily(100.0, LimitBy::Principal, LimitOver::Approval);
    let gateway = spend_gateway(Arc::clone(&store), limit, &spent);
    let ctx = ctx_on(&gateway, "ada", "a1").await;
    let parked = gateway.call(&ctx, "spend", json!({"amount": 160}));
    let parked = parked.await.unwrap().into_invocation();
    assert_eq!(parked.state, InvocationState::AwaitingApproval);
    let edit = |arguments| Decision::Edit { arguments };
    let smaller = edit(json!({"amount": 5}));
    let refused = decisions::decide(&gateway, parked.id, "alice", smaller, "api").await;
    match refused {
        Err(GatewayError::BadEdit { error, .. }) => {
            assert!(error.message.contains("limit `daily`"), "{error:?}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(store.get(parked.id).await.unwrap().decision, None);
    let noted = json!({"amount": 160, "note": "checked by phone"});
    decisions::decide(&gateway, parked.id, "alice", edit(noted.clone()), "api")
        .await
        .unwrap();
    let row = super::settled(store.as_ref(), parked.id).await;
    assert_eq!(row.state, InvocationState::Succeeded);
    assert_eq!(row.approved_arguments, Some(noted));
    assert_eq!(spent.load(Ordering::SeqCst), 160);
}
