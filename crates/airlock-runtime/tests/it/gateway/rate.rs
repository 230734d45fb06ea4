//! POLICY-16: a declaration's rate limit is one budget for every principal and every gateway on
//! the ledger's database, with an optional per-principal budget on top, refilled by the
//! ledger's clock. Each case on SQLite and on PostgreSQL.

use airlock_runtime::ledger::ManualClock;
use time::OffsetDateTime;

use super::*;

const MINUTE: Duration = Duration::from_secs(60);

fn limited(requests: u32, per_principal: Option<u32>) -> Policy {
    let per_minute = |requests| RateLimit {
        requests,
        per: MINUTE,
    };
    Policy {
        rate_limit: Some(per_minute(requests)),
        per_principal_rate_limit: per_principal.map(per_minute),
        ..Policy::default()
    }
}

/// `gateways` gateways with `policy` over one ledger on `backend` (one store each, as
/// replicas open it), all at one manual clock.
async fn replicas(
    backend: Backend,
    policy: Policy,
    gateways: usize,
) -> Option<(Vec<Fixture>, ManualClock)> {
    let dir = tempfile::tempdir().unwrap();
    let location = location(backend, &dir).await?;
    let clock = ManualClock::new(OffsetDateTime::now_utc());
    let mut out = Vec::new();
    for _ in 0..gateways {
        let config = StoreConfig {
            clock: Arc::new(clock.clone()),
            ..StoreConfig::default()
        };
        let store = open(&location, config).await;
        out.push(gateway_on(store, policy.clone(), "", tempfile::tempdir().unwrap()).await);
    }
    out[0]._dir = dir;
    Some((out, clock))
}

/// Calls `count` as `principal`; the row's state, and its error kind if any.
async fn call_as(f: &Fixture, principal: &str) -> (InvocationState, Option<ToolErrorKind>) {
    let principal = Some(principal.to_owned());
    let session = f
        .gateway
        .open_session("test", principal.clone(), &ScopeId::Gateway)
        .await
        .unwrap();
    let ctx = CallContext {
        scope: ScopeId::Gateway,
        session,
        call_id: uuid::Uuid::new_v4().to_string(),
        principal,
        channel: "test",
    };
    let outcome = f
        .gateway
        .call(&ctx, "count", json!({"amount": 1}))
        .await
        .unwrap();
    let row = outcome.invocation();
    (row.state, row.error.as_ref().map(|e| e.kind))
}

const RAN: (InvocationState, Option<ToolErrorKind>) = (InvocationState::Succeeded, None);
const LIMITED: (InvocationState, Option<ToolErrorKind>) =
    (InvocationState::Failed, Some(ToolErrorKind::RateLimited));

/// The tenant's API is protected as declared: a second caller does not get a budget of its own.
async fn principals_share_the_declared_budget(backend: Backend) {
    let Some((gateways, _clock)) = replicas(backend, limited(2, None), 1).await else {
        return;
    };
    let f = &gateways[0];
    assert_eq!(call_as(f, "ada").await, RAN);
    assert_eq!(call_as(f, "ada").await, RAN);
    assert_eq!(
        call_as(f, "bob").await,
        LIMITED,
        "bob spends the same budget"
    );
    assert_eq!(f.runs(), 2);
}

/// `per_principal` limits each caller on top of the shared budget.
async fn a_per_principal_budget_limits_each_caller_on_top(backend: Backend) {
    let Some((gateways, _clock)) = replicas(backend, limited(5, Some(2)), 1).await else {
        return;
    };
    let f = &gateways[0];
    assert_eq!(call_as(f, "ada").await, RAN);
    assert_eq!(call_as(f, "ada").await, RAN);
    let (state, kind) = call_as(f, "ada").await;
    assert_eq!((state, kind), LIMITED, "ada is over her own budget");
    assert_eq!(call_as(f, "bob").await, RAN, "bob still has room");
    assert_eq!(call_as(f, "bob").await, RAN);
    assert_eq!(
        call_as(f, "cy").await,
        RAN,
        "ada's refusal spent none of the 5"
    );
    assert_eq!(
        call_as(f, "cy").await,
        LIMITED,
        "the declaration's 5 are spent"
    );
    assert_eq!(f.runs(), 5);
}

/// Two gateways (two replicas) on one database: together they never run more calls in a
/// window than the declaration allows.
async fn replicas_share_the_declared_budget(backend: Backend) {
    let Some((gateways, _clock)) = replicas(backend, limited(3, None), 2).await else {
        return;
    };
    let gateways = Arc::new(gateways);
    let calls: Vec<_> = (0..12)
        .map(|i| {
            let gateways = Arc::clone(&gateways);
            tokio::spawn(async move { call_as(&gateways[i % 2], &format!("p{i}")).await })
        })
        .collect();
    let mut ran = 0;
    for call in calls {
        let outcome = call.await.unwrap();
        assert!(outcome == RAN || outcome == LIMITED, "{outcome:?}");
        ran += usize::from(outcome == RAN);
    }
    assert_eq!(ran, 3);
    assert_eq!(gateways.iter().map(Fixture::runs).sum::<usize>(), 3);
}

/// The budget refills evenly by the ledger's clock: one call every window / requests.
async fn the_budget_refills_by_the_ledger_clock(backend: Backend) {
    let Some((gateways, clock)) = replicas(backend, limited(2, None), 1).await else {
        return;
    };
    let f = &gateways[0];
    assert_eq!(call_as(f, "ada").await, RAN);
    assert_eq!(call_as(f, "bob").await, RAN);
    assert_eq!(call_as(f, "ada").await, LIMITED);
    clock.advance(Duration::from_secs(30));
    assert_eq!(call_as(f, "bob").await, RAN, "one call back after 30 s");
    assert_eq!(call_as(f, "ada").await, LIMITED);
    clock.advance(MINUTE);
    assert_eq!(call_as(f, "ada").await, RAN, "a full window refills");
    assert_eq!(call_as(f, "bob").await, RAN);
    assert_eq!(call_as(f, "ada").await, LIMITED);
}

on_both_backends!(
    principals_share_the_declared_budget,
    a_per_principal_budget_limits_each_caller_on_top,
    replicas_share_the_declared_budget,
    the_budget_refills_by_the_ledger_clock,
);
