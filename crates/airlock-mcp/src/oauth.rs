//! The MCP endpoint as an OAuth 2.1 resource server: JWT access tokens from one configured
//! issuer, checked against the issuer's published keys (docs/rules.md AUTH-1..AUTH-14).
//!
//! Guarantees:
//! - A token is accepted only when its header names an allowed asymmetric algorithm (never
//!   `none`, never an HMAC one: the public key is no secret), a `kid` that the issuer's JWKS
//!   holds with the same algorithm family, and its signature verifies with that key.
//! - `iss` is the configured issuer; `aud` names the endpoint's resource URL, the server's
//!   base resource URL or a configured audience (RFC 8707); `exp` is present and not past,
//!   `nbf` (when present) not ahead, each with the configured leeway, by the injected clock.
//! - The principal is the configured claim (default `sub`), a non-empty printable string; the
//!   groups come from the groups claim (a string or a list of strings); the token's scopes
//!   (`scope`, or `scp`) grant airlock scopes only through the configured map.
//! - The keys are fetched through the egress guard (`jwks`), so an issuer on a private address
//!   needs the operator's `[egress] allow`.
//! - Errors say which check failed, never the token or its claims' values.

mod jwks;
mod verify;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use airlock_egress::GuardedClient;
use airlock_spec::ScopeId;
use jsonwebtoken::Algorithm;
use serde_json::{Value, json};

use crate::host::Caller;

/// The wall clock the resource server reads (`exp`, `nbf`, the key cache's age); tests inject
/// their own.
pub type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// How the endpoint accepts OAuth access tokens (`[mcp.oauth]` of `airlock.toml`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthSettings {
    /// The issuer identifier: `iss` must equal it, and its RFC 8414 metadata names the JWKS
    /// when `jwks_uri` is unset.
    pub issuer: String,
    /// Where the issuer publishes its keys; `None`: discovered from the issuer's metadata.
    pub jwks_uri: Option<String>,
    /// The server's base resource URL, an origin such as `https://airlock.example.com`: the
    /// endpoint `/mcp` is the resource `<resource>/mcp`.
    pub resource: String,
    /// More `aud` values accepted on every endpoint (an issuer's API identifier).
    pub audiences: Vec<String>,
    /// The claim naming the principal (default `sub`).
    pub principal_claim: String,
    /// The claim listing the principal's groups (default `groups`).
    pub groups_claim: String,
    /// Token scope → the airlock scopes it grants, in configuration order.
    pub scopes: Vec<(String, Vec<ScopeId>)>,
    /// Accepted JWS algorithms, by name (`RS256`, `ES256`, `EdDSA`, …).
    pub algorithms: Vec<String>,
    /// Clock skew allowed on `exp` and `nbf`.
    pub leeway: Duration,
}

/// A setting the resource server cannot work with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OAuthConfigError {
    /// Not an algorithm, or a symmetric one (a public JWKS key would be its secret).
    #[error(
        "algorithm `{0}` is not accepted; use RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384 or EdDSA"
    )]
    Algorithm(String),
    /// No algorithm at all.
    #[error("at least one algorithm must be accepted")]
    NoAlgorithm,
}

/// Why an access token was refused. The messages are fixed text: none repeats the token or a
/// claim's value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not three base64url parts with a JSON header and claims.
    #[error("the access token is not a well-formed JWT")]
    Malformed,
    /// `alg` is not on the allow-list, or does not fit the key.
    #[error("the access token's signing algorithm is not accepted")]
    Algorithm,
    /// The header has no `kid`.
    #[error("the access token's header names no key (`kid`)")]
    MissingKid,
    /// The issuer's JWKS has no key with that `kid`.
    #[error("the access token was signed with a key the issuer does not publish")]
    UnknownKid,
    /// The JWKS could not be fetched (and no cached copy may be used).
    #[error("the authorization server's keys could not be fetched; try again later")]
    KeysUnavailable,
    /// The signature does not verify.
    #[error("the access token's signature is not valid")]
    Signature,
    /// `iss` is not the configured issuer.
    #[error("the access token was issued by another issuer")]
    Issuer,
    /// `aud` does not name this resource.
    #[error("the access token is not meant for this resource (audience)")]
    Audience,
    /// `exp` is past.
    #[error("the access token has expired")]
    Expired,
    /// `nbf` is ahead.
    #[error("the access token is not valid yet")]
    NotYetValid,
    /// A required claim is missing or has the wrong type.
    #[error("the access token's `{0}` claim is missing or invalid")]
    Claim(String),
}

/// A verified token: who calls, and whether the token's scopes grant the endpoint's scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Authenticated {
    pub(crate) caller: Caller,
    pub(crate) granted: bool,
}

/// The resource server: settings, the issuer's key cache and the clock.
#[derive(Clone)]
pub struct ResourceServer {
    inner: Arc<Inner>,
}

struct Inner {
    settings: OAuthSettings,
    algorithms: Vec<Algorithm>,
    keys: jwks::KeyCache,
    clock: Clock,
}

impl std::fmt::Debug for ResourceServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceServer")
            .field("settings", &self.inner.settings)
            .finish_non_exhaustive()
    }
}

impl ResourceServer {
    /// A resource server fetching keys through `egress`, on the system clock.
    ///
    /// # Errors
    /// An algorithm that is unknown or symmetric, or none at all.
    pub fn new(settings: OAuthSettings, egress: GuardedClient) -> Result<Self, OAuthConfigError> {
        Self::with_clock(settings, egress, Arc::new(SystemTime::now))
    }

    /// [`ResourceServer::new`] on `clock`.
    ///
    /// # Errors
    /// As [`ResourceServer::new`].
    pub fn with_clock(
        settings: OAuthSettings,
        egress: GuardedClient,
        clock: Clock,
    ) -> Result<Self, OAuthConfigError> {
        let algorithms = accepted_algorithms(&settings.algorithms)?;
        let keys = jwks::KeyCache::new(&settings, egress);
        Ok(Self {
            inner: Arc::new(Inner {
                settings,
                algorithms,
                keys,
                clock,
            }),
        })
    }

    /// The configured issuer.
    pub(crate) fn issuer(&self) -> &str {
        &self.inner.settings.issuer
    }

    /// The resource URL of `scope`'s endpoint, or of the whole server (`None`).
    pub(crate) fn resource(&self, scope: Option<&ScopeId>) -> String {
        let base = self.inner.settings.resource.trim_end_matches('/');
        scope.map_or_else(
            || base.to_owned(),
            |s| format!("{base}{}", endpoint_path(s)),
        )
    }

    /// Where the RFC 9728 metadata of `scope`'s endpoint is served.
    pub(crate) fn metadata_url(&self, scope: &ScopeId) -> String {
        let base = self.inner.settings.resource.trim_end_matches('/');
        format!(
            "{base}/.well-known/oauth-protected-resource{}",
            endpoint_path(scope)
        )
    }

    /// The RFC 9728 metadata of `scope`'s endpoint, or of the whole server.
    pub(crate) fn metadata(&self, scope: Option<&ScopeId>) -> Value {
        let scopes: Vec<&str> = self
            .inner
            .settings
            .scopes
            .iter()
            .filter(|(_, grants)| scope.is_none_or(|s| grants.contains(s)))
            .map(|(name, _)| name.as_str())
            .collect();
        json!({
            "resource": self.resource(scope),
            "authorization_servers": [self.inner.settings.issuer],
            "scopes_supported": scopes,
            "bearer_methods_supported": ["header"],
            "resource_name": "airlock",
        })
    }

    /// The first configured token scope that grants `scope`: what a client lacking it is told
    /// to ask for.
    pub(crate) fn scope_for(&self, scope: &ScopeId) -> Option<&str> {
        self.inner
            .settings
            .scopes
            .iter()
            .find(|(_, grants)| grants.contains(scope))
            .map(|(name, _)| name.as_str())
    }

    /// Verifies `token` for a request to `scope`'s endpoint.
    pub(crate) async fn authenticate(
        &self,
        token: &str,
        scope: &ScopeId,
    ) -> Result<Authenticated, TokenError> {
        let inner = &self.inner;
        let header = verify::header(token, &inner.algorithms)?;
        let kid = header.kid.as_deref().ok_or(TokenError::MissingKid)?;
        let now = (inner.clock)();
        let key = inner.keys.key(kid, now).await?;
        let audiences = self.audiences(scope);
        let claims = verify::claims(token, &header, &key, &inner.settings, &audiences, now)?;
        let settings = &inner.settings;
        let caller = Caller {
            principal: verify::principal(&claims, &settings.principal_claim)?,
            groups: verify::groups(&claims, &settings.groups_claim)?,
            ..Default::default()
        };
        let token_scopes = verify::scopes(&claims);
        let granted = settings
            .scopes
            .iter()
            .any(|(name, grants)| token_scopes.contains(&name.as_str()) && grants.contains(scope));
        Ok(Authenticated { caller, granted })
    }

    /// The `aud` values a token for `scope` may carry.
    fn audiences(&self, scope: &ScopeId) -> Vec<String> {
        let mut out = vec![self.resource(Some(scope)), self.resource(None)];
        out.extend(self.inner.settings.audiences.iter().cloned());
        out
    }
}

/// The path of `scope`'s endpoint, an agent's name percent-encoded so that it is one segment.
pub(crate) fn endpoint_path(scope: &ScopeId) -> String {
    match scope {
        ScopeId::Gateway => "/mcp".to_owned(),
        ScopeId::Agent(name) => {
            let name: String = url::form_urlencoded::byte_serialize(name.as_bytes()).collect();
            format!("/agents/{name}/mcp")
        }
    }
}

/// The configured algorithm names as algorithms; HMAC ones are refused.
fn accepted_algorithms(names: &[String]) -> Result<Vec<Algorithm>, OAuthConfigError> {
    if names.is_empty() {
        return Err(OAuthConfigError::NoAlgorithm);
    }
    names
        .iter()
        .map(|name| {
            name.parse::<Algorithm>()
                .ok()
                .filter(|a| a.family() != jsonwebtoken::AlgorithmFamily::Hmac)
                .ok_or_else(|| OAuthConfigError::Algorithm(name.clone()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// AUTH-3: the resource server itself refuses HMAC, `none` and unknown names, whatever
    /// the configuration loader let through.
    #[test]
    fn only_asymmetric_algorithms_are_accepted() {
        let names = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            accepted_algorithms(&names(&["RS256", "EdDSA"])),
            Ok(vec![Algorithm::RS256, Algorithm::EdDSA])
        );
        for bad in ["HS256", "none", "XX1"] {
            assert_eq!(
                accepted_algorithms(&names(&["ES256", bad])),
                Err(OAuthConfigError::Algorithm(bad.to_owned()))
            );
        }
        assert_eq!(accepted_algorithms(&[]), Err(OAuthConfigError::NoAlgorithm));
    }

    #[test]
    fn an_agents_name_is_one_path_segment() {
        assert_eq!(endpoint_path(&ScopeId::Gateway), "/mcp");
        assert_eq!(
            endpoint_path(&ScopeId::Agent("a/b c".into())),
            "/agents/a%2Fb+c/mcp"
        );
    }
}
