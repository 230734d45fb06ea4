//! The freeze API (docs/rules.md POLICY-51 … POLICY-56): list the freezes in force, freeze a
//! target, lift a freeze. Freezing and lifting are an admin's acts, recorded under the admin's
//! name with the reason given; the serving process holds the change before it answers, and every
//! other replica within a refresh period.
//!
//! Statuses: 201 frozen now (200 when the target was frozen already: the first freeze stands and
//! is returned), 200 lifted, 404 lifting what is not frozen, 422 a body that is not a freeze's
//! shape (an unknown kind, a missing name or reason).

use airlock_ledger::FreezeTarget;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::auth::Admin;
use super::error::ApiError;
use crate::result::freeze_json;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/freezes", get(list).post(freeze))
        .route("/freezes/lift", post(lift))
}

/// Body of `POST /v1/freezes`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FreezeBody {
    kind: String,
    #[serde(default)]
    name: String,
    reason: String,
}

/// Body of `POST /v1/freezes/lift`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LiftBody {
    kind: String,
    #[serde(default)]
    name: String,
}

async fn list(_: Admin, State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let freezes = state.gateway.store().freezes().await?;
    Ok(Json(
        json!({ "freezes": freezes.iter().map(freeze_json).collect::<Vec<_>>() }),
    ))
}

async fn freeze(
    Admin(by): Admin,
    State(state): State<AppState>,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let body: FreezeBody = parse(&body)?;
    let target = target(&body.kind, &body.name)?;
    if body.reason.trim().is_empty() {
        return Err(unprocessable("a freeze needs a reason"));
    }
    // Judged from what the ledger stored, not this process's copy, which may not hold yet a
    // freeze another replica just made: only a freeze stored since this request began is new.
    let asked = micros(time::OffsetDateTime::now_utc());
    let stored = state
        .gateway
        .freezes()
        .freeze(target, &body.reason, &by)
        .await?;
    let new = micros(stored.at) >= asked && stored.by == by && stored.reason == body.reason;
    let status = if new {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(freeze_json(&stored))))
}

/// A time in whole microseconds, the ledger's precision.
fn micros(at: time::OffsetDateTime) -> i128 {
    at.unix_timestamp_nanos() / 1_000
}

async fn lift(
    Admin(by): Admin,
    State(state): State<AppState>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let body: LiftBody = parse(&body)?;
    let target = target(&body.kind, &body.name)?;
    match state
        .gateway
        .freezes()
        .unfreeze(target.clone(), &by)
        .await?
    {
        Some(lifted) => Ok(Json(json!({ "lifted": freeze_json(&lifted), "by": by }))),
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_frozen",
            format!("{target} is not frozen"),
        )),
    }
}

fn target(kind: &str, name: &str) -> Result<FreezeTarget, ApiError> {
    FreezeTarget::parse(kind, name).map_err(|e| unprocessable(&e.to_string()))
}

fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| unprocessable(&format!("the request body is not a valid freeze: {e}")))
}

fn unprocessable(message: &str) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "bad_body", message)
}
