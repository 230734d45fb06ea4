//! `POST /v1/delegations` (docs/rules.md POLICY-64): the signed-in admin hands their role as a
//! decider to another principal for a while; `GET /v1/delegations?to=NAME` lists the ones to a
//! principal in force now.
//!
//! Guarantees: the delegator is always the token's principal (a body naming another is a 422),
//! a delegation lasts at most [`MAX_DELEGATION`], and every delegation is a ledger row kept
//! for audit and logged as `delegated`.

use std::time::Duration;

use airlock_ledger::Delegation;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use time::format_description::well_known::Rfc3339;

use super::AppState;
use super::auth::Admin;
use super::error::ApiError;

/// The longest a delegation may last.
pub(crate) const MAX_DELEGATION: Duration = Duration::from_secs(30 * 24 * 3600);

pub(super) fn router() -> Router<AppState> {
    Router::new().route("/delegations", post(delegate).get(list))
}

/// Body of `POST /v1/delegations`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DelegateBody {
    to: String,
    /// How long, as `8h`, `3d`.
    #[serde(rename = "for")]
    lasts: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    to: String,
}

fn unprocessable(message: String) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "bad_body", message)
}

async fn delegate(
    Admin(from): Admin,
    State(state): State<AppState>,
    body: Result<Json<DelegateBody>, axum::extract::rejection::JsonRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let Json(body) = body.map_err(|e| unprocessable(e.body_text()))?;
    if body.to.trim().is_empty() || body.to.contains(char::is_whitespace) {
        return Err(unprocessable(format!(
            "`{}` is not a principal name",
            body.to
        )));
    }
    let lasts = airlock_spec::parse_duration(&body.lasts)
        .filter(|d| !d.is_zero() && *d <= MAX_DELEGATION)
        .ok_or_else(|| {
            unprocessable(format!(
                "`for: {}` is not a duration from 1s to {}d",
                body.lasts,
                MAX_DELEGATION.as_secs() / 86_400
            ))
        })?;
    let store = state.gateway.store();
    let stored = store.delegate(from.clone(), body.to.clone(), lasts).await?;
    tracing::warn!(target: airlock_runtime::EVENTS, from, to = stored.to, "delegated");
    Ok((StatusCode::CREATED, Json(delegation_json(&stored))))
}

async fn list(
    _: Admin,
    State(state): State<AppState>,
    Query(query): Query<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let found = state.gateway.store().delegations_to(query.to).await?;
    let listed: Vec<Value> = found.iter().map(delegation_json).collect();
    Ok(Json(json!({ "delegations": listed })))
}

fn delegation_json(d: &Delegation) -> Value {
    json!({ "from": d.from, "to": d.to, "until": d.until.format(&Rfc3339).ok() })
}
