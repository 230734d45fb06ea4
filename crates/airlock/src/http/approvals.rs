//! The decisions API: list what waits for a person, read a call, decide. The decider is the
//! authenticated admin; deciding writes the row and wakes waiters — execution happens through
//! the gateway's claim (here, a background task), never inline in the request.

use airlock_ledger::{ApprovalFilter, Decision, Invocation, InvocationId, Resolution};
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use time::format_description::well_known::Rfc3339;

use super::AppState;
use super::auth::Admin;
use super::error::ApiError;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/approvals", get(list))
        .route("/approvals/{id}/decision", post(decide))
        .route("/invocations/{id}", get(show))
}

/// Filters of `GET /v1/approvals`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    tool: Option<String>,
    principal: Option<String>,
    /// Only rows at least this many seconds old.
    older_than: Option<u64>,
}

/// Body of `POST /v1/approvals/{id}/decision`.
#[derive(Debug, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case", deny_unknown_fields)]
enum DecisionBody {
    // A struct variant, so unknown fields (such as a self-chosen decider) are refused too.
    Approve {},
    Deny { reason: String },
    Answer { text: String },
    Resolve { ran: bool, note: String },
}

async fn list(
    _admin: Admin,
    State(state): State<AppState>,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(query) =
        query.map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "bad_query", e.body_text()))?;
    let recorded_before = query
        .older_than
        .map(|secs| time::OffsetDateTime::now_utc() - std::time::Duration::from_secs(secs));
    let filter = ApprovalFilter {
        tool: query.tool,
        principal: query.principal,
        recorded_before,
        ..ApprovalFilter::default()
    };
    let rows = state.gateway.store().pending_approvals(filter).await?;
    Ok(Json(
        json!({ "approvals": rows.iter().map(invocation_json).collect::<Vec<_>>() }),
    ))
}

async fn show(
    _admin: Admin,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let row = state.gateway.store().get(parse_id(&id)?).await?;
    Ok(Json(invocation_json(&row)))
}

async fn decide(
    Admin(decider): Admin,
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Json<DecisionBody>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(&id)?;
    let Json(body) =
        body.map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "bad_body", e.body_text()))?;
    let decision = match body {
        DecisionBody::Approve {} => Decision::Approve,
        DecisionBody::Deny { reason } => Decision::Deny { reason },
        DecisionBody::Answer { text } => Decision::Answer { text },
        DecisionBody::Resolve { ran, note } => Decision::Resolve {
            resolution: if ran {
                Resolution::Ran
            } else {
                Resolution::DidNotRun
            },
            note,
        },
    };
    let row = airlock_runtime::decide(&state.gateway, id, &decider, decision).await?;
    Ok(Json(invocation_json(&row)))
}

fn parse_id(id: &str) -> Result<InvocationId, ApiError> {
    id.parse().map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_id",
            format!("`{id}` is not an invocation id"),
        )
    })
}

fn time(t: Option<time::OffsetDateTime>) -> Value {
    t.and_then(|t| t.format(&Rfc3339).ok())
        .map_or(Value::Null, Value::String)
}

/// A row as the API shows it (arguments are shown: approvers decide on them).
pub(crate) fn invocation_json(row: &Invocation) -> Value {
    json!({
        "id": row.id.to_string(),
        "tool": row.tool,
        "state": row.state.to_string(),
        "arguments": row.arguments,
        "principal": row.principal,
        "session_id": row.session_id.to_string(),
        "created_at": time(Some(row.created_at)),
        "expires_at": time(row.expires_at),
        "decision": row.decision.as_ref().map(|d| json!({"by": d.by, "decision": d.decision.to_string(), "reason": d.reason, "at": time(Some(d.at))})),
        "result": row.model_result(),
    })
}
