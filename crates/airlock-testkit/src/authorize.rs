//! The issuer's authorization server: dynamic client registration (RFC 7591) and an
//! authorization endpoint that approves at once (no person, no login page), handing out a code
//! bound to the PKCE challenge, redirect URI, resource and scope asked for (the token endpoint,
//! in `token`, redeems it). Enough for an MCP SDK client's OAuth flow.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};

use crate::keys::{Granted, IssuerState, Pending, lock};

type Params = HashMap<String, String>;

pub(crate) fn router() -> Router<Arc<Mutex<IssuerState>>> {
    Router::new()
        .route("/register", post(register))
        .route("/authorize", get(authorize))
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
    state.authorize.issued += 1;
    let code = format!("code-{}", state.authorize.issued);
    let granted = Granted {
        subject: state.subject.clone(),
        resource: q.get("resource").cloned(),
        scope: q.get("scope").cloned(),
    };
    state.authorize.codes.insert(
        code.clone(),
        Pending {
            challenge: challenge.clone(),
            redirect_uri: redirect_uri.clone(),
            granted,
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
