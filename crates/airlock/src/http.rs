//! The HTTP server: one router per surface, merged here. Handlers are thin: extract, call one
//! runtime or ledger function, map the error in one place ([`error::ApiError`]).

mod approvals;
mod auth;
mod error;
mod ops;

use std::future::Future;
use std::sync::Arc;

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
}

/// The whole HTTP surface.
pub fn app(state: AppState) -> Router {
    Router::new()
        .merge(ops::router())
        .nest("/v1", approvals::router())
        .with_state(state)
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
