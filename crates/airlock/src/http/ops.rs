//! `/healthz` (the process answers), `/readyz` (the ledger answers) and `/metrics` (Prometheus
//! text, for an admin token: counters name the deployment's tools, the operator's business).
//!
//! The metrics recorder is installed once per process, on first use; if another recorder got
//! there first (an embedding service's own), `/metrics` says so instead of serving nothing.
//! Histograms are served as Prometheus histograms with fixed buckets (OPS-27): latencies in
//! seconds, batch sizes in jobs. The ledger's gauges (open calls by state, in doubt) are read
//! afresh at each scrape, one grouped count (OPS-30).

use std::sync::OnceLock;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

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
        .get_or_init(|| builder().ok()?.install_recorder().ok())
        .as_ref()
}

/// Latency buckets, in seconds: from a cached answer (1 ms) to the egress deadline (30 s).
const SECONDS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Batch-size buckets, in jobs per commit, up to the writer's largest batch.
const JOBS: [f64; 9] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];

/// The recorder's builder with airlock's buckets.
fn builder() -> Result<PrometheusBuilder, metrics_exporter_prometheus::BuildError> {
    PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".to_owned()), &SECONDS)?
        .set_buckets_for_metric(
            Matcher::Full("airlock_ledger_commit_batch_size".to_owned()),
            &JOBS,
        )
}

async fn metrics(_: Admin, State(state): State<AppState>) -> Response {
    refresh_gauges(&state).await;
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

/// `airlock_open_calls{state}` for every open state and `airlock_in_doubt_calls`, from the
/// ledger now. A ledger that does not answer leaves the last values, and says so in the log.
async fn refresh_gauges(state: &AppState) {
    match state.gateway.store().open_counts().await {
        Ok(counts) => {
            for (open, n) in counts {
                #[allow(clippy::cast_precision_loss)] // row counts stay far below 2^52
                let n = n as f64;
                metrics::gauge!("airlock_open_calls", "state" => open.as_str()).set(n);
                if open == airlock_ledger::InvocationState::InDoubt {
                    metrics::gauge!("airlock_in_doubt_calls").set(n);
                }
            }
        }
        Err(error) => tracing::warn!(%error, "metrics: the ledger's open counts could not be read"),
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
