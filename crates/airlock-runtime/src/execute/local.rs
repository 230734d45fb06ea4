//! Local tools: Rust code compiled into the process that embeds airlock, registered by name
//! and called through the same gateway path as every other tool (ledger row, policy, claim).
//!
//! A local tool may be `transactional`: its body then gets the ledger's own transaction, so
//! its writes and the row's `succeeded` commit together, or roll back together on failure.

use airlock_ledger::{ToolError, TxTool};
use airlock_spec::{Policy, ToolDefinition};
use futures::future::BoxFuture;
use serde_json::Value;

/// The body of one local call.
pub enum LocalBody {
    /// Runs on its own; at-most-once or idempotent by the tool's policy.
    Plain(BoxFuture<'static, Result<Value, ToolError>>),
    /// Runs inside the ledger's transaction (policy effect `transactional`).
    Transactional(TxTool),
}

/// A tool implemented in Rust by the embedding service.
pub trait LocalTool: Send + Sync + 'static {
    /// What the model sees: name, description, input schema.
    fn definition(&self) -> ToolDefinition;
    /// Approval, effect (may be `transactional`), mode.
    fn policy(&self) -> Policy;
    /// Starts one call with validated arguments.
    fn invoke(&self, arguments: Value) -> LocalBody;
}
