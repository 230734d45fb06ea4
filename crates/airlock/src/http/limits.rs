//! `GET /v1/limits` (docs/rules.md POLICY-60): every limit with shares counting in its window
//! now, what it holds, its cap and what is left — for an admin token.

use airlock_ledger::LimitUsage;
use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use super::AppState;
use super::auth::Admin;
use super::error::ApiError;

pub(super) fn router() -> Router<AppState> {
    Router::new().route("/limits", get(list))
}

async fn list(_: Admin, State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let usage = state.gateway.store().limit_usage().await?;
    Ok(Json(
        json!({ "limits": usage.iter().map(limit_json).collect::<Vec<_>>() }),
    ))
}

/// Millionths of the limit's unit as the decimal a person reads.
#[allow(clippy::cast_precision_loss)]
fn units(micros: i64) -> f64 {
    micros as f64 / 1_000_000.0
}

fn limit_json(u: &LimitUsage) -> Value {
    json!({
        "key": u.key,
        "label": u.label,
        "unit": u.unit,
        "used": units(u.used),
        "max": units(u.cap),
        "left": units(u.cap.saturating_sub(u.used).max(0)),
        "window_seconds": u.window.as_secs(),
    })
}
