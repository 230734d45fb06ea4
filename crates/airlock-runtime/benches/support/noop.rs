//! The benches' tool: an ungated idempotent local no-op, with the limits a bench gives it, in a
//! gateway of its own on a store.

use std::sync::Arc;

use airlock_egress::{EgressPolicy, GuardedClient};
use airlock_runtime::ledger::Store;
use airlock_runtime::{Gateway, LocalBody, LocalTool};
use airlock_spec::{
    Credentials, Effect, Limit, Policy, Scope, ScopeId, ToolDefinition, ToolName, ToolSource,
    ToolSpec,
};
use serde_json::{Value, json};

struct Noop {
    limits: Vec<Limit>,
}

impl LocalTool for Noop {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: ToolName::try_from("noop").unwrap(),
            description: "Does nothing.".into(),
            input_schema: json!({"type": "object"}),
        }
    }
    fn policy(&self) -> Policy {
        Policy {
            effect: Effect::Idempotent,
            limits: self.limits.clone(),
            ..Policy::default()
        }
    }
    fn invoke(&self, _arguments: Value) -> LocalBody {
        LocalBody::Plain(Box::pin(async { Ok(json!({"ok": true})) }))
    }
}

/// A gateway on `store` whose only tool is `noop`, under `limits`.
pub(crate) fn gateway(store: Arc<dyn Store>, limits: Vec<Limit>) -> Arc<Gateway> {
    let tool = Arc::new(Noop { limits });
    let mut scope = Scope::new(ScopeId::Gateway);
    scope
        .add(ToolSpec {
            definition: tool.definition(),
            source: ToolSource::Local,
            policy: tool.policy(),
        })
        .unwrap();
    let egress = GuardedClient::new(EgressPolicy::default()).unwrap();
    Arc::new(
        Gateway::builder(store, egress, Arc::new(Credentials::default()))
            .scope(scope)
            .expect("schemas compile")
            .local(tool)
            .build(),
    )
}
