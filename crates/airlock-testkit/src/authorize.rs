//! The issuer's authorization server: dynamic client registration (RFC 7591), an authorization
//! endpoint that approves at once (no person, no login page), and a token endpoint that checks
//! PKCE (S256) and issues a JWT access token whose `aud` is the `resource` asked for (RFC 8707)
//! and whose `scope` is the scope asked for. Enough for an MCP SDK client's OAuth flow.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::{Form, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::keys::{IssuerState, Pending, b64, lock, sign_newest};

type Params = HashMap<String, String>;

pub(crate) fn router() -> Router<Arc<Mutex<IssuerState>>> {
    Router::new()
        .route("/register", post(register))
        .route("/authorize", get(authorize))
        .route("/token", post(token))
}

async fn register(
    State(state): State<Arc<Mutex<IssuerState>>>,
    Json(mut body): Json<Value>,
) -> Response {
    let mut state = lock(&state);
    state.authorize.clients += 1;
    body["client_id"] = json!(format!("client-{}", state.authorize.clients));
    body["token_endpoint_auth_method"] = json!("none");
    (StatusCode::CREATED, Json(body)).into_response()
}

/// Approves at once: redirects to `redirect_uri` with a code bound to the PKCE challenge.
async fn authorize(
    State(state): State<Arc<Mutex<IssuerState>>>,
    Query(q): Query<Params>,
) -> Response {
    let ok = q.get("response_type").map(String::as_str) == Some("code")
        && q.get("code_challenge_method").map(String::as_str) == Some("S256")
        && q.contains_key("client_id");
    let (Some(challenge), Some(redirect_uri), true) =
        (q.get("code_challenge"), q.get("redirect_uri"), ok)
    else {
        return (StatusCode::BAD_REQUEST, "invalid_request").into_response();
    };
    let mut state = lock(&state);
    let code = format!("code-{}", state.authorize.codes.len() + 1);
    state.authorize.codes.insert(
        code.clone(),
        Pending {
            challenge: challenge.clone(),
            redirect_uri: redirect_uri.clone(),
            resource: q.get("resource").cloned(),
            scope: q.get("scope").cloned(),
        },
    );
    let mut location = url_with(redirect_uri, "code", &code);
    if let Some(s) = q.get("state") {
        location = url_with(&location, "state", s);
    }
    (StatusCode::FOUND, [(header::LOCATION, location)]).into_response()
}

fn url_with(url: &str, key: &str, value: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    let value: String = value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    format!("{url}{sep}{key}={value}")
}

/// Redeems a code once, if its verifier matches the challenge and the redirect URI is the same.
async fn token(State(state): State<Arc<Mutex<IssuerState>>>, Form(f): Form<Params>) -> Response {
    let mut state = lock(&state);
    let pending = match (f.get("grant_type").map(String::as_str), f.get("code")) {
        (Some("authorization_code"), Some(code)) => state.authorize.codes.remove(code),
        _ => None,
    };
    let Some(pending) = pending else {
        return oauth_error("invalid_grant");
    };
    let verifier = f.get("code_verifier").map_or("", String::as_str);
    if b64(&Sha256::digest(verifier.as_bytes())) != pending.challenge
        || f.get("redirect_uri") != Some(&pending.redirect_uri)
    {
        return oauth_error("invalid_grant");
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let resource = f.get("resource").cloned().or(pending.resource);
    let scope = f.get("scope").cloned().or(pending.scope);
    let claims = json!({
        "iss": state.origin, "sub": state.subject, "aud": resource,
        "scope": scope, "iat": now, "exp": now + 3600,
    });
    let access_token = sign_newest(&state, &claims);
    Json(json!({
        "access_token": access_token, "token_type": "Bearer", "expires_in": 3600, "scope": scope,
    }))
    .into_response()
}

fn oauth_error(code: &str) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({"error": code}))).into_response()
}
