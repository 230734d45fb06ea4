//! airlock runtime: how a tool call goes from a caller to a settled ledger row.
//!
//! The modules follow the call's path:
//! - [`Gateway`] (`gateway`): the one path every channel takes — resolve the tool in its
//!   scope, validate the arguments, record the row, apply the policy by its state, claim,
//!   execute, finish. Nothing else runs tools.
//! - `execute`: the executors by source — tenant HTTP APIs ([`api`]), remote MCP servers, the
//!   `fetch` builtin and [`LocalTool`]s — each through the egress guard; [`egress_policy`]
//!   turns `[egress]` settings into the guard's policy.
//! - [`arguments`]: every tool's arguments checked against its input schema, once per call.
//! - [`decisions`]: a person's decision on a parked call, the list of what waits for one, and
//!   the worker that runs approvals nobody waits for.
//! - [`McpHost`] (`mcp_host`): the gateway as the MCP endpoint's tool and offer host — what
//!   only the endpoint needs (call keys, awaits, withdrawals, rounds, relayed tasks) lives there.
//! - [`agent`]: agent runs — the loop that sends a model's tool calls along the one path,
//!   parks, resumes exactly once, proposes and nests sub-agents — and its resume worker.
//! - [`notify`]: the outbox's notifications delivered to webhooks and Slack, and Slack's
//!   button clicks verified.
//! - [`vault`]: each principal's own credential for the connections that take one, sealed in
//!   the ledger, and the calls that wait for one.
//!
//! Every [`Outcome`] is read from the row it reports. A tool's own failure is a
//! [`ToolError`] stored on its row, never an `Err`.

pub mod agent;
pub mod arguments;
pub mod decisions;
mod egress;
mod error;
mod execute;
pub mod freeze;
mod gateway;
mod mcp_host;
pub mod notify;
pub mod oauth;
mod offered;
mod outcome;
pub mod pins;
mod rate_limit;
mod session;
pub mod vault;

/// The ledger, re-exported for embedders (stores, rows, local tools' transactions).
pub use airlock_ledger as ledger;
pub use egress::egress_policy;
pub use error::{ToolError, ToolErrorKind};
pub use execute::api;
pub use execute::local::{LocalBody, LocalTool};
pub use execute::mcp::{Discovered, DiscoveryError, discover};
pub use gateway::{
    CallContext, Definitions, EVENTS, Gateway, GatewayBuilder, GatewayError, HowToDecide,
    InvalidSchema, MAX_PROPOSALS_PER_RUN, ProposalRoom, RunCall,
};
pub use mcp_host::McpHost;
pub use offered::Offered;
pub use outcome::{Outcome, OutcomeKind};
