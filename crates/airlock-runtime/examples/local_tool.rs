//! Embedding airlock in a Rust service: register your own tool and call it through the same
//! path as every other tool — a ledger row first, the approval policy, exactly-once execution.
//!
//! `cargo run -p airlock-runtime --example local_tool`

#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;

use airlock_egress::{EgressPolicy, GuardedClient};
use airlock_runtime::ledger::{Decision, Settlement, SqliteStore, Store, StoreConfig, ToolError};
use airlock_runtime::{CallContext, Gateway, LocalBody, LocalTool, OutcomeKind};
use airlock_spec::{
    Approval, Credentials, Policy, Scope, ScopeId, ToolDefinition, ToolName, ToolSource, ToolSpec,
};
use serde_json::{Value, json};

/// Refunds an order — a write, so every call waits for a person.
struct Refund;

impl LocalTool for Refund {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: ToolName::try_from("refund_order").unwrap(),
            description: "Refund an order by id.".into(),
            input_schema: json!({"type": "object", "properties": {"order": {"type": "string"}, "amount": {"type": "number"}}, "required": ["order", "amount"]}),
        }
    }

    fn policy(&self) -> Policy {
        Policy {
            approval: Approval::Always,
            ..Policy::default()
        }
    }

    fn invoke(&self, arguments: Value) -> LocalBody {
        LocalBody::Plain(Box::pin(async move {
            let amount = arguments["amount"]
                .as_f64()
                .ok_or_else(|| ToolError::bad_arguments("amount"))?;
            // Your service's own code goes here (payment API, database, …).
            Ok(json!({"refunded": amount, "order": arguments["order"]}))
        }))
    }
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open(dir.path().join("ledger.sqlite"), StoreConfig::default())
            .await
            .unwrap(),
    );
    let tool = Arc::new(Refund);
    let mut scope = Scope::new(ScopeId::Gateway);
    scope
        .add(ToolSpec {
            definition: tool.definition(),
            source: ToolSource::Local,
            policy: tool.policy(),
        })
        .unwrap();
    let egress = GuardedClient::new(EgressPolicy::default()).unwrap();
    let gateway = Gateway::builder(store, egress, Arc::new(Credentials::default()))
        .scope(scope)
        .expect("schemas compile")
        .local(tool)
        .build();

    let session = gateway
        .open_session("example", Some("support-bot".into()), &ScopeId::Gateway)
        .await
        .unwrap();
    let ctx = CallContext {
        scope: ScopeId::Gateway,
        session,
        call_id: "refund-1".into(),
        principal: Some("support-bot".into()),
        groups: None,
        channel: "example",
        downstream: Default::default(),
    };
    let parked = gateway
        .call(&ctx, "refund_order", json!({"order": "A-17", "amount": 5}))
        .await
        .unwrap();
    let id = parked.invocation().id;
    println!("parked: {} is {}", id, parked.invocation().state);

    gateway
        .store()
        .decide(id, "alice", Decision::Approve)
        .await
        .unwrap();
    let done = gateway.continue_approved(id).await.unwrap();
    assert_eq!(done.kind(), OutcomeKind::Completed, "approved calls run");
    let Some(Settlement::Succeeded(result)) = done.invocation().settlement() else {
        panic!("the approved call succeeds")
    };
    println!("after alice approved: {result}");
    assert_eq!(result["refunded"], 5.0);
}
