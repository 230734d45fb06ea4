//! The issuer's signing keys, fetched through the egress guard and cached (AUTH-9..AUTH-11).
//!
//! Guarantees:
//! - Keys are looked up by `kid`. A cached set is used for [`FRESH_FOR`]; after that, or when
//!   a token names a `kid` the set lacks, the set is fetched again — at most once per
//!   [`MIN_REFETCH`] whatever tokens arrive, so tokens with made-up `kid`s cannot make
//!   airlock hammer the issuer. One fetch runs at a time.
//! - A successful fetch replaces the whole set: a key the issuer stopped publishing is dropped.
//! - When a fetch fails, the last set keeps being used for at most [`STALE_FOR`] past its
//!   freshness; with no usable set the token is refused as [`TokenError::KeysUnavailable`].
//! - Without a configured `jwks_uri`, the issuer's RFC 8414 metadata (then its OpenID
//!   configuration) names it, and must name the configured issuer.
//! - A JWKS entry without `kid`, or one `jsonwebtoken` cannot read, is skipped, not fatal.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use airlock_egress::{GuardedClient, Request};
use jsonwebtoken::jwk::Jwk;
use serde_json::Value;
use tokio::sync::Mutex;

use super::{OAuthSettings, TokenError};

/// How long a fetched key set is used before it is fetched again.
pub(crate) const FRESH_FOR: Duration = Duration::from_secs(10 * 60);
/// The least time between two fetches.
pub(crate) const MIN_REFETCH: Duration = Duration::from_secs(10);
/// How long past [`FRESH_FOR`] a set is still used while the issuer cannot be reached.
pub(crate) const STALE_FOR: Duration = Duration::from_secs(60 * 60);

pub(super) struct KeyCache {
    issuer: String,
    egress: GuardedClient,
    state: Mutex<Cached>,
}

#[derive(Default)]
struct Cached {
    jwks_uri: Option<String>,
    keys: HashMap<String, Jwk>,
    /// When the set in `keys` was fetched.
    fetched: Option<SystemTime>,
    /// When a fetch was last tried, and whether it failed.
    tried: Option<SystemTime>,
    failed: bool,
}

fn age(now: SystemTime, then: SystemTime) -> Duration {
    now.duration_since(then).unwrap_or_default()
}

impl Cached {
    fn fresh(&self, now: SystemTime) -> bool {
        self.fetched.is_some_and(|t| age(now, t) < FRESH_FOR)
    }

    fn may_fetch(&self, now: SystemTime) -> bool {
        self.tried.is_none_or(|t| age(now, t) >= MIN_REFETCH)
    }

    /// The key from the set as it is, fresh or within its stale allowance.
    fn cached(&self, kid: &str, now: SystemTime) -> Result<Jwk, TokenError> {
        let usable = self
            .fetched
            .is_some_and(|t| age(now, t) < FRESH_FOR + STALE_FOR);
        match self.keys.get(kid) {
            Some(key) if usable => Ok(key.clone()),
            _ if self.failed || !usable => Err(TokenError::KeysUnavailable),
            _ => Err(TokenError::UnknownKid),
        }
    }
}

impl KeyCache {
    pub(super) fn new(settings: &OAuthSettings, egress: GuardedClient) -> Self {
        Self {
            issuer: settings.issuer.clone(),
            egress,
            state: Mutex::new(Cached {
                jwks_uri: settings.jwks_uri.clone(),
                ..Cached::default()
            }),
        }
    }

    /// The key `kid`, fetching the set again when it is stale or lacks `kid` (rate-limited).
    pub(super) async fn key(&self, kid: &str, now: SystemTime) -> Result<Jwk, TokenError> {
        let mut cached = self.state.lock().await;
        if cached.fresh(now)
            && let Some(key) = cached.keys.get(kid)
        {
            return Ok(key.clone());
        }
        if !cached.may_fetch(now) {
            return cached.cached(kid, now);
        }
        cached.tried = Some(now);
        match self.fetch(&mut cached).await {
            Ok(keys) => {
                cached.keys = keys;
                cached.fetched = Some(now);
                cached.failed = false;
            }
            Err(reason) => {
                tracing::warn!(issuer = %self.issuer, %reason, "fetching the OAuth issuer's keys failed");
                cached.failed = true;
            }
        }
        cached.cached(kid, now)
    }

    async fn fetch(&self, cached: &mut Cached) -> Result<HashMap<String, Jwk>, String> {
        let uri = match &cached.jwks_uri {
            Some(uri) => uri.clone(),
            None => {
                let uri = self.discover().await?;
                cached.jwks_uri = Some(uri.clone());
                uri
            }
        };
        let set = self.get_json(&uri).await?;
        let keys = set
            .get("keys")
            .and_then(Value::as_array)
            .ok_or("the JWKS has no `keys` list")?;
        Ok(keys
            .iter()
            .filter_map(|k| serde_json::from_value::<Jwk>(k.clone()).ok())
            .filter_map(|k| Some((k.common.key_id.clone()?, k)))
            .collect())
    }

    /// The `jwks_uri` of the issuer's metadata: RFC 8414 first, then OpenID Connect discovery.
    async fn discover(&self) -> Result<String, String> {
        let mut last = String::new();
        for url in metadata_urls(&self.issuer) {
            match self.get_json(&url).await {
                Ok(doc) if doc.get("issuer").and_then(Value::as_str) == Some(&self.issuer) => {
                    return doc
                        .get("jwks_uri")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                        .ok_or_else(|| format!("{url} names no jwks_uri"));
                }
                Ok(_) => last = format!("{url} names another issuer"),
                Err(reason) => last = reason,
            }
        }
        Err(last)
    }

    async fn get_json(&self, url: &str) -> Result<Value, String> {
        let response = self
            .egress
            .send(Request::get(url))
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("{url}: HTTP {}", response.status()));
        }
        serde_json::from_slice(response.body()).map_err(|e| format!("{url}: not JSON ({e})"))
    }
}

/// RFC 8414 §3.1: the well-known name goes between the host and the issuer's path; OpenID
/// Connect discovery appends its name to the issuer.
fn metadata_urls(issuer: &str) -> Vec<String> {
    let trimmed = issuer.trim_end_matches('/');
    let (origin, path) = match trimmed.find("://").map(|i| i + 3) {
        Some(start) => match trimmed[start..].find('/') {
            Some(slash) => trimmed.split_at(start + slash),
            None => (trimmed, ""),
        },
        None => (trimmed, ""),
    };
    vec![
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{trimmed}/.well-known/openid-configuration"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_urls_insert_the_well_known_name_before_the_path() {
        assert_eq!(
            metadata_urls("https://as.example.com/tenant/"),
            [
                "https://as.example.com/.well-known/oauth-authorization-server/tenant",
                "https://as.example.com/tenant/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            metadata_urls("https://as.example.com")[0],
            "https://as.example.com/.well-known/oauth-authorization-server"
        );
    }
}
