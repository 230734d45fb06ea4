//! Admin authentication, deny by default: a bearer token from `[[admin.tokens]]`, compared in
//! constant time; the decider's name is the token's principal, never something the request
//! body says.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use secrecy::ExposeSecret as _;
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
    token_principal(tokens, header?.strip_prefix("Bearer ")?)
}

/// The principal of the admin token `supplied` (a header's or the inbox's sign-in form's).
pub(crate) fn token_principal(tokens: &Tokens, supplied: &str) -> Option<String> {
    // An empty token is never a credential, whatever is configured.
    let supplied = supplied.trim();
    if supplied.is_empty() {
        return None;
    }
    // Hashing first gives equal-length inputs, so the comparison time says nothing about the
    // token's length or its first differing byte.
    let supplied = Sha256::digest(supplied.as_bytes());
    let mut found = None;
    for (token, principal) in tokens.0.iter() {
        let expected = Sha256::digest(token.expose_secret().as_bytes());
        if bool::from(expected.ct_eq(&supplied)) {
            found = Some(principal.clone());
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use secrecy::SecretString;

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
