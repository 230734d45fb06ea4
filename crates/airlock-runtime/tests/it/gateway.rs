//! The one path of a call through a real ledger — every test on SQLite and on PostgreSQL:
//! policies, dedupe, bad arguments, proposals, decisions, questions, rate limits, digests,
//! transactional local tools.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use airlock_egress::{EgressPolicy, GuardedClient};
use airlock_runtime::ledger::{
    Decision, Invocation, InvocationState, NewInvocation, NewRun, PgStore, SessionId, Settlement,
    SourceKind, SqliteStore, Store, StoreConfig, ToolError, ToolErrorKind, tx_tool,
};
use airlock_runtime::{
    CallContext, Gateway, LocalBody, LocalTool, McpHost, Outcome, OutcomeKind, ProposalRoom,
    RunCall,
};
use airlock_spec::{
    Approval, Builtin, Credentials, Effect, Mode, Policy, RateLimit, Scope, ScopeId,
    ToolDefinition, ToolName, ToolSource, ToolSpec,
};
use serde_json::{Value, json};

mod ambiguous;
mod approvers;
mod budget;
mod definitions;
mod freeze;
mod personal;
mod personal_oauth;
mod rival;
mod shutdown;
mod words;
mod worker;

use ambiguous::{
    a_call_in_flight_when_swept_in_doubt_returns_its_answer,
    an_answered_or_unsent_failure_still_fails, an_unanswered_api_call_parks_in_doubt,
};
use approvers::a_call_nobody_decided_is_escalated_once_across_replicas;
use budget::{
    a_call_over_an_approval_limit_waits_for_a_person, an_edit_may_not_change_a_limits_share,
    concurrent_calls_from_two_replicas_never_pass_a_sum_cap,
};
use definitions::{
    a_once_grant_follows_its_own_tool_only, a_pending_row_never_runs_under_another_definition,
    a_retry_runs_its_approval_after_another_tool_changed,
    an_approval_does_not_survive_a_change_to_its_own_tool,
    an_approval_recorded_under_the_scope_digest_still_runs,
    an_approval_survives_a_change_to_another_tool,
};
use freeze::{
    a_freeze_on_one_replica_refuses_the_next_call_on_another,
    decisions_wait_out_a_freeze_and_approved_calls_run_after_it,
    held_approvals_do_not_starve_the_worker, the_refresh_loop_brings_in_another_replicas_freeze,
    the_worker_runs_a_held_approval_when_the_freeze_is_lifted,
};
use personal::{
    a_call_waits_for_its_principals_own_credential_and_runs_once,
    a_credential_opens_only_under_its_own_key, a_retired_vault_key_still_opens_what_it_sealed,
    a_revocation_on_one_replica_stops_the_next_call_on_another,
};
use personal_oauth::{
    a_callers_token_is_exchanged_for_its_own_principal,
    a_connected_account_releases_the_waiting_call,
    an_expiring_account_is_refreshed_before_the_call,
};
use rival::a_refused_call_another_claimer_holds_is_reported_as_it_stands;
use words::{an_abandoned_call_never_runs, an_expired_call_reads_back_as_expired};
use worker::the_worker_runs_an_approval_committed_by_another_process;

/// A local tool that counts its runs and echoes its arguments.
struct Counter {
    name: &'static str,
    policy: Policy,
    runs: Arc<AtomicUsize>,
}

impl LocalTool for Counter {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: ToolName::try_from(self.name).unwrap(),
            description: "Counts.".into(),
            input_schema: json!({"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]}),
        }
    }
    fn policy(&self) -> Policy {
        self.policy.clone()
    }
    fn invoke(&self, arguments: Value) -> LocalBody {
        let runs = Arc::clone(&self.runs);
        if self.policy.effect == Effect::Transactional {
            return LocalBody::Transactional(tx_tool(move |tx| {
                Box::pin(async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    tx.execute(
                        "CREATE TABLE IF NOT EXISTS demo_notes (amount INTEGER)",
                        &[],
                    )
                    .await
                    .map_err(|e| ToolError::new(ToolErrorKind::Database, e.to_string()))?;
                    if arguments["amount"] == json!(0) {
                        return Err(ToolError::new(
                            ToolErrorKind::ToolFailed,
                            "amount must not be zero",
                        ));
                    }
                    Ok(json!({"noted": arguments["amount"]}))
                })
            }));
        }
        LocalBody::Plain(Box::pin(async move {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(json!({"echo": arguments}))
        }))
    }
}

struct Fixture {
    gateway: Arc<Gateway>,
    runs: Arc<AtomicUsize>,
    _dir: tempfile::TempDir,
}

fn spec_of(tool: &dyn LocalTool) -> ToolSpec {
    ToolSpec {
        definition: tool.definition(),
        source: ToolSource::Local,
        policy: tool.policy(),
    }
}

#[derive(Clone, Copy)]
pub(crate) enum Backend {
    Sqlite,
    Postgres,
}

/// Where a test's ledger lives: an SQLite file, or a fresh PostgreSQL schema.
pub(crate) enum Location {
    Sqlite(std::path::PathBuf),
    Postgres(Box<sqlx::postgres::PgConnectOptions>),
}

/// A fresh ledger's location: an SQLite file in `dir`, or a fresh PostgreSQL schema. `None`
/// skips the PostgreSQL half outside CI when `AIRLOCK_TEST_DATABASE_URL` is unset (CI fails
/// instead).
pub(crate) async fn location(backend: Backend, dir: &tempfile::TempDir) -> Option<Location> {
    match backend {
        Backend::Sqlite => Some(Location::Sqlite(dir.path().join("ledger.sqlite"))),
        Backend::Postgres => Some(Location::Postgres(Box::new(fresh_schema().await?))),
    }
}

/// A store on `location`; opened twice, two processes' stores on one database.
pub(crate) async fn open(location: &Location, config: StoreConfig) -> Arc<dyn Store> {
    match location {
        Location::Sqlite(path) => Arc::new(SqliteStore::open(path, config).await.unwrap()),
        Location::Postgres(options) => {
            Arc::new(PgStore::connect((**options).clone(), config).await.unwrap())
        }
    }
}

/// A fresh ledger (see [`location`]).
async fn store(backend: Backend, dir: &tempfile::TempDir) -> Option<Arc<dyn Store>> {
    store_with(backend, dir, StoreConfig::default()).await
}

/// [`store`] with `config` (an injected clock).
async fn store_with(
    backend: Backend,
    dir: &tempfile::TempDir,
    config: StoreConfig,
) -> Option<Arc<dyn Store>> {
    let location = location(backend, dir).await?;
    Some(open(&location, config).await)
}

/// Connect options for a fresh PostgreSQL schema; `None` skips the PostgreSQL half outside CI
/// when `AIRLOCK_TEST_DATABASE_URL` is unset (CI fails instead).
async fn fresh_schema() -> Option<sqlx::postgres::PgConnectOptions> {
    let url = airlock_testkit::postgres_url()?;
    let schema = format!("gw_{}", uuid::Uuid::new_v4().simple());
    let admin = sqlx::PgPool::connect(&url).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
    let options: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
    Some(options.options([("search_path", schema.as_str())]))
}

async fn fixture(backend: Backend, policy: Policy, description_suffix: &str) -> Option<Fixture> {
    let dir = tempfile::tempdir().unwrap();
    let store = store(backend, &dir).await?;
    Some(gateway_on(store, policy, description_suffix, dir).await)
}

/// Declares each test once per backend.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[tokio::test] async fn $name() { super::$name(super::Backend::Sqlite).await })*
        }
        mod postgres {
            $(#[tokio::test] async fn $name() { super::$name(super::Backend::Postgres).await })*
        }
    };
}

on_both_backends!(
    never_runs_at_once_and_a_retry_never_runs_twice,
    always_parks_then_runs_exactly_once_when_approved,
    deny_never_runs_and_tells_the_model_why,
    bad_arguments_are_a_stored_tool_error_and_never_park_or_run,
    unknown_tools_are_protocol_errors,
    propose_records_and_calls_nobody,
    ask_human_parks_until_a_person_answers,
    rate_limits_refuse_before_running,
    an_approval_does_not_survive_a_changed_declaration,
    a_transactional_local_tool_commits_with_its_row,
    once_is_scoped_to_the_principal,
    a_running_call_keeps_its_lease,
    a_retried_call_does_not_run_under_an_approval_for_old_definitions,
    an_approved_call_runs_without_the_rate_limit,
    a_refused_call_another_claimer_holds_is_reported_as_it_stands,
    an_expired_call_reads_back_as_expired,
    an_abandoned_call_never_runs,
    an_approval_survives_a_change_to_another_tool,
    a_retry_runs_its_approval_after_another_tool_changed,
    an_approval_does_not_survive_a_change_to_its_own_tool,
    a_once_grant_follows_its_own_tool_only,
    an_approval_recorded_under_the_scope_digest_still_runs,
    a_pending_row_never_runs_under_another_definition,
    the_worker_runs_an_approval_committed_by_another_process,
    an_unanswered_api_call_parks_in_doubt,
    an_answered_or_unsent_failure_still_fails,
    a_call_in_flight_when_swept_in_doubt_returns_its_answer,
    a_freeze_on_one_replica_refuses_the_next_call_on_another,
    the_refresh_loop_brings_in_another_replicas_freeze,
    decisions_wait_out_a_freeze_and_approved_calls_run_after_it,
    the_worker_runs_a_held_approval_when_the_freeze_is_lifted,
    held_approvals_do_not_starve_the_worker,
    concurrent_calls_from_two_replicas_never_pass_a_sum_cap,
    a_call_over_an_approval_limit_waits_for_a_person,
    a_call_nobody_decided_is_escalated_once_across_replicas,
    an_edit_may_not_change_a_limits_share,
    an_edited_transactional_approval_runs_with_the_edited_arguments,
    a_call_waits_for_its_principals_own_credential_and_runs_once,
    a_revocation_on_one_replica_stops_the_next_call_on_another,
    a_credential_opens_only_under_its_own_key,
    a_retired_vault_key_still_opens_what_it_sealed,
    a_connected_account_releases_the_waiting_call,
    an_expiring_account_is_refreshed_before_the_call,
    a_callers_token_is_exchanged_for_its_own_principal,
);

// After the macro, which it uses.
mod call_key;
mod idempotency;
mod rate;

/// [`counter_gateway`] with `ask_human` beside `count`.
async fn gateway_on(
    store: Arc<dyn Store>,
    policy: Policy,
    description_suffix: &str,
    dir: tempfile::TempDir,
) -> Fixture {
    let ask = ToolSpec {
        definition: airlock_spec::builtin_definition(Builtin::AskHuman),
        source: ToolSource::Builtin(Builtin::AskHuman),
        policy: Policy::default(),
    };
    counter_gateway(store, policy, description_suffix, [ask], dir)
}

/// A gateway on `store` whose scope holds `count` under `policy` (its description extended by
/// `description_suffix`), then `others`.
fn counter_gateway(
    store: Arc<dyn Store>,
    policy: Policy,
    description_suffix: &str,
    others: impl IntoIterator<Item = ToolSpec>,
    dir: tempfile::TempDir,
) -> Fixture {
    let runs = Arc::new(AtomicUsize::new(0));
    let tool = Arc::new(Counter {
        name: "count",
        policy,
        runs: Arc::clone(&runs),
    });
    let mut spec = spec_of(tool.as_ref());
    spec.definition.description.push_str(description_suffix);
    let mut scope = Scope::new(ScopeId::Gateway);
    scope.add(spec).unwrap();
    for other in others {
        scope.add(other).unwrap();
    }
    let egress = GuardedClient::new(EgressPolicy::default()).unwrap();
    let gateway = Gateway::builder(store, egress, Arc::new(Credentials::default()))
        .scope(scope)
        .unwrap()
        .local(tool)
        .build();
    Fixture {
        gateway: Arc::new(gateway),
        runs,
        _dir: dir,
    }
}

/// The context of call `call_id` by `principal` on the gateway scope, in a session of its own.
pub(crate) async fn ctx_on(gateway: &Gateway, principal: &str, call_id: &str) -> CallContext {
    let principal = Some(principal.to_owned());
    let session = gateway
        .open_session("test", principal.clone(), &ScopeId::Gateway)
        .await
        .unwrap();
    CallContext {
        scope: ScopeId::Gateway,
        session,
        call_id: call_id.into(),
        principal,
        groups: None,
        channel: "test",
        downstream: Default::default(),
    }
}

impl Fixture {
    /// The gateway as the MCP endpoint's host.
    fn host(&self) -> McpHost {
        McpHost::new(Arc::clone(&self.gateway))
    }

    async fn ctx(&self, call_id: &str) -> CallContext {
        ctx_on(&self.gateway, "ada", call_id).await
    }

    /// Call `c1` of `tool` by `ada` in an MCP session, claimed by `w1` and found by the sweeper
    /// past its lease: its session and the row, in doubt.
    async fn in_doubt(
        &self,
        tool: &str,
        arguments: Value,
        source_kind: SourceKind,
    ) -> (SessionId, Invocation) {
        let store = self.gateway.store();
        let session = SessionId::new();
        self.gateway
            .open_session_as(session, "mcp", Some("ada".into()), &ScopeId::Gateway)
            .await
            .unwrap();
        let mut call = NewInvocation::new(session, "c1", tool, arguments, "d");
        call.source_kind = source_kind;
        call.principal = Some("ada".into());
        let row = store
            .record_and_claim(call, "w1", Duration::from_secs(30))
            .await
            .unwrap()
            .invocation;
        let later = time::OffsetDateTime::now_utc() + Duration::from_secs(3600);
        assert_eq!(store.sweep(later).await.unwrap().in_doubt, vec![row.id]);
        (session, row)
    }
    fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }
}

/// The row of `outcome`, which must be of `kind`.
fn expect(outcome: Outcome, kind: OutcomeKind) -> Invocation {
    assert_eq!(outcome.kind(), kind, "{outcome:?}");
    outcome.into_invocation()
}

fn policy(approval: Approval) -> Policy {
    Policy {
        approval,
        ..Policy::default()
    }
}

async fn never_runs_at_once_and_a_retry_never_runs_twice(backend: Backend) {
    let Some(f) = fixture(backend, policy(Approval::Never), "").await else {
        return;
    };
    let ctx = f.ctx("c1").await;
    let row = expect(
        f.gateway
            .call(&ctx, "count", json!({"amount": 5}))
            .await
            .unwrap(),
        OutcomeKind::Completed,
    );
    assert_eq!(
        row.settlement(),
        Some(Settlement::Succeeded(&json!({"echo": {"amount": 5}})))
    );
    let again = f
        .gateway
        .call(&ctx, "count", json!({"amount": 5}))
        .await
        .unwrap();
    assert_eq!(again.invocation().id, row.id);
    assert_eq!(f.runs(), 1);
}

async fn always_parks_then_runs_exactly_once_when_approved(backend: Backend) {
    let Some(f) = fixture(backend, policy(Approval::Always), "").await else {
        return;
    };
    let ctx = f.ctx("c1").await;
    let row = expect(
        f.gateway
            .call(&ctx, "count", json!({"amount": 5}))
            .await
            .unwrap(),
        OutcomeKind::Parked,
    );
    assert_eq!(row.state, InvocationState::AwaitingApproval);
    assert!(row.expires_at.is_some());
    assert_eq!(
        f.gateway.store().get(row.id).await.unwrap().expires_at,
        row.expires_at,
        "read back"
    );
    let formatted = row
        .expires_at
        .unwrap()
        .format(&time::format_description::well_known::Rfc3339);
    assert!(formatted.is_ok(), "{formatted:?} {:?}", row.expires_at);
    assert_eq!(f.runs(), 0);
    f.gateway
        .store()
        .decide(row.id, "alice", Decision::Approve)
        .await
        .unwrap();
    let (a, b) = tokio::join!(
        f.gateway.continue_approved(row.id),
        f.gateway.continue_approved(row.id)
    );
    let settled = [a.unwrap(), b.unwrap()]
        .into_iter()
        .filter(|o| o.kind() == OutcomeKind::Completed)
        .count();
    assert!(settled >= 1);
    assert_eq!(f.runs(), 1, "two continuers, one run");
    let row = f.gateway.store().get(row.id).await.unwrap();
    assert_eq!(row.state, InvocationState::Succeeded);
}

async fn deny_never_runs_and_tells_the_model_why(backend: Backend) {
    let Some(f) = fixture(backend, policy(Approval::Always), "").await else {
        return;
    };
    let ctx = f.ctx("c1").await;
    let parked = f
        .gateway
        .call(&ctx, "count", json!({"amount": 5000}))
        .await
        .unwrap();
    let id = parked.invocation().id;
    f.gateway
        .store()
        .decide(
            id,
            "alice",
            Decision::Deny {
                reason: "too much".into(),
            },
        )
        .await
        .unwrap();
    let row = expect(
        f.gateway.continue_approved(id).await.unwrap(),
        OutcomeKind::Denied,
    );
    assert_eq!(
        row.settlement(),
        Some(Settlement::Denied { reason: "too much" })
    );
    assert_eq!(f.runs(), 0);
}

async fn bad_arguments_are_a_stored_tool_error_and_never_park_or_run(backend: Backend) {
    let Some(f) = fixture(backend, policy(Approval::Always), "").await else {
        return;
    };
    let ctx = f.ctx("c1").await;
    let row = expect(
        f.gateway
            .call(&ctx, "count", json!({"amount": "five"}))
            .await
            .unwrap(),
        OutcomeKind::Completed,
    );
    assert_eq!(row.state, InvocationState::Failed);
    let error = row.error.unwrap();
    assert_eq!(error.kind, ToolErrorKind::BadArguments);
    assert!(error.message.contains("/amount"), "{}", error.message);
    assert_eq!(f.runs(), 0);
}

async fn unknown_tools_are_protocol_errors(backend: Backend) {
    let Some(f) = fixture(backend, policy(Approval::Never), "").await else {
        return;
    };
    let ctx = f.ctx("c1").await;
    let err = f.gateway.call(&ctx, "nope", json!({})).await.unwrap_err();
    assert_eq!(err.to_string(), "unknown tool `nope`");
}

async fn propose_records_and_calls_nobody(backend: Backend) {
    let Some(f) = fixture(
        backend,
        Policy {
            mode: Mode::Propose,
            writes: true,
            ..Policy::default()
        },
        "",
    )
    .await
    else {
        return;
    };
    let ctx = f.ctx("c1").await;
    let new_run = NewRun {
        session_id: ctx.session,
        agent: "a".into(),
        definitions_digest: String::new(),
        definitions_snapshot: json!({}),
        lease: None,
    };
    let run = f.gateway.store().create_run(new_run).await.unwrap().id;
    let open = RunCall {
        run,
        proposals: ProposalRoom::Open,
    };
    let row = expect(
        f.gateway
            .call_in_run(&ctx, &open, "count", json!({"amount": 5}))
            .await
            .unwrap(),
        OutcomeKind::Proposed,
    );
    assert_eq!(
        row.settlement(),
        Some(Settlement::Proposed {
            tool: "count",
            arguments: &json!({"amount": 5})
        })
    );
    assert_eq!(row.run_id, Some(run));
    assert_eq!(f.runs(), 0);

    // POLICY-12: outside a run (the MCP endpoint, `airlock call`) nobody receives a proposal:
    // the call is stored as failed, and no proposed row is left behind.
    let row = expect(
        f.gateway
            .call(&f.ctx("mcp").await, "count", json!({"amount": 5}))
            .await
            .unwrap(),
        OutcomeKind::Completed,
    );
    assert_eq!(row.state, InvocationState::Failed);
    let error = row.error.unwrap();
    assert_eq!(error.kind, ToolErrorKind::Unavailable);
    assert!(
        error.message.contains("receives proposals"),
        "{}",
        error.message
    );
    assert_eq!(f.runs(), 0);

    // POLICY-10 (docs/rules.md): a proposal's arguments are at most 16 KB; past that the model
    // gets a tool error and nothing is proposed.
    let note = "n".repeat(16 * 1024);
    let outcome = f
        .gateway
        .call_in_run(
            &f.ctx("big").await,
            &open,
            "count",
            json!({"amount": 5, "note": note}),
        )
        .await
        .unwrap();
    let row = expect(outcome, OutcomeKind::Completed);
    assert_eq!(row.state, InvocationState::Failed);
    let error = row.error.unwrap();
    assert_eq!(error.kind, ToolErrorKind::BadArguments);
    assert!(
        error.message.contains("the limit is 16384"),
        "{}",
        error.message
    );
    assert_eq!(f.runs(), 0);
}

async fn ask_human_parks_until_a_person_answers(backend: Backend) {
    let Some(f) = fixture(backend, policy(Approval::Never), "").await else {
        return;
    };
    let ctx = f.ctx("q1").await;
    let row = expect(
        f.gateway
            .call(&ctx, "ask_human", json!({"question": "Ship it?"}))
            .await
            .unwrap(),
        OutcomeKind::Parked,
    );
    assert_eq!(row.state, InvocationState::AwaitingAnswer);
    f.gateway
        .store()
        .decide(row.id, "alice", Decision::Answer { text: "yes".into() })
        .await
        .unwrap();
    let row = expect(
        f.gateway.continue_approved(row.id).await.unwrap(),
        OutcomeKind::Completed,
    );
    assert!(
        matches!(row.settlement(), Some(Settlement::Succeeded(answer)) if answer["answer"] == "yes")
    );
}

/// `approval` with a rate limit of one call a minute.
fn one_call_a_minute(approval: Approval) -> Policy {
    Policy {
        approval,
        rate_limit: Some(RateLimit {
            requests: 1,
            per: Duration::from_secs(60),
        }),
        ..Policy::default()
    }
}

async fn rate_limits_refuse_before_running(backend: Backend) {
    let Some(f) = fixture(backend, one_call_a_minute(Approval::Never), "").await else {
        return;
    };
    let first = f
        .gateway
        .call(&f.ctx("a").await, "count", json!({"amount": 1}))
        .await
        .unwrap();
    assert_eq!(first.invocation().state, InvocationState::Succeeded);
    let second = f
        .gateway
        .call(&f.ctx("b").await, "count", json!({"amount": 1}))
        .await
        .unwrap();
    let error = second.invocation().error.clone().unwrap();
    assert_eq!(error.kind, ToolErrorKind::RateLimited);
    assert!(
        error.message.contains("allows 1 calls per 60 s"),
        "{}",
        error.message
    );
    assert_eq!(f.runs(), 1);
}

/// A call parked by `ada` and approved, then a gateway over the same store whose tool's
/// declaration changed: (the gateway it was parked through, the new one, its context, its id).
async fn approved_before_a_declaration_changed(
    backend: Backend,
) -> Option<(
    Fixture,
    Fixture,
    CallContext,
    airlock_runtime::ledger::InvocationId,
)> {
    let dir = tempfile::tempdir().unwrap();
    let store = store(backend, &dir).await?;
    let before = gateway_on(
        Arc::clone(&store),
        policy(Approval::Always),
        "",
        tempfile::tempdir().unwrap(),
    )
    .await;
    let ctx = before.ctx("c1").await;
    let parked = before
        .gateway
        .call(&ctx, "count", json!({"amount": 5}))
        .await
        .unwrap();
    let id = parked.invocation().id;
    store.decide(id, "alice", Decision::Approve).await.unwrap();
    let after = gateway_on(store, policy(Approval::Always), " Now different.", dir).await;
    Some((before, after, ctx, id))
}

async fn an_approval_does_not_survive_a_changed_declaration(backend: Backend) {
    let Some((before, after, _, id)) = approved_before_a_declaration_changed(backend).await else {
        return;
    };
    let row = after
        .gateway
        .continue_approved(id)
        .await
        .unwrap()
        .invocation()
        .clone();
    assert_eq!(row.state, InvocationState::Failed);
    assert!(row.error.unwrap().message.contains("declaration changed"));
    assert_eq!(after.runs() + before.runs(), 0);
}

/// A client retrying the same call id after the declaration changed gets its approved row
/// back through dedupe; it must not run under the approval given for the old definitions.
async fn a_retried_call_does_not_run_under_an_approval_for_old_definitions(backend: Backend) {
    let Some((before, after, ctx, id)) = approved_before_a_declaration_changed(backend).await
    else {
        return;
    };
    let retried = after
        .gateway
        .call(&ctx, "count", json!({"amount": 5}))
        .await
        .unwrap();
    let row = retried.invocation();
    assert_eq!((row.id, row.state), (id, InvocationState::Failed));
    assert!(
        row.error
            .clone()
            .unwrap()
            .message
            .contains("declaration changed")
    );
    assert_eq!(after.runs() + before.runs(), 0);
}

/// An approved row runs on the person's approval, without the policy again — a rate limit
/// that parked calls never spent does not throw the approvals away.
async fn an_approved_call_runs_without_the_rate_limit(backend: Backend) {
    let Some(f) = fixture(backend, one_call_a_minute(Approval::Always), "").await else {
        return;
    };
    let mut ids = Vec::new();
    for call in ["a", "b"] {
        let parked = f
            .gateway
            .call(&f.ctx(call).await, "count", json!({"amount": 1}))
            .await
            .unwrap();
        ids.push(parked.invocation().id);
    }
    for id in ids {
        f.gateway
            .store()
            .decide(id, "alice", Decision::Approve)
            .await
            .unwrap();
        let done = f.gateway.continue_approved(id).await.unwrap();
        assert_eq!(
            done.invocation().state,
            InvocationState::Succeeded,
            "{done:?}"
        );
    }
    assert_eq!(f.runs(), 2);
}

async fn a_transactional_local_tool_commits_with_its_row(backend: Backend) {
    let Some(f) = fixture(
        backend,
        Policy {
            effect: Effect::Transactional,
            ..Policy::default()
        },
        "",
    )
    .await
    else {
        return;
    };
    let ok = f
        .gateway
        .call(&f.ctx("a").await, "count", json!({"amount": 3}))
        .await
        .unwrap();
    assert_eq!(ok.invocation().state, InvocationState::Succeeded);
    assert_eq!(
        ok.invocation().settlement(),
        Some(Settlement::Succeeded(&json!({"noted": 3})))
    );
    let failed = f
        .gateway
        .call(&f.ctx("b").await, "count", json!({"amount": 0}))
        .await
        .unwrap();
    assert_eq!(failed.invocation().state, InvocationState::Failed);
    assert_eq!(
        failed.invocation().error.clone().unwrap().message,
        "amount must not be zero"
    );
    assert_eq!(f.runs(), 2);
}

/// Row `id` once it settled: a decision runs its approval in the background, so whoever looks
/// next may find it running.
pub(crate) async fn settled(
    store: &dyn Store,
    id: airlock_runtime::ledger::InvocationId,
) -> Invocation {
    let mut row = store.get(id).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !row.state.is_terminal() && tokio::time::Instant::now() < deadline {
        row = store
            .wait_for_change(id, Some(row.version), deadline)
            .await
            .unwrap();
    }
    row
}

/// DECIDE-20: a transactional tool, which runs inside the ledger's transaction rather than
/// after a claim, runs an edited approval with the edited arguments too.
async fn an_edited_transactional_approval_runs_with_the_edited_arguments(backend: Backend) {
    let transactional = Policy {
        effect: Effect::Transactional,
        approval: Approval::Always,
        ..Policy::default()
    };
    let Some(f) = fixture(backend, transactional, "").await else {
        return;
    };
    let parked = f
        .gateway
        .call(&f.ctx("a").await, "count", json!({"amount": 0}))
        .await
        .unwrap();
    let id = parked.invocation().id;
    let edit = Decision::Edit {
        arguments: json!({"amount": 7}),
    };
    airlock_runtime::decisions::decide(&f.gateway, id, "alice", edit, "api")
        .await
        .unwrap();
    let done = settled(f.gateway.store().as_ref(), id).await;
    assert_eq!(
        done.settlement(),
        Some(Settlement::Succeeded(&json!({"noted": 7}))),
        "{done:?}"
    );
}

async fn once_is_scoped_to_the_principal(backend: Backend) {
    let Some(f) = fixture(backend, policy(Approval::Once), "").await else {
        return;
    };
    let first = f
        .gateway
        .call(&f.ctx("a").await, "count", json!({"amount": 5}))
        .await
        .unwrap();
    assert_eq!(first.invocation().state, InvocationState::AwaitingApproval);
    f.gateway
        .store()
        .decide(first.invocation().id, "alice", Decision::Approve)
        .await
        .unwrap();
    f.gateway
        .continue_approved(first.invocation().id)
        .await
        .unwrap();
    // Each MCP call is its own session: `once` holds for the same principal across sessions.
    let same = f
        .gateway
        .call(&f.ctx("b").await, "count", json!({"amount": 5}))
        .await
        .unwrap();
    assert_eq!(
        same.invocation().state,
        InvocationState::Succeeded,
        "an identical call by the same principal runs"
    );
    let more = f
        .gateway
        .call(&f.ctx("c").await, "count", json!({"amount": 5000}))
        .await
        .unwrap();
    assert_eq!(
        more.invocation().state,
        InvocationState::AwaitingApproval,
        "approving 5 never approves 5000"
    );
    let other = ctx_on(&f.gateway, "eve", "d").await;
    let theirs = f
        .gateway
        .call(&other, "count", json!({"amount": 5}))
        .await
        .unwrap();
    assert_eq!(
        theirs.invocation().state,
        InvocationState::AwaitingApproval,
        "another principal parks"
    );
    assert_eq!(f.runs(), 2);
}

/// A gated call made by `ada` through the gateway's MCP scope, parked: the fixture, the caller
/// and the invocation id.
async fn parked_through_mcp() -> Option<(Fixture, airlock_mcp::Caller, String)> {
    use airlock_mcp::{Caller, ToolHost};
    let f = fixture(Backend::Sqlite, policy(Approval::Always), "").await?;
    let ada = Caller {
        principal: "ada".into(),
        groups: Vec::new(),
        ..Default::default()
    };
    let parked = f
        .host()
        .call_tool(&ScopeId::Gateway, &ada, "count", json!({"amount": 1}))
        .await
        .unwrap();
    assert!(parked.is_parked(), "{parked:?}");
    let id = parked.invocation_id;
    Some((f, ada, id))
}

/// MCP tool hints come from airlock's declarations: a local tool's policy only defaults
/// `writes`, so it is advertised as possibly writing, and idempotent only when its effect says
/// so.
#[tokio::test]
async fn mcp_hints_of_a_local_tool_assume_it_writes() {
    use airlock_mcp::ToolHost;
    for effect in [Effect::AtMostOnce, Effect::Idempotent] {
        let declared = Policy {
            effect,
            ..Policy::default()
        };
        let Some(f) = fixture(Backend::Sqlite, declared, "").await else {
            return;
        };
        let caller = airlock_mcp::Caller {
            principal: "ada".into(),
            groups: Vec::new(),
            ..Default::default()
        };
        let tools = f.host().list_tools(&ScopeId::Gateway, &caller).unwrap();
        let count = tools.iter().find(|t| t.name == "count").unwrap();
        assert_eq!(
            (count.read_only, count.destructive, count.idempotent),
            (false, true, effect == Effect::Idempotent),
            "{count:?}"
        );
    }
}

/// An unknown tool name through the MCP host is refused before anything is written: no
/// session, no row.
#[tokio::test]
async fn an_unknown_mcp_tool_writes_nothing() {
    use airlock_mcp::{Caller, HostError, ToolHost};
    let Some(f) = fixture(Backend::Sqlite, policy(Approval::Never), "").await else {
        return;
    };
    let before = f.gateway.store().verify().await.unwrap().rows;
    let caller = Caller {
        principal: "ada".into(),
        groups: Vec::new(),
        ..Default::default()
    };
    let refused = f
        .host()
        .call_tool(&ScopeId::Gateway, &caller, "nope", json!({}))
        .await
        .unwrap_err();
    assert_eq!(refused, HostError::UnknownTool("nope".into()));
    assert_eq!(f.gateway.store().verify().await.unwrap().rows, before);
}

/// LEDGER-90: a call through the MCP host opens its session in the commit that records it, so
/// an ungated call costs two durable commits (its record, its result), never a third for its
/// session alone, however the writer's batches fall.
#[tokio::test]
async fn an_mcp_call_commits_its_session_with_its_record() {
    use airlock_mcp::{Caller, ToolHost};
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        airlock_ledger::SqliteStore::open(&dir.path().join("ledger.db"), StoreConfig::default())
            .await
            .unwrap(),
    );
    let f = gateway_on(store.clone(), policy(Approval::Never), "", dir).await;
    let caller = Caller {
        principal: "ada".into(),
        groups: Vec::new(),
        ..Default::default()
    };
    let before = store.commits();
    for n in 0..20 {
        let done = f
            .host()
            .call_tool(&ScopeId::Gateway, &caller, "count", json!({"amount": n}))
            .await
            .unwrap();
        assert!(!done.is_parked(), "{done:?}");
    }
    assert_eq!(store.commits() - before, 40, "two commits a call");
}

/// The await tool only settles calls made through the MCP endpoint, by the same principal,
/// from the same endpoint URL (scope).
#[tokio::test]
async fn await_refuses_calls_from_other_channels_principals_and_scopes() {
    use airlock_mcp::{Caller, HostError, HostOutcome, ToolHost};
    let Some((f, ada, id)) = parked_through_mcp().await else {
        return;
    };
    let gateway = ScopeId::Gateway;
    let waiting = f
        .host()
        .await_decision(&gateway, &ada, &id, Duration::ZERO)
        .await
        .unwrap();
    assert!(
        matches!(waiting.outcome, HostOutcome::Parked { .. }),
        "{waiting:?}"
    );
    let eve = Caller {
        principal: "eve".into(),
        groups: Vec::new(),
        ..Default::default()
    };
    assert_eq!(
        f.host()
            .await_decision(&gateway, &eve, &id, Duration::ZERO)
            .await
            .unwrap_err(),
        HostError::NotFound(format!("invocation {id} belongs to another principal"))
    );
    let elsewhere = ScopeId::Agent("helper".into());
    assert_eq!(
        f.host()
            .await_decision(&elsewhere, &ada, &id, Duration::ZERO)
            .await
            .unwrap_err(),
        HostError::NotFound(format!(
            "invocation {id} was not made through this endpoint URL (agent helper)"
        ))
    );
    assert_eq!(
        f.host().withdraw(&gateway, &eve, &id).await.unwrap_err(),
        HostError::NotFound(format!("invocation {id} belongs to another principal"))
    );
    // A call made on another channel (here: the test's own session) is not the endpoint's.
    let other = f
        .gateway
        .call(&f.ctx("x").await, "count", json!({"amount": 1}))
        .await
        .unwrap();
    let err = f
        .host()
        .await_decision(
            &gateway,
            &ada,
            &other.invocation().id.to_string(),
            Duration::ZERO,
        )
        .await
        .unwrap_err();
    assert_eq!(
        err,
        HostError::NotFound(format!(
            "invocation {} was not made through the MCP endpoint",
            other.invocation().id
        ))
    );
}

/// A remote MCP call left in doubt and settled by an operator as "it ran" reads back through
/// the await tool as settled by that operator, with the note — not as an empty success.
#[tokio::test]
async fn an_in_doubt_mcp_call_resolved_as_ran_shows_the_resolver_and_note() {
    use airlock_mcp::{Caller, HostOutcome, ToolHost};
    use airlock_runtime::ledger::Resolution;
    let Some(f) = fixture(Backend::Sqlite, policy(Approval::Never), "").await else {
        return;
    };
    let store = f.gateway.store();
    let (_, row) = f
        .in_doubt("crm__create_note", json!({"n": 1}), SourceKind::Mcp)
        .await;
    let note = "the CRM shows the note: it ran";
    store
        .decide(
            row.id,
            "olga",
            Decision::Resolve {
                resolution: Resolution::Ran,
                note: note.into(),
            },
        )
        .await
        .unwrap();
    let ada = Caller {
        principal: "ada".into(),
        groups: Vec::new(),
        ..Default::default()
    };
    let settled = f
        .host()
        .await_decision(&ScopeId::Gateway, &ada, &row.id.to_string(), Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(settled.decided_by.as_deref(), Some("olga"));
    let HostOutcome::Completed {
        text,
        structured,
        is_error,
        ..
    } = settled.outcome
    else {
        panic!("{settled:?}")
    };
    assert!(!is_error);
    assert_eq!(structured, Some(json!({"resolved": note})), "{text}");
}

/// Withdrawing a waiting call (a cancelled task) denies it in the caller's name, nothing runs,
/// and it reads back as withdrawn; a settled call is returned unchanged.
#[tokio::test]
async fn a_caller_withdraws_its_own_waiting_call() {
    use airlock_mcp::{HostOutcome, ToolHost};
    let Some((f, ada, id)) = parked_through_mcp().await else {
        return;
    };
    let scope = ScopeId::Gateway;
    let withdrawn = f.host().withdraw(&scope, &ada, &id).await.unwrap();
    assert_eq!(withdrawn.outcome, HostOutcome::Withdrawn);
    let row = f.gateway.store().get(id.parse().unwrap()).await.unwrap();
    assert_eq!(row.state, InvocationState::Denied);
    assert_eq!(row.decision.unwrap().by, "ada");
    let again = f.host().withdraw(&scope, &ada, &id).await.unwrap();
    assert_eq!(
        again.outcome,
        HostOutcome::Withdrawn,
        "withdrawing twice changes nothing"
    );
    let awaited = f
        .host()
        .await_decision(&scope, &ada, &id, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(awaited.outcome, HostOutcome::Withdrawn);
    assert_eq!(f.runs(), 0);
}

/// An approved call whose tool was removed from the deployment fails instead of staying
/// approved forever (the worker would otherwise pick it up on every tick).
#[tokio::test]
async fn an_approved_call_of_a_removed_tool_fails_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(Backend::Sqlite, &dir).await.unwrap();
    let before = gateway_on(
        Arc::clone(&store),
        policy(Approval::Always),
        "",
        tempfile::tempdir().unwrap(),
    )
    .await;
    let parked = before
        .gateway
        .call(&before.ctx("c1").await, "count", json!({"amount": 5}))
        .await
        .unwrap();
    let id = parked.invocation().id;
    store.decide(id, "alice", Decision::Approve).await.unwrap();
    let egress = GuardedClient::new(EgressPolicy::default()).unwrap();
    let empty = Gateway::builder(store, egress, Arc::new(Credentials::default()))
        .scope(Scope::new(ScopeId::Gateway))
        .unwrap()
        .build();
    let row = empty
        .continue_approved(id)
        .await
        .unwrap()
        .invocation()
        .clone();
    assert_eq!(row.state, InvocationState::Failed);
    assert_eq!(
        row.error.unwrap().message,
        "tool `count` is no longer declared in this call's scope"
    );
    assert_eq!(before.runs(), 0);
}

/// A local tool that takes longer than a lease.
struct Slow;

impl LocalTool for Slow {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: ToolName::try_from("slow").unwrap(),
            description: "Takes a while.".into(),
            input_schema: json!({"type": "object"}),
        }
    }
    fn policy(&self) -> Policy {
        Policy::default()
    }
    fn invoke(&self, _arguments: Value) -> LocalBody {
        LocalBody::Plain(Box::pin(async {
            tokio::time::sleep(Duration::from_millis(900)).await;
            Ok(json!("done"))
        }))
    }
}

/// The lease is renewed while a call runs: a sweep after the first lease would have expired
/// finds it still running (not in doubt), and it finishes normally.
async fn a_running_call_keeps_its_lease(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some(store) = store(backend, &dir).await else {
        return;
    };
    let tool = Arc::new(Slow);
    let mut scope = Scope::new(ScopeId::Gateway);
    scope.add(spec_of(tool.as_ref())).unwrap();
    let egress = GuardedClient::new(EgressPolicy::default()).unwrap();
    let gateway = Gateway::builder(Arc::clone(&store), egress, Arc::new(Credentials::default()))
        .scope(scope)
        .unwrap()
        .local(tool)
        .lease(Duration::from_millis(300))
        .build();
    let session = gateway
        .open_session("test", None, &ScopeId::Gateway)
        .await
        .unwrap();
    let ctx = CallContext {
        scope: ScopeId::Gateway,
        session,
        call_id: "slow-1".into(),
        principal: None,
        groups: None,
        channel: "test",
        downstream: Default::default(),
    };
    let sweeper = async {
        tokio::time::sleep(Duration::from_millis(650)).await;
        store.sweep(time::OffsetDateTime::now_utc()).await.unwrap()
    };
    let (outcome, swept) = tokio::join!(gateway.call(&ctx, "slow", json!({})), sweeper);
    assert!(swept.in_doubt.is_empty(), "{swept:?}");
    let row = outcome.unwrap().invocation().clone();
    assert_eq!(row.state, InvocationState::Succeeded);
    assert_eq!(row.attempts, 1);
}
