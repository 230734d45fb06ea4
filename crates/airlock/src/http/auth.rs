//! Bearer authentication, deny by default, every token compared in constant time: admins (a
//! token from `[[admin.tokens]]`; the decider's name is the token's principal, never something
//! the request body says) and callers of an agent (a token from `[[mcp.tokens]]` granted the
//! agent's scope; the run's principal is the token's).

use airlock_mcp::Caller;
use airlock_spec::ScopeId;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use secrecy::{ExposeSecret as _, SecretString};
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

use super::AppState;
use super::error::ApiError;
use crate::boot::Tokens;

/// The authenticated admin principal.
pub(super) struct Admin(pub(super) String);

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let header = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        principal(&state.admin, header)
            .map(Admin)
            .ok_or_else(ApiError::unauthorized)
    }
}

/// The principal whose token `header` (`Bearer …`) carries, if any.
pub(crate) fn principal(tokens: &Tokens, header: Option<&str>) -> Option<String> {
    token_principal(tokens, bearer(header)?)
}

/// The principal of the admin token `supplied` (a header's or the inbox's sign-in form's).
pub(crate) fn token_principal(tokens: &Tokens, supplied: &str) -> Option<String> {
    matching(tokens.0.iter().map(|(t, p)| (t, p)), supplied).cloned()
}

/// The entry whose token is `supplied`, if any: every token is compared, in constant time, so
/// the time taken says nothing about which one matched.
fn matching<'a, T>(
    candidates: impl IntoIterator<Item = (&'a SecretString, T)>,
    supplied: &str,
) -> Option<T> {
    // An empty token is never a credential, whatever is configured.
    let supplied = supplied.trim();
    if supplied.is_empty() {
        return None;
    }
    // Hashing first gives equal-length inputs, so the comparison time says nothing about the
    // token's length or its first differing byte.
    let supplied = Sha256::digest(supplied.as_bytes());
    let mut found = None;
    for (token, entry) in candidates {
        let expected = Sha256::digest(token.expose_secret().as_bytes());
        if bool::from(expected.ct_eq(&supplied)) {
            found = Some(entry);
        }
    }
    found
}

/// The caller of agent `agent` (the run API and its WebSocket, docs/rules.md AGENT-40): a
/// token of `[[mcp.tokens]]` whose `scopes` include `agent:<name>` (or that has no `scopes`),
/// with its principal and groups. 401 without such a token, 403 for a token not granted the
/// agent.
pub(super) fn agent_caller(
    state: &AppState,
    headers: &HeaderMap,
    agent: &str,
) -> Result<Caller, ApiError> {
    let header = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let tokens = state.mcp.tokens.iter().map(|t| (&t.token, t));
    let token = bearer(header)
        .and_then(|supplied| matching(tokens, supplied))
        .ok_or_else(ApiError::unauthorized_caller)?;
    let scope = ScopeId::Agent(agent.to_owned());
    if !token.scopes.as_ref().is_none_or(|s| s.contains(&scope)) {
        tracing::warn!(principal = %token.principal, %scope, "run refused: scope not granted to the token");
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!(
                "this token may not run agent `{agent}` (its scopes lack \"{scope}\"; add it to \
                 the token's scopes in [[mcp.tokens]] in airlock.toml)"
            ),
        ));
    }
    Ok(Caller {
        principal: token.principal.clone(),
        groups: token.groups.clone(),
    })
}

/// The token of an `Authorization: Bearer …` header.
fn bearer(header: Option<&str>) -> Option<&str> {
    header?.strip_prefix("Bearer ")
}

/// Refuses (401) a request that carries neither an admin token nor a caller token, before
/// anything is looked up for it.
pub(super) fn any_token(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let header = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let callers = state.mcp.tokens.iter().map(|t| (&t.token, ()));
    let admins = state.admin.0.iter().map(|(t, _)| (t, ()));
    bearer(header)
        .and_then(|supplied| matching(callers.chain(admins), supplied))
        .ok_or_else(ApiError::unauthorized_caller)
}

/// Who may read or cancel a run of agent `agent`: a caller granted the agent, or an admin
/// (admins read every call; docs/rules.md AGENT-40).
pub(super) fn run_reader(
    state: &AppState,
    headers: &HeaderMap,
    agent: &str,
) -> Result<String, ApiError> {
    let header = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    match principal(&state.admin, header) {
        Some(admin) => Ok(admin),
        None => agent_caller(state, headers, agent).map(|caller| caller.principal),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn only_a_configured_token_names_a_principal() {
        let tokens = Tokens(Arc::new(vec![(
            SecretString::from("s3cret".to_owned()),
            "alice".to_owned(),
        )]));
        assert_eq!(
            principal(&tokens, Some("Bearer s3cret")).as_deref(),
            Some("alice")
        );
        assert_eq!(principal(&tokens, Some("Bearer s3cre")), None);
        assert_eq!(principal(&tokens, Some("s3cret")), None);
        assert_eq!(principal(&tokens, None), None);
        let empty = Tokens(Arc::new(vec![(
            SecretString::from(String::new()),
            "nobody".to_owned(),
        )]));
        assert_eq!(
            principal(&empty, Some("Bearer ")),
            None,
            "an empty token never authenticates"
        );
        assert_eq!(
            principal(&Tokens::default(), Some("Bearer s3cret")),
            None,
            "deny by default"
        );
    }
}
