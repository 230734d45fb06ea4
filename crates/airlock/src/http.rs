//! The HTTP server: one router per surface, merged here. Handlers are thin: extract, call one
//! runtime or ledger function, map the error in one place ([`error::ApiError`]).

mod approvals;
mod auth;
mod credentials;
mod delegations;
mod error;
mod freezes;
mod in_flight;
mod inbox;
mod limits;
mod listen;
mod ops;
mod runs;
mod slack;
mod trace;

use std::sync::Arc;

use airlock_mcp::{EndpointConfig, ToolHost};
use airlock_runtime::agent::Agents;
use airlock_runtime::notify::SlackInteractions;
use airlock_runtime::{Gateway, McpHost};
use airlock_spec::ServerLimits;
use axum::Router;

use crate::boot::Tokens;

pub use listen::serve;

/// What every handler may reach.
#[derive(Clone)]
pub struct AppState {
    /// The gateway (and through it, the ledger).
    pub gateway: Arc<Gateway>,
    /// Runs agents (the run API and its WebSocket).
    pub agents: Agents,
    /// Admin tokens for the approvals API.
    pub admin: Tokens,
    /// Who may call the MCP endpoint, and under which host names.
    pub mcp: EndpointConfig,
    /// `[server]`: how many requests may be in progress, overall and per principal.
    pub limits: ServerLimits,
    /// `[notify.slack]`: the verifier of Slack's button clicks (none: the route answers 404).
    pub slack: Option<Arc<SlackInteractions>>,
    /// `max_grant`: the longest grant a person may give with an approval (POLICY-62).
    pub max_grant: std::time::Duration,
}

/// The whole HTTP surface: operations, the decisions API, the run API and its WebSocket, the
/// inbox (`/inbox`), Slack's interactions, and the MCP endpoint (`POST /mcp`, `POST
/// /agents/{name}/mcp`), built in `airlock-mcp` on the gateway. Every route but the operations
/// ones counts against the in-flight bounds (OPS-13); a WebSocket only while it is being
/// upgraded.
pub fn app(state: AppState) -> Router {
    let host: Arc<dyn ToolHost> = Arc::new(McpHost::new(state.gateway.clone()));
    let mcp = airlock_mcp::router(host, state.mcp.clone());
    let in_flight = in_flight::InFlight::new(&state, &state.limits);
    let bounded = Router::new()
        .nest(
            "/v1",
            approvals::router()
                .merge(credentials::router())
                .merge(delegations::router())
                .merge(freezes::router())
                .merge(limits::router())
                .merge(runs::router())
                .merge(slack::router()),
        )
        .with_state(state.clone())
        .merge(inbox::router(state.clone()))
        .merge(mcp)
        .layer(axum::middleware::from_fn_with_state(
            in_flight,
            in_flight::limit,
        ));
    Router::new()
        .merge(ops::router())
        .with_state(state)
        .merge(bounded)
}
