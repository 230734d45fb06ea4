//! The HTTP server: one router per surface, merged here. Handlers are thin: extract, call one
//! runtime or ledger function, map the error in one place ([`error::ApiError`]).

mod approvals;
mod auth;
mod error;
mod ops;

use std::future::Future;
use std::sync::Arc;

use airlock_mcp::{EndpointConfig, ToolHost};
use airlock_runtime::Gateway;
use axum::Router;
use tokio::net::TcpListener;

use crate::boot::Tokens;

/// What every handler may reach.
#[derive(Clone)]
pub struct AppState {
    /// The gateway (and through it, the ledger).
    pub gateway: Arc<Gateway>,
    /// Admin tokens for the approvals API.
    pub admin: Tokens,
    /// Who may call the MCP endpoint, and under which host names.
    pub mcp: EndpointConfig,
}

/// The whole HTTP surface: operations, the decisions API, and the MCP endpoint
/// (`POST /mcp`, `POST /agents/{name}/mcp`), built in `airlock-mcp` on the gateway.
pub fn app(state: AppState) -> Router {
    let host: Arc<dyn ToolHost> = state.gateway.clone();
    let mcp = airlock_mcp::router(host, state.mcp.clone());
    Router::new()
        .merge(ops::router())
        .nest("/v1", approvals::router())
        .with_state(state)
        .merge(mcp)
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets in-flight requests finish.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}
