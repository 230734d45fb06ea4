//! The credentials API (docs/rules.md CALL-13): each person sets, lists and revokes their own
//! credential for a connection declared `per_principal = true`, or asks for a link that
//! connects their account (CALL-15); an admin lists and revokes anyone's. The connect routes
//! (`/v1/connect/…`) are a browser's: the sealed ticket and state are their only authority.
//!
//! Guarantees: the principal a credential is set for is always the token's (a caller's token
//! of `[[mcp.tokens]]`, or an admin's for the admin's own), never something the body says; a
//! secret goes straight into a `SecretString`, is sealed before it is stored, and is never
//! shown again — no reply, error or log line holds it (a reply names its keyed digest); a
//! revocation is in effect on this replica when it is answered and on every other within one
//! refresh period.

use airlock_runtime::vault::{ConnectError, PersonalVault, VaultError};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{delete, get, post, put};
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
        .route("/credentials/{connection}/connect", post(connect_link))
        .route("/connect/callback", get(callback))
        .route("/connect/{connection}", get(begin))
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

fn vault_error(error: &VaultError) -> ApiError {
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
        VaultError::Sealing(_) | VaultError::Ledger(_) => ApiError::internal(error),
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
        .map_err(|e| vault_error(&e))?;
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
    let rows = vault(state)?
        .list(principal)
        .await
        .map_err(|e| vault_error(&e))?;
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
        .map_err(|e| vault_error(&e))?;
    tracing::warn!(target: airlock_runtime::EVENTS, connection, principal, by, removed, "credential revoked");
    Ok(Json(
        json!({ "principal": principal, "connection": connection, "revoked": removed }),
    ))
}

/// `POST /v1/credentials/{connection}/connect`: a link that connects the caller's own account
/// (valid 15 minutes; give it to nobody else).
async fn connect_link(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(connection): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let principal = run_requester(&state, &headers)?.into_principal();
    let url = vault(&state)?
        .connect_link(&connection, &principal)
        .map_err(|e| connect_error(&e))?;
    Ok(Json(
        json!({ "connection": connection, "url": url.as_str() }),
    ))
}

#[derive(Deserialize)]
struct TicketQuery {
    ticket: String,
}

/// `GET /v1/connect/{connection}?ticket=…`: sends the browser to the authorization server.
async fn begin(
    State(state): State<AppState>,
    Path(connection): Path<String>,
    Query(query): Query<TicketQuery>,
) -> Response {
    let started = vault(&state).and_then(|v| {
        v.begin_connect(&connection, &query.ticket)
            .map_err(|e| connect_error(&e))
    });
    match started {
        Ok(url) => Redirect::to(url.as_str()).into_response(),
        Err(error) => page(error.status(), "Not connected", error.message()),
    }
}

#[derive(Deserialize)]
struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
}

/// `GET /v1/connect/callback`: where the authorization server sends the person back.
async fn callback(State(state): State<AppState>, Query(query): Query<CallbackQuery>) -> Response {
    let (Some(code), Some(sealed)) = (query.code, query.state) else {
        // The server's own word for why (`access_denied`), never echoed unescaped.
        let why = query
            .error
            .unwrap_or_else(|| "no code came back".to_owned());
        let message = format!("The account was not connected: {why}.");
        return page(StatusCode::BAD_REQUEST, "Not connected", &message);
    };
    let vault = match vault(&state) {
        Ok(vault) => vault,
        Err(error) => return page(error.status(), "Not connected", error.message()),
    };
    match vault.finish_connect(&sealed, &code).await {
        Ok((connection, principal, released)) => {
            tracing::warn!(target: airlock_runtime::EVENTS, connection, principal, released = released.len(), "account connected");
            let message = format!(
                "{principal}'s account is connected to {connection}. {} waiting call(s) continue now; you can close this page.",
                released.len()
            );
            page(StatusCode::OK, "Connected", &message)
        }
        Err(error) => {
            let error = connect_error(&error);
            page(error.status(), "Not connected", error.message())
        }
    }
}

fn connect_error(error: &ConnectError) -> ApiError {
    let status = match error {
        ConnectError::Invalid | ConnectError::Expired | ConnectError::Used => {
            StatusCode::BAD_REQUEST
        }
        ConnectError::NotConnectable(_) => StatusCode::NOT_FOUND,
        ConnectError::Redeem(_) => StatusCode::BAD_GATEWAY,
        ConnectError::Vault(e) => return ApiError::internal(e),
    };
    ApiError::new(status, "not_connected", error.to_string())
}

/// A small HTML page for a person's browser; every text is escaped.
fn page(status: StatusCode, title: &str, message: &str) -> Response {
    let body = maud::html! {
        (maud::DOCTYPE)
        html { head { meta charset="utf-8"; title { (title) } } body { h1 { (title) } p { (message) } } }
    };
    (status, axum::response::Html(body.into_string())).into_response()
}
