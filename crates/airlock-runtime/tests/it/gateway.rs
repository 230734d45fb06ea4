//! The one path of a call through a real SQLite ledger: policies, dedupe, bad arguments,
//! proposals, decisions, questions, rate limits, digests, transactional local tools.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use airlock_egress::{EgressPolicy, GuardedClient};
use airlock_runtime::ledger::{
    Decision, InvocationState, SqliteStore, Store, StoreConfig, ToolError, tx_tool,
};
use airlock_runtime::{CallContext, Gateway, LocalBody, LocalTool, Outcome};
use airlock_spec::{
    Approval, Builtin, Credentials, Effect, Mode, Policy, RateLimit, Scope, ScopeId,
    ToolDefinition, ToolName, ToolSource, ToolSpec,
};
use serde_json::{Value, json};

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
                    .map_err(|e| ToolError::new("database", e.to_string()))?;
                    if arguments["amount"] == json!(0) {
                        return Err(ToolError::new("refused", "amount must not be zero"));
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
    gateway: Gateway,
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

async fn fixture(policy: Policy, description_suffix: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("ledger.sqlite"), StoreConfig::default())
        .await
        .unwrap();
    gateway_on(Arc::new(store), policy, description_suffix, dir).await
}

async fn gateway_on(
    store: Arc<dyn Store>,
    policy: Policy,
    description_suffix: &str,
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
    let ask = airlock_spec::builtin_definition(Builtin::AskHuman);
    scope
        .add(ToolSpec {
            definition: ask,
            source: ToolSource::Builtin(Builtin::AskHuman),
            policy: Policy::default(),
        })
        .unwrap();
    let egress = GuardedClient::new(EgressPolicy::default()).unwrap();
    let gateway = Gateway::builder(store, egress, Arc::new(Credentials::default()))
        .scope(scope)
        .local(tool)
        .build();
    Fixture {
        gateway,
        runs,
        _dir: dir,
    }
}

impl Fixture {
    async fn ctx(&self, call_id: &str) -> CallContext {
        let session = self
            .gateway
            .open_session("test", Some("ada".into()), &ScopeId::Gateway)
            .await
            .unwrap();
        CallContext {
            scope: ScopeId::Gateway,
            session,
            call_id: call_id.into(),
            principal: Some("ada".into()),
        }
    }
    fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }
}

fn policy(approval: Approval) -> Policy {
    Policy {
        approval,
        ..Policy::default()
    }
}

#[tokio::test]
async fn never_runs_at_once_and_a_retry_never_runs_twice() {
    let f = fixture(policy(Approval::Never), "").await;
    let ctx = f.ctx("c1").await;
    let Outcome::Completed(row) = f
        .gateway
        .call(&ctx, "count", json!({"amount": 5}))
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(row.model_result(), Some(json!({"echo": {"amount": 5}})));
    let again = f
        .gateway
        .call(&ctx, "count", json!({"amount": 5}))
        .await
        .unwrap();
    assert_eq!(again.invocation().id, row.id);
    assert_eq!(f.runs(), 1);
}

#[tokio::test]
async fn always_parks_then_runs_exactly_once_when_approved() {
    let f = fixture(policy(Approval::Always), "").await;
    let ctx = f.ctx("c1").await;
    let Outcome::Parked(row) = f
        .gateway
        .call(&ctx, "count", json!({"amount": 5}))
        .await
        .unwrap()
    else {
        panic!()
    };
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
        .filter(|o| matches!(o, Outcome::Completed(_)))
        .count();
    assert!(settled >= 1);
    assert_eq!(f.runs(), 1, "two continuers, one run");
    let row = f.gateway.store().get(row.id).await.unwrap();
    assert_eq!(row.state, InvocationState::Succeeded);
}

#[tokio::test]
async fn deny_never_runs_and_tells_the_model_why() {
    let f = fixture(policy(Approval::Always), "").await;
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
    let Outcome::Denied(row) = f.gateway.continue_approved(id).await.unwrap() else {
        panic!()
    };
    assert_eq!(row.model_result(), Some(json!({"denied": "too much"})));
    assert_eq!(f.runs(), 0);
}

#[tokio::test]
async fn bad_arguments_are_a_stored_tool_error_and_never_park_or_run() {
    let f = fixture(policy(Approval::Always), "").await;
    let ctx = f.ctx("c1").await;
    let Outcome::Completed(row) = f
        .gateway
        .call(&ctx, "count", json!({"amount": "five"}))
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(row.state, InvocationState::Failed);
    let error = row.error.unwrap();
    assert_eq!(error.kind, "bad_arguments");
    assert!(error.message.contains("/amount"), "{}", error.message);
    assert_eq!(f.runs(), 0);
}

#[tokio::test]
async fn unknown_tools_are_protocol_errors() {
    let f = fixture(policy(Approval::Never), "").await;
    let ctx = f.ctx("c1").await;
    let err = f.gateway.call(&ctx, "nope", json!({})).await.unwrap_err();
    assert_eq!(err.to_string(), "unknown tool `nope`");
}

#[tokio::test]
async fn propose_records_and_calls_nobody() {
    let f = fixture(
        Policy {
            mode: Mode::Propose,
            writes: true,
            ..Policy::default()
        },
        "",
    )
    .await;
    let ctx = f.ctx("c1").await;
    let Outcome::Proposed(row) = f
        .gateway
        .call(&ctx, "count", json!({"amount": 5}))
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(
        row.model_result(),
        Some(json!({"proposed": {"tool": "count", "arguments": {"amount": 5}}}))
    );
    assert_eq!(f.runs(), 0);
}

#[tokio::test]
async fn ask_human_parks_until_a_person_answers() {
    let f = fixture(policy(Approval::Never), "").await;
    let ctx = f.ctx("q1").await;
    let Outcome::Parked(row) = f
        .gateway
        .call(&ctx, "ask_human", json!({"question": "Ship it?"}))
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(row.state, InvocationState::AwaitingAnswer);
    f.gateway
        .store()
        .decide(row.id, "alice", Decision::Answer { text: "yes".into() })
        .await
        .unwrap();
    let Outcome::Completed(row) = f.gateway.continue_approved(row.id).await.unwrap() else {
        panic!()
    };
    assert_eq!(row.model_result().unwrap()["answer"], "yes");
}

#[tokio::test]
async fn rate_limits_refuse_before_running() {
    let limit = RateLimit {
        requests: 1,
        per: Duration::from_secs(60),
    };
    let f = fixture(
        Policy {
            rate_limit: Some(limit),
            ..Policy::default()
        },
        "",
    )
    .await;
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
    assert_eq!(error.kind, "rate_limited");
    assert!(
        error.message.contains("allows 1 calls per 60 s"),
        "{}",
        error.message
    );
    assert_eq!(f.runs(), 1);
}

#[tokio::test]
async fn an_approval_does_not_survive_a_changed_declaration() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite");
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open(&path, StoreConfig::default())
            .await
            .unwrap(),
    );
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
    let after = gateway_on(store, policy(Approval::Always), " Now different.", dir).await;
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

#[tokio::test]
async fn a_transactional_local_tool_commits_with_its_row() {
    let f = fixture(
        Policy {
            effect: Effect::Transactional,
            ..Policy::default()
        },
        "",
    )
    .await;
    let ok = f
        .gateway
        .call(&f.ctx("a").await, "count", json!({"amount": 3}))
        .await
        .unwrap();
    assert_eq!(ok.invocation().state, InvocationState::Succeeded);
    assert_eq!(ok.invocation().model_result(), Some(json!({"noted": 3})));
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
