//! `/healthz` (the process answers) and `/readyz` (the ledger answers).

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;

use super::AppState;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
}

async fn ready(State(state): State<AppState>) -> (StatusCode, &'static str) {
    // A read of an id that cannot exist: "not found" proves the database answered.
    match state
        .gateway
        .store()
        .get(airlock_ledger::InvocationId::new())
        .await
    {
        Ok(_) | Err(airlock_ledger::LedgerError::NotFound(_)) => (StatusCode::OK, "ready"),
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "the ledger does not answer",
        ),
    }
}
