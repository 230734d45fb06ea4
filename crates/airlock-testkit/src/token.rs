//! The issuer's token endpoint: the authorization code grant (PKCE S256 checked, a refresh
//! token issued), `refresh_token` (rotating: a refresh token works once), RFC 8693 token
//! exchange (`may_act` checked against the actor token) and RFC 7523 jwt-bearer as Entra's
//! on-behalf-of. Access tokens are JWTs whose `aud` is the resource or audience asked for and
//! whose `scope` is the scope asked for, living `token_lifetime` seconds.
//!
//! "A token it signed" is one [`crate::keys::mint`] made: the tokens it issued and those
//! [`crate::Issuer::sign`] made; forgeries and unpublished keys' tokens are not. Every request
//! is recorded ([`crate::Issuer::token_requests`]), refused ones too; with a client required
//! ([`crate::Issuer::require_client`]), one without its Basic credentials gets `invalid_client`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::{Form, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use percent_encoding::percent_decode_str;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::keys::{Granted, IssuerState, b64, lock, mint};

const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const ACCESS_TOKEN: &str = "urn:ietf:params:oauth:token-type:access_token";

type Params = HashMap<String, String>;

/// One request the token endpoint received, as sent.
#[derive(Debug, Clone)]
pub struct TokenRequest {
    /// `grant_type` (empty when missing).
    pub grant_type: String,
    /// Every form field.
    pub form: HashMap<String, String>,
    /// The client id and secret of an HTTP Basic `Authorization`, decoded.
    pub basic: Option<(String, String)>,
}

/// What a grant answers: a token response, or an OAuth error code.
type Answer = Result<Value, &'static str>;

pub(crate) async fn token(
    State(state): State<Arc<Mutex<IssuerState>>>,
    headers: HeaderMap,
    Form(f): Form<Params>,
) -> Response {
    let mut state = lock(&state);
    let basic = basic(&headers);
    let grant_type = f.get("grant_type").cloned().unwrap_or_default();
    state.token_requests.push(TokenRequest {
        grant_type: grant_type.clone(),
        form: f.clone(),
        basic: basic.clone(),
    });
    if state.client.is_some() && state.client != basic {
        return oauth_error(StatusCode::UNAUTHORIZED, "invalid_client");
    }
    let answer = match grant_type.as_str() {
        "authorization_code" => code(&mut state, &f),
        "refresh_token" => refresh(&mut state, &f),
        TOKEN_EXCHANGE => exchange(&mut state, &f),
        JWT_BEARER => on_behalf_of(&mut state, &f),
        _ => Err("unsupported_grant_type"),
    };
    match answer {
        Ok(body) => Json(body).into_response(),
        Err(code) => oauth_error(StatusCode::BAD_REQUEST, code),
    }
}

/// Redeems a code once, if its verifier matches the challenge and the redirect URI is the same.
fn code(state: &mut IssuerState, f: &Params) -> Answer {
    let pending = f
        .get("code")
        .and_then(|code| state.authorize.codes.remove(code))
        .ok_or("invalid_grant")?;
    let verifier = f.get("code_verifier").map_or("", String::as_str);
    if b64(&Sha256::digest(verifier.as_bytes())) != pending.challenge
        || f.get("redirect_uri") != Some(&pending.redirect_uri)
    {
        return Err("invalid_grant");
    }
    let mut granted = pending.granted;
    if let Some(resource) = f.get("resource") {
        granted.resource = Some(resource.clone());
    }
    if let Some(scope) = f.get("scope") {
        granted.scope = Some(scope.clone());
    }
    Ok(with_refresh(state, granted))
}

/// Uses a refresh token once: a new access token and a new refresh token for the same grant.
/// Without rotation ([`crate::Issuer::set_refresh_rotation`]), the same refresh token stays
/// good and none is issued.
fn refresh(state: &mut IssuerState, f: &Params) -> Answer {
    let token = f.get("refresh_token").ok_or("invalid_grant")?;
    if !state.authorize.rotate {
        let granted = state.authorize.refresh.get(token).ok_or("invalid_grant")?;
        let claims =
            json!({"sub": granted.subject, "aud": granted.resource, "scope": granted.scope});
        let scope = granted.scope.clone();
        return Ok(issue(state, claims, scope.as_deref()));
    }
    let granted = state
        .authorize
        .refresh
        .remove(token)
        .ok_or("invalid_grant")?;
    Ok(with_refresh(state, granted))
}

fn with_refresh(state: &mut IssuerState, granted: Granted) -> Value {
    let claims = json!({"sub": granted.subject, "aud": granted.resource, "scope": granted.scope});
    let mut body = issue(state, claims, granted.scope.as_deref());
    state.authorize.issued += 1;
    let refresh_token = format!("refresh-{}", state.authorize.issued);
    state
        .authorize
        .refresh
        .insert(refresh_token.clone(), granted);
    body["refresh_token"] = json!(refresh_token);
    body
}

/// RFC 8693: a token for the subject token's `sub`, for the audience (or resource) asked for;
/// with an actor token, only if the subject's `may_act.sub` is the actor's `sub`, and the
/// issued token names the actor in `act`.
fn exchange(state: &mut IssuerState, f: &Params) -> Answer {
    if f.get("subject_token_type").map(String::as_str) != Some(ACCESS_TOKEN) {
        return Err("invalid_request");
    }
    let subject = minted(state, f.get("subject_token"))?;
    let mut claims = json!({
        "sub": subject.get("sub"),
        "aud": f.get("audience").or(f.get("resource")),
        "scope": f.get("scope"),
    });
    if let Some(actor_token) = f.get("actor_token") {
        let actor = minted(state, Some(actor_token))?;
        let allowed = subject.pointer("/may_act/sub").and_then(Value::as_str);
        let actor_sub = actor.get("sub").and_then(Value::as_str);
        if allowed.is_none() || allowed != actor_sub {
            return Err("invalid_grant");
        }
        claims["act"] = json!({"sub": actor_sub});
    }
    let mut body = issue(state, claims, f.get("scope").map(String::as_str));
    body["issued_token_type"] = json!(ACCESS_TOKEN);
    Ok(body)
}

/// RFC 7523 jwt-bearer as on-behalf-of: a token for the assertion's `sub` with the scope
/// asked for.
fn on_behalf_of(state: &mut IssuerState, f: &Params) -> Answer {
    if f.get("requested_token_use").map(String::as_str) != Some("on_behalf_of") {
        return Err("invalid_request");
    }
    let assertion = minted(state, f.get("assertion"))?;
    let claims = json!({"sub": assertion.get("sub"), "scope": f.get("scope")});
    Ok(issue(state, claims, f.get("scope").map(String::as_str)))
}

/// The claims of a token this issuer minted; `invalid_grant` for any other.
fn minted(state: &IssuerState, token: Option<&String>) -> Result<Value, &'static str> {
    token
        .and_then(|t| state.minted.get(t))
        .cloned()
        .ok_or("invalid_grant")
}

/// A token response for an access token with `claims` plus `iss`, `iat` and `exp`.
fn issue(state: &mut IssuerState, mut claims: Value, scope: Option<&str>) -> Value {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let lifetime = state.token_lifetime;
    claims["iss"] = json!(state.origin);
    claims["iat"] = json!(now);
    claims["exp"] = json!(now + lifetime);
    let access_token = mint(state, &claims);
    json!({
        "access_token": access_token, "token_type": "Bearer", "expires_in": lifetime,
        "scope": scope,
    })
}

/// The client id and secret of `Authorization: Basic`, each form-decoded (RFC 6749 §2.3.1).
fn basic(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let decoded = STANDARD.decode(value.strip_prefix("Basic ")?).ok()?;
    let (id, secret) = std::str::from_utf8(&decoded).ok()?.split_once(':')?;
    let form_decode = |s: &str| {
        percent_decode_str(&s.replace('+', " "))
            .decode_utf8()
            .ok()
            .map(|d| d.into_owned())
    };
    Some((form_decode(id)?, form_decode(secret)?))
}

/// An OAuth error answer (RFC 6749 §5.2) with `status`.
fn oauth_error(status: StatusCode, code: &str) -> Response {
    (status, Json(json!({"error": code}))).into_response()
}
