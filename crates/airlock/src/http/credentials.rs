//! The credentials API (docs/rules.md CALL-13): each person sets, lists and revokes their own
//! credential for a connection declared `per_principal = true`; an admin lists and revokes
//! anyone's.
//!
//! Guarantees: the principal a credential is set for is always the token's (a caller's token
//! of `[[mcp.tokens]]`, or an admin's for the admin's own), never something the body says; a
//! secret goes straight into a `SecretString`, is sealed before it is stored, and is never
//! shown again — no reply, error or log line holds it (a reply names its keyed digest); a
//! revocation is in effect on this replica when it is answered and on every other within one
//! refresh period.

use airlock_runtime::vault::{PersonalVault, VaultError};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{delete, get, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::auth::{Admin, run_requester};
use super::error::ApiError;
use super::runs::body::{CredentialBody, run_credential};

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/credentials", get(list_mine))
        .route(
            "/credentials/{connection}",
            put(set_mine).delete(revoke_mine),
        )
        .route(
            "/principals/{principal}/credentials",
            get(list_of).delete(revoke_all),
        )
        .route(
            "/principals/{principal}/credentials/{connection}",
            delete(revoke_one),
        )
}

/// Body of `PUT /v1/credentials/{connection}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetBody {
    /// A string, or `{username, password}` for `basic`.
    credential: CredentialBody,
}

fn vault(state: &AppState) -> Result<&PersonalVault, ApiError> {
    state.gateway.vault().map(AsRef::as_ref).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "no connection of this deployment takes each principal's own credential",
        )
    })
}

fn vault_error(error: VaultError) -> ApiError {
    match error {
        VaultError::NotPerPrincipal(_) => {
            ApiError::new(StatusCode::NOT_FOUND, "not_found", error.to_string())
        }
        VaultError::Exchanged(_) => {
            ApiError::new(StatusCode::CONFLICT, "exchanged", error.to_string())
        }
        VaultError::Invalid(_) => {
            ApiError::new(StatusCode::BAD_REQUEST, "bad_body", error.to_string())
        }
        VaultError::Sealing(_) | VaultError::Ledger(_) => ApiError::internal(&error),
    }
}

async fn set_mine(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(connection): Path<String>,
    body: Result<Json<SetBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let principal = run_requester(&state, &headers)?.into_principal();
    let vault = vault(&state)?;
    // The rejection's text names the field and the type, never the value.
    let Json(body) = body.map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_body",
            describe(&e.body_text()),
        )
    })?;
    let credential = run_credential(Some(body.credential), "credential")?;
    let released = vault
        .set(&connection, &principal, &credential, &principal)
        .await
        .map_err(vault_error)?;
    tracing::warn!(target: airlock_runtime::EVENTS, connection, principal, released = released.len(), "credential set");
    let released: Vec<String> = released.iter().map(ToString::to_string).collect();
    Ok(Json(json!({
        "connection": connection,
        "principal": principal,
        "released": released,
    })))
}

/// A JSON rejection's text without any part of the body.
fn describe(text: &str) -> String {
    if text.contains("untagged enum CredentialBody") {
        "`credential` is a string, or a mapping with `username` and `password`".to_owned()
    } else {
        text.split(" at line ").next().unwrap_or(text).to_owned()
    }
}

async fn list_mine(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let principal = run_requester(&state, &headers)?.into_principal();
    listed(&state, Some(&principal)).await
}

async fn list_of(
    _: Admin,
    State(state): State<AppState>,
    Path(principal): Path<String>,
) -> Result<Json<Value>, ApiError> {
    listed(&state, Some(&principal)).await
}

async fn listed(state: &AppState, principal: Option<&str>) -> Result<Json<Value>, ApiError> {
    let rows = vault(state)?.list(principal).await.map_err(vault_error)?;
    Ok(Json(json!({ "credentials": rows })))
}

async fn revoke_mine(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(connection): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let principal = run_requester(&state, &headers)?.into_principal();
    revoke(&state, Some(&connection), &principal, &principal.clone()).await
}

async fn revoke_one(
    Admin(by): Admin,
    State(state): State<AppState>,
    Path((principal, connection)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    revoke(&state, Some(&connection), &principal, &by).await
}

/// Every credential of `principal` (an admin disabling a principal's access).
async fn revoke_all(
    Admin(by): Admin,
    State(state): State<AppState>,
    Path(principal): Path<String>,
) -> Result<Json<Value>, ApiError> {
    revoke(&state, None, &principal, &by).await
}

async fn revoke(
    state: &AppState,
    connection: Option<&str>,
    principal: &str,
    by: &str,
) -> Result<Json<Value>, ApiError> {
    let removed = vault(state)?
        .revoke(connection, principal, by)
        .await
        .map_err(vault_error)?;
    tracing::warn!(target: airlock_runtime::EVENTS, connection, principal, by, removed, "credential revoked");
    Ok(Json(
        json!({ "principal": principal, "connection": connection, "revoked": removed }),
    ))
}
