//! Admission of OAuth access tokens, and the challenges that send a client to its
//! authorization server (RFC 6750, RFC 9728; docs/rules.md AUTH-1, AUTH-2, AUTH-12, AUTH-13).
//!
//! Guarantees: every 401 of an endpoint with OAuth carries `WWW-Authenticate: Bearer` with
//! `resource_metadata` (the endpoint's RFC 9728 document) and the `scope` that grants the
//! endpoint, plus `error="invalid_token"` and a fixed `error_description` when a token was
//! refused; a valid token whose scopes do not grant the endpoint is a 403 with
//! `error="insufficient_scope"` and that scope; keys that cannot be fetched are a 503 (the
//! token may well be good; a 401 would send the client to sign in again for nothing). The
//! JSON-RPC body repeats the reason; nothing repeats the token or its claims.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::Value;

use super::request::{FORBIDDEN, UNAUTHORIZED, rpc_refusal};
use crate::host::Caller;
use crate::oauth::{ResourceServer, TokenError};
use airlock_spec::ScopeId;

/// The JSON-RPC error code of a 503: the issuer's keys are out of reach.
const UNAVAILABLE: i64 = -32002;

/// The caller of an access token allowed to call `scope`, or the refusal.
pub(super) async fn admit(
    oauth: &ResourceServer,
    token: &str,
    scope: &ScopeId,
) -> Result<Caller, Box<Response>> {
    match oauth.authenticate(token, scope).await {
        Ok(auth) if auth.granted => {
            let mut caller = auth.caller;
            let subject = Some(secrecy::SecretString::from(token.to_owned()));
            caller.downstream = caller.downstream.signed_in_with(subject);
            Ok(caller)
        }
        Ok(auth) => {
            tracing::warn!(principal = %auth.caller.principal, %scope, "MCP request refused: the access token's scopes do not grant this endpoint");
            Err(insufficient_scope(oauth, scope))
        }
        Err(TokenError::KeysUnavailable) => Err(rpc_refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            &Value::Null,
            UNAVAILABLE,
            &format!("Service Unavailable: {}", TokenError::KeysUnavailable),
        )),
        Err(error) => {
            tracing::warn!(%scope, %error, "MCP request refused: access token not accepted");
            Err(unauthorized(oauth, scope, Some(&error.to_string())))
        }
    }
}

/// The 401 of an endpoint with OAuth; `error` is why a presented token was refused.
pub(super) fn unauthorized(
    oauth: &ResourceServer,
    scope: &ScopeId,
    error: Option<&str>,
) -> Box<Response> {
    let mut challenge = base_challenge(oauth, scope);
    let message = match error {
        Some(reason) => {
            challenge.push_str(&format!(
                r#", error="invalid_token", error_description="{}""#,
                quotable(reason)
            ));
            format!("Unauthorized: {reason}")
        }
        None => format!(
            "Unauthorized: send `Authorization: Bearer <token>` with an OAuth access token \
             (see {}) or a token from [[mcp.tokens]] in airlock.toml",
            oauth.metadata_url(scope)
        ),
    };
    with_challenge(
        rpc_refusal(
            StatusCode::UNAUTHORIZED,
            &Value::Null,
            UNAUTHORIZED,
            &message,
        ),
        &challenge,
    )
}

/// The 403 of a valid token lacking the scope that grants the endpoint.
fn insufficient_scope(oauth: &ResourceServer, scope: &ScopeId) -> Box<Response> {
    let challenge = format!(
        r#"{}, error="insufficient_scope", error_description="the access token's scopes do not grant this endpoint""#,
        base_challenge(oauth, scope)
    );
    let needed = oauth.scope_for(scope).map_or_else(
        || format!("no configured scope grants \"{scope}\" ([mcp.oauth.scopes] in airlock.toml)"),
        |s| format!("ask for the scope `{s}`"),
    );
    let message = format!(
        "Forbidden: the access token may not call POST {} ({needed})",
        crate::oauth::endpoint_path(scope)
    );
    with_challenge(
        rpc_refusal(StatusCode::FORBIDDEN, &Value::Null, FORBIDDEN, &message),
        &challenge,
    )
}

fn base_challenge(oauth: &ResourceServer, scope: &ScopeId) -> String {
    let mut challenge = format!(
        r#"Bearer resource_metadata="{}""#,
        quotable(&oauth.metadata_url(scope))
    );
    if let Some(needed) = oauth.scope_for(scope) {
        challenge.push_str(&format!(r#", scope="{}""#, quotable(needed)));
    }
    challenge
}

/// Text safe inside a quoted-string of a header: printable ASCII without `"` and `\`.
fn quotable(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .filter(|c| !matches!(c, '"' | '\\'))
        .collect()
}

fn with_challenge(mut response: Box<Response>, challenge: &str) -> Box<Response> {
    if let Ok(value) = HeaderValue::from_str(challenge) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}
