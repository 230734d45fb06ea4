//! `/healthz` (the process answers), `/readyz` (the ledger answers) and `/metrics` (Prometheus
//! text, for an admin token: counters name the deployment's tools, the operator's business).
//!
//! The metrics recorder is installed once per process, on first use; if another recorder got
//! there first (an embedding service's own), `/metrics` says so instead of serving nothing.

use std::sync::OnceLock;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use super::AppState;
use super::auth::Admin;

pub(super) fn router() -> Router<AppState> {
    // Installed with the router, so counters recorded before the first scrape are kept.
    let _ = recorder();
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .route("/metrics", get(metrics))
}

/// The process's Prometheus recorder, installed on first use; `None` if another recorder was
/// installed before it.
fn recorder() -> Option<&'static PrometheusHandle> {
    static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    HANDLE
        .get_or_init(|| PrometheusBuilder::new().install_recorder().ok())
        .as_ref()
}

async fn metrics(_: Admin) -> Response {
    match recorder() {
        Some(handle) => (
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
            handle.render(),
        )
            .into_response(),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            "another metrics recorder is installed in this process",
        )
            .into_response(),
    }
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
