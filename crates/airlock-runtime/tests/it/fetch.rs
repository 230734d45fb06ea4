//! The `fetch` builtin's boundary (docs/rules.md EGRESS-40): its URL is whatever a model or a
//! caller asks for, so by default it reaches public addresses only — the operator's `[egress]
//! allow` (here, loopback) does not extend to it — unless the operator vouches for it
//! (`[egress] allow_fetch = true`, [`GatewayBuilder::fetch_uses_egress_allow`]).
//!
//! [`GatewayBuilder::fetch_uses_egress_allow`]: airlock_runtime::GatewayBuilder::fetch_uses_egress_allow

use std::sync::Arc;

use airlock_egress::{EgressPolicy, GuardedClient};
use airlock_runtime::ledger::{InvocationState, SqliteStore, StoreConfig, ToolErrorKind};
use airlock_runtime::{CallContext, Gateway};
use airlock_spec::{Builtin, Credentials, Policy, Scope, ScopeId, ToolSource, ToolSpec};
use airlock_testkit::{Cue, RawServer};
use serde_json::json;

/// A gateway with `fetch`, whose operator allows loopback, vouching for `fetch` or not.
async fn gateway(vouched: bool, dir: &tempfile::TempDir) -> Gateway {
    let mut policy = EgressPolicy::default();
    policy.allow_cidrs.push("127.0.0.1/32".parse().unwrap());
    let egress = GuardedClient::new(policy).unwrap();
    let mut scope = Scope::new(ScopeId::Gateway);
    scope
        .add(ToolSpec {
            definition: airlock_spec::builtin_definition(Builtin::Fetch),
            source: ToolSource::Builtin(Builtin::Fetch),
            policy: Policy::default(),
        })
        .unwrap();
    let path = dir.path().join(format!("ledger-{vouched}.sqlite"));
    let store = SqliteStore::open(path, StoreConfig::default())
        .await
        .unwrap();
    Gateway::builder(Arc::new(store), egress, Arc::new(Credentials::default()))
        .scope(scope)
        .unwrap()
        .fetch_uses_egress_allow(vouched)
        .build()
}

async fn fetched(gateway: &Gateway, url: &str) -> airlock_runtime::ledger::Invocation {
    let session = gateway
        .open_session("test", Some("ada".into()), &ScopeId::Gateway)
        .await
        .unwrap();
    let ctx = CallContext {
        scope: ScopeId::Gateway,
        session,
        call_id: "f".into(),
        principal: Some("ada".into()),
        groups: None,
        channel: "test",
        downstream: Default::default(),
    };
    let outcome = gateway
        .call(&ctx, "fetch", json!({"url": url}))
        .await
        .unwrap();
    outcome.invocation().clone()
}

#[tokio::test]
async fn fetch_reaches_what_the_operator_allows_only_when_vouched_for() {
    let page = RawServer::start(Some("no-such-method"), Cue::Status(500)).await;
    let url = format!("http://127.0.0.1:{}/page", page.port);
    let dir = tempfile::tempdir().unwrap();
    let refused = fetched(&gateway(false, &dir).await, &url).await;
    assert_eq!(refused.state, InvocationState::Failed);
    assert_eq!(refused.error.unwrap().kind, ToolErrorKind::Blocked);
    assert!(page.seen().is_empty(), "nothing reached the loopback page");
    let reached = fetched(&gateway(true, &dir).await, &url).await;
    assert_eq!(
        reached.state,
        InvocationState::Succeeded,
        "{:?}",
        reached.error
    );
    assert_eq!(page.seen(), ["/page"]);
}
