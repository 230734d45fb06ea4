//! "Connect your account": the authorization code flow with PKCE (RFC 7636, S256 only) and
//! refresh (RFC 6749 §6) against an upstream's authorization server.
//!
//! Guarantees: every authorization URL carries a fresh verifier's S256 challenge, `state` as
//! given, the configured scopes and (RFC 8707) resource; a verifier is 43 to 128 characters of
//! RFC 7636's alphabet, generated from 32 random bytes, and shows in no `Debug`; a refresh that
//! the server does not rotate keeps the refresh token used.

use airlock_egress::GuardedClient;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use secrecy::{ExposeSecret as _, SecretString};
use sha2::{Digest as _, Sha256};
use url::Url;

use super::endpoint::{self, Client};
use super::{OAuthError, Tokens};

/// An upstream's authorization server, as airlock's client of it.
#[derive(Debug, Clone)]
pub struct AuthorizationServer {
    /// Where a person is sent to approve (RFC 6749 §3.1).
    pub authorization_endpoint: Url,
    /// Where codes and refresh tokens are redeemed (RFC 6749 §3.2).
    pub token_endpoint: Url,
    /// airlock's client id at this server.
    pub client_id: String,
    /// The client secret; `None` for a public client.
    pub client_secret: Option<SecretString>,
    /// The scopes asked for.
    pub scopes: Vec<String>,
    /// The resource the tokens are for (RFC 8707), when the server wants one named.
    pub resource: Option<String>,
}

/// A PKCE code verifier (RFC 7636 §4.1): kept between [`AuthorizationServer::authorize_url`]
/// and [`AuthorizationServer::redeem`]. `Debug` does not show it.
#[derive(Debug, Clone)]
pub struct PkceVerifier(SecretString);

impl PkceVerifier {
    /// A fresh verifier: 32 random bytes, base64url (43 characters, 256 bits).
    #[must_use]
    pub fn generate() -> Self {
        Self(SecretString::from(
            URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>()),
        ))
    }

    /// A verifier kept elsewhere (sealed while the person approves) and read back; `None` when
    /// it is not 43 to 128 characters of `A-Z a-z 0-9 - . _ ~`.
    #[must_use]
    pub fn from_secret(secret: SecretString) -> Option<Self> {
        let text = secret.expose_secret();
        let valid = (43..=128).contains(&text.len())
            && text
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b));
        valid.then_some(Self(secret))
    }

    /// The verifier itself, to keep until the code comes back.
    #[must_use]
    pub fn secret(&self) -> &SecretString {
        &self.0
    }

    /// Its S256 challenge: base64url(SHA-256(verifier)).
    #[must_use]
    pub fn challenge(&self) -> String {
        URL_SAFE_NO_PAD.encode(Sha256::digest(self.0.expose_secret().as_bytes()))
    }
}

impl AuthorizationServer {
    /// The URL to send a person to, challenging with `verifier` (kept until the code comes
    /// back). `state` is the caller's (bound to the person); it comes back unchanged.
    #[must_use]
    pub fn authorize_url(&self, redirect_uri: &str, state: &str, verifier: &PkceVerifier) -> Url {
        let mut url = self.authorization_endpoint.clone();
        {
            // Appended, so a tenant-specific query the endpoint already has is kept.
            let mut query = url.query_pairs_mut();
            query
                .append_pair("response_type", "code")
                .append_pair("client_id", &self.client_id)
                .append_pair("redirect_uri", redirect_uri)
                .append_pair("state", state)
                .append_pair("code_challenge", &verifier.challenge())
                .append_pair("code_challenge_method", "S256");
            if !self.scopes.is_empty() {
                query.append_pair("scope", &self.scopes.join(" "));
            }
            if let Some(resource) = &self.resource {
                query.append_pair("resource", resource);
            }
        }
        url
    }

    /// Redeems an authorization code with its verifier (`redirect_uri` as in the authorization
    /// URL). The code is a secret: it is sent, never shown.
    ///
    /// # Errors
    /// [`OAuthError::Refused`] (`invalid_grant` for a spent code or a wrong verifier),
    /// [`OAuthError::Unreachable`], [`OAuthError::Status`], [`OAuthError::Malformed`].
    pub async fn redeem(
        &self,
        guard: &GuardedClient,
        code: &str,
        verifier: &PkceVerifier,
        redirect_uri: &str,
    ) -> Result<Tokens, OAuthError> {
        let mut form = vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("code_verifier", verifier.0.expose_secret()),
        ];
        if let Some(resource) = &self.resource {
            form.push(("resource", resource));
        }
        endpoint::post(guard, &self.token_endpoint, self.client(), &form).await
    }

    /// A new access token for `refresh_token`. No scope is sent, so the grant keeps the scopes
    /// first approved (RFC 6749 §6). When the server does not rotate the refresh token, the
    /// result carries the one used.
    ///
    /// # Errors
    /// As [`AuthorizationServer::redeem`]; `invalid_grant` when the refresh token was revoked,
    /// expired or already rotated away: the person must connect again.
    pub async fn refresh(
        &self,
        guard: &GuardedClient,
        refresh_token: &SecretString,
    ) -> Result<Tokens, OAuthError> {
        let mut form = vec![
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token.expose_secret()),
        ];
        if let Some(resource) = &self.resource {
            form.push(("resource", resource));
        }
        let mut tokens = endpoint::post(guard, &self.token_endpoint, self.client(), &form).await?;
        if tokens.refresh.is_none() {
            tokens.refresh = Some(refresh_token.clone());
        }
        Ok(tokens)
    }

    fn client(&self) -> Client<'_> {
        Client {
            id: &self.client_id,
            secret: self.client_secret.as_ref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7636 appendix B's example.
    #[test]
    fn the_challenge_is_s256_of_the_verifier() {
        let verifier = PkceVerifier::from_secret(SecretString::from(
            "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk",
        ))
        .unwrap();
        assert_eq!(
            verifier.challenge(),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        let fresh = PkceVerifier::generate();
        assert_eq!(fresh.secret().expose_secret().len(), 43);
        assert_ne!(
            fresh.secret().expose_secret(),
            PkceVerifier::generate().secret().expose_secret()
        );
        assert!(PkceVerifier::from_secret(SecretString::from("short")).is_none());
        assert!(PkceVerifier::from_secret(SecretString::from("a+".repeat(30))).is_none());
    }

    #[test]
    fn the_authorization_url_keeps_the_endpoints_query() {
        let server = AuthorizationServer {
            authorization_endpoint: Url::parse("https://as.example/authorize?tenant=t1").unwrap(),
            token_endpoint: Url::parse("https://as.example/token").unwrap(),
            client_id: "airlock".into(),
            client_secret: None,
            scopes: vec!["read".into(), "write".into()],
            resource: Some("https://api.example".into()),
        };
        let verifier = PkceVerifier::generate();
        let url = server.authorize_url("https://airlock.example/cb", "st-1", &verifier);
        let pairs: Vec<(String, String)> = url.query_pairs().into_owned().collect();
        let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("tenant"), Some("t1"));
        assert_eq!(get("scope"), Some("read write"));
        assert_eq!(get("state"), Some("st-1"));
        assert_eq!(get("code_challenge_method"), Some("S256"));
        assert_eq!(get("code_challenge"), Some(verifier.challenge().as_str()));
        assert_eq!(get("resource"), Some("https://api.example"));
        assert!(!url.as_str().contains(verifier.secret().expose_secret()));
    }
}
