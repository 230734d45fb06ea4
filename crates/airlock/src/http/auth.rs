//! Bearer authentication, deny by default, every token compared in constant time: admins (a
//! token from `[[admin.tokens]]`; the decider's name is the token's principal, never something
//! the request body says) and callers of an agent (a token from `[[mcp.tokens]]` granted the
//! agent's scope; the run's principal is the token's). A run, once started, is reached by its
//! principal's tokens and by admins only ([`RunRequester`], docs/rules.md AGENT-67).

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
        ..Default::default()
    })
}

/// The token of an `Authorization: Bearer …` header.
fn bearer(header: Option<&str>) -> Option<&str> {
    header?.strip_prefix("Bearer ")
}

/// Who asks for a run, or for a proposal of one (docs/rules.md AGENT-67..AGENT-70): an admin
/// reaches every run; a caller reaches only the runs its principal started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum RunRequester {
    /// The principal of an `[[admin.tokens]]` token.
    Admin(String),
    /// The principal of an `[[mcp.tokens]]` token.
    Caller(String),
}

impl RunRequester {
    /// Whether it may reach a run started by `owner` (`None`: a run started without a
    /// principal, which only an admin reaches).
    pub(super) fn owns(&self, owner: Option<&str>) -> bool {
        match self {
            Self::Admin(_) => true,
            Self::Caller(principal) => owner == Some(principal.as_str()),
        }
    }

    /// Its principal: the name a decision it takes is recorded under.
    pub(super) fn into_principal(self) -> String {
        match self {
            Self::Admin(principal) | Self::Caller(principal) => principal,
        }
    }
}

/// The requester of a run (or of a run's proposal): an admin token, else a caller token; 401
/// for neither, before anything is looked up for the request.
pub(super) fn run_requester(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<RunRequester, ApiError> {
    let header = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if let Some(admin) = principal(&state.admin, header) {
        return Ok(RunRequester::Admin(admin));
    }
    let callers = state.mcp.tokens.iter().map(|t| (&t.token, t));
    bearer(header)
        .and_then(|supplied| matching(callers, supplied))
        .map(|token| RunRequester::Caller(token.principal.clone()))
        .ok_or_else(ApiError::unauthorized_caller)
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

    #[test]
    fn a_caller_owns_only_what_its_principal_started() {
        let carol = RunRequester::Caller("carol".into());
        assert!(carol.owns(Some("carol")));
        assert!(!carol.owns(Some("dave")));
        assert!(
            !carol.owns(None),
            "a run without a principal is the operator's"
        );
        let admin = RunRequester::Admin("alice".into());
        assert!(admin.owns(Some("carol")) && admin.owns(None));
        assert_eq!(carol.into_principal(), "carol");
    }
}
