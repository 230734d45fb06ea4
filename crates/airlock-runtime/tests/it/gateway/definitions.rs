//! Approvals and `once` grants are bound to the called tool's own definition (docs/rules.md
//! POLICY-6): a change to another tool of the scope — one edited, one gained — never voids
//! them; a change to the tool itself does. And a gateway is never built with a tool whose
//! schema does not compile (DECL-37).

use airlock_runtime::ledger::{InvocationId, NewInvocation};

use super::*;

/// The scope's other tools, as (name, description); none of them is called.
type Others<'a> = &'a [(&'a str, &'a str)];

const BEFORE: Others<'static> = &[("other", "Another tool.")];
/// `other` edited, and a tool gained (as when a connection's server adds one).
const OTHERS_CHANGED: Others<'static> = &[("other", "Another tool, edited."), ("gained", "New.")];

/// A gateway on `store` whose scope holds `count` (its description extended by `suffix`) and
/// `others`.
fn gateway_with(
    store: &Arc<dyn Store>,
    approval: Approval,
    suffix: &str,
    others: Others<'_>,
) -> Fixture {
    let others = others
        .iter()
        .map(|(name, description)| described(name, description));
    counter_gateway(
        Arc::clone(store),
        policy(approval),
        suffix,
        others,
        tempfile::tempdir().unwrap(),
    )
}

fn described(name: &str, description: &str) -> ToolSpec {
    ToolSpec {
        definition: ToolDefinition {
            name: ToolName::try_from(name).unwrap(),
            description: description.to_owned(),
            input_schema: json!({"type": "object"}),
        },
        source: ToolSource::Local,
        policy: Policy::default(),
    }
}

/// `count` parked under `BEFORE` and approved; the ledger and the approved row's id.
async fn approved_under_before(
    backend: Backend,
    dir: &tempfile::TempDir,
) -> Option<(Arc<dyn Store>, CallContext, InvocationId)> {
    let store = store(backend, dir).await?;
    let before = gateway_with(&store, Approval::Always, "", BEFORE);
    let ctx = before.ctx("c1").await;
    let parked = before
        .gateway
        .call(&ctx, "count", json!({"amount": 5}))
        .await
        .unwrap();
    let id = expect(parked, OutcomeKind::Parked).id;
    store.decide(id, "alice", Decision::Approve).await.unwrap();
    Some((store, ctx, id))
}

/// Scope item 2 (a): the scope's digest changed, the approved tool's did not — it runs.
pub(super) async fn an_approval_survives_a_change_to_another_tool(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some((store, ctx, id)) = approved_under_before(backend, &dir).await else {
        return;
    };
    let after = gateway_with(&store, Approval::Always, "", OTHERS_CHANGED);
    let done = after.gateway.continue_approved(id).await.unwrap();
    let row = expect(done, OutcomeKind::Completed);
    assert_eq!(row.state, InvocationState::Succeeded, "{:?}", row.error);
    assert_eq!(after.runs(), 1);
    // A client's retry of the same call id finds the finished row; nothing runs again.
    let retried = after
        .gateway
        .call(&ctx, "count", json!({"amount": 5}))
        .await
        .unwrap();
    assert_eq!(retried.invocation().id, id);
    assert_eq!(after.runs(), 1);
}

/// Scope item 2 (a), by the other way in: the client retries its approved call id after the
/// change, instead of the await tool or the worker continuing it.
pub(super) async fn a_retry_runs_its_approval_after_another_tool_changed(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some((store, ctx, id)) = approved_under_before(backend, &dir).await else {
        return;
    };
    let after = gateway_with(&store, Approval::Always, "", OTHERS_CHANGED);
    let retried = after
        .gateway
        .call(&ctx, "count", json!({"amount": 5}))
        .await
        .unwrap();
    let row = expect(retried, OutcomeKind::Completed);
    assert_eq!((row.id, row.state), (id, InvocationState::Succeeded));
    assert_eq!(after.runs(), 1);
}

/// Scope item 2 (b): a change to the approved tool itself still refuses the row, even when
/// nothing else changed.
pub(super) async fn an_approval_does_not_survive_a_change_to_its_own_tool(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some((store, _, id)) = approved_under_before(backend, &dir).await else {
        return;
    };
    let after = gateway_with(&store, Approval::Always, " Now different.", BEFORE);
    let row = expect(
        after.gateway.continue_approved(id).await.unwrap(),
        OutcomeKind::Completed,
    );
    assert_eq!(row.state, InvocationState::Failed);
    let error = row.error.unwrap();
    assert_eq!(error.kind, ToolErrorKind::BadDeclaration);
    assert!(error.message.contains("declaration changed"), "{error:?}");
    assert_eq!(after.runs(), 0);
}

/// Scope item 2 (c): a `once` grant is kept across a change to another tool, and voided by a
/// change to its own tool.
pub(super) async fn a_once_grant_follows_its_own_tool_only(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some(store) = store(backend, &dir).await else {
        return;
    };
    let first = gateway_with(&store, Approval::Once, "", BEFORE);
    let parked = first
        .gateway
        .call(&first.ctx("a").await, "count", json!({"amount": 5}))
        .await
        .unwrap();
    let id = expect(parked, OutcomeKind::Parked).id;
    store.decide(id, "alice", Decision::Approve).await.unwrap();
    first.gateway.continue_approved(id).await.unwrap();

    let others_changed = gateway_with(&store, Approval::Once, "", OTHERS_CHANGED);
    let again = others_changed
        .gateway
        .call(
            &others_changed.ctx("b").await,
            "count",
            json!({"amount": 5}),
        )
        .await
        .unwrap();
    let row = expect(again, OutcomeKind::Completed);
    assert_eq!(row.state, InvocationState::Succeeded);
    assert_eq!(
        row.approval_ref,
        Some(id),
        "runs on the first call's approval"
    );

    let own_changed = gateway_with(&store, Approval::Once, " Now different.", OTHERS_CHANGED);
    let asked = own_changed
        .gateway
        .call(&own_changed.ctx("c").await, "count", json!({"amount": 5}))
        .await
        .unwrap();
    expect(asked, OutcomeKind::Parked);
    assert_eq!(own_changed.runs(), 0);
}

/// A row recorded before rows held tool digests holds its scope's digest: approved, it runs
/// while the scope is unchanged, and fails once the scope changed (as it did before).
pub(super) async fn an_approval_recorded_under_the_scope_digest_still_runs(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some(store) = store(backend, &dir).await else {
        return;
    };
    let f = gateway_with(&store, Approval::Always, "", BEFORE);
    let scope_digest = f.gateway.scope(&ScopeId::Gateway).unwrap().digest();
    let mut ids = Vec::new();
    for call_id in ["old-1", "old-2"] {
        let ctx = f.ctx(call_id).await;
        let mut new = NewInvocation::new(
            ctx.session,
            call_id,
            "count",
            json!({"amount": 1}),
            &scope_digest,
        );
        new.approval = Approval::Always;
        new.principal = ctx.principal;
        let id = store.record(new).await.unwrap().invocation.id;
        store.decide(id, "alice", Decision::Approve).await.unwrap();
        ids.push(id);
    }
    let ran = expect(
        f.gateway.continue_approved(ids[0]).await.unwrap(),
        OutcomeKind::Completed,
    );
    assert_eq!(ran.state, InvocationState::Succeeded, "{:?}", ran.error);
    let changed = gateway_with(&store, Approval::Always, "", OTHERS_CHANGED);
    let refused = expect(
        changed.gateway.continue_approved(ids[1]).await.unwrap(),
        OutcomeKind::Completed,
    );
    assert_eq!(refused.state, InvocationState::Failed);
    assert_eq!(f.runs() + changed.runs(), 1);
}

/// A call's arguments are checked once, when it is recorded: a retry that finds its row still
/// `pending` (its process stopped between the record and the run) after the tool's own
/// definition changed fails it instead of running it unchecked under the new definition.
pub(super) async fn a_pending_row_never_runs_under_another_definition(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some(store) = store(backend, &dir).await else {
        return;
    };
    let before = gateway_with(&store, Approval::Never, "", BEFORE);
    let ctx = before.ctx("c1").await;
    let digest = |f: &Fixture| {
        let scope = f.gateway.scope(&ScopeId::Gateway).unwrap();
        scope.tool_digest(&scope.get("count").unwrap().definition)
    };
    let arguments = json!({"amount": 5});
    let mut new = NewInvocation::new(ctx.session, "c1", "count", arguments, digest(&before));
    new.principal = ctx.principal.clone();
    let recorded = store.record(new).await.unwrap().invocation;
    assert_eq!(recorded.state, InvocationState::Pending);
    let after = gateway_with(&store, Approval::Never, " Now different.", BEFORE);
    assert_ne!(digest(&before), digest(&after));
    let retried = after
        .gateway
        .call(&ctx, "count", json!({"amount": 5}))
        .await
        .unwrap();
    let row = expect(retried, OutcomeKind::Completed);
    assert_eq!((row.id, row.state), (recorded.id, InvocationState::Failed));
    let error = row.error.unwrap();
    assert_eq!(error.kind, ToolErrorKind::BadDeclaration);
    assert!(error.message.contains("declaration changed"), "{error:?}");
    assert_eq!(after.runs(), 0);
}

/// DECL-37: a tool whose schema the validator refuses is not added to a gateway — no call
/// of it could be checked — and the error names the scope and the tool.
#[tokio::test]
async fn a_schema_that_does_not_compile_refuses_the_scope() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(Backend::Sqlite, &dir).await.unwrap();
    for schema in [
        json!({"type": "object", "properties": {"a": {"type": "nonsense"}}}),
        json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "(["}}}),
    ] {
        let mut bad = described("bad", "Bad.");
        bad.definition.input_schema = schema;
        let mut scope = Scope::new(ScopeId::Agent("support".into()));
        scope.add(described("fine", "Fine.")).unwrap();
        scope.add(bad).unwrap();
        let egress = GuardedClient::new(EgressPolicy::default()).unwrap();
        let refused =
            Gateway::builder(Arc::clone(&store), egress, Arc::new(Credentials::default()))
                .scope(scope);
        let error = refused.err().expect("the scope is refused").to_string();
        assert!(
            error.starts_with("scope agent:support: tool `bad`: the input schema does not compile"),
            "{error}"
        );
    }
}
