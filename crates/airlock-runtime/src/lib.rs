//! airlock runtime: how tools run.
//!
//! For now this crate holds the declarative HTTP executor for tenant APIs (seed 001
//! `type: api`) — argument checking, request building, sending through the egress guard and
//! response handling — and the translation of `[egress]` settings into the guard's policy.
//! Later it also holds the registry and the gateway.

pub mod api;
mod approvals;
mod egress;
mod error;
mod gateway;
mod local;
mod mcp_host;
mod mcp_tools;
mod rate_limit;

/// The ledger, re-exported for embedders (stores, rows, local tools' transactions).
pub use airlock_ledger as ledger;
pub use approvals::decide;
pub use egress::egress_policy;
pub use error::{ToolError, ToolErrorKind};
pub use gateway::{CallContext, Gateway, GatewayBuilder, GatewayError, Outcome};
pub use local::{LocalBody, LocalTool};
pub use mcp_tools::{DiscoveryError, discover};
