//! Token exchange for a caller that reached airlock with an OAuth access token: RFC 8693 (the
//! caller's token as subject token, optionally airlock's own as actor token) or RFC 7523's
//! jwt-bearer grant as Entra's on-behalf-of flow.
//!
//! Guarantees: with an actor, the subject token's `may_act` claim (RFC 8693 §4.4) must name
//! the actor — `sub`, and `iss` when it names one — or nothing is sent; the exchange asks for
//! an access token (`requested_token_type`); [`Exchange::exchange_cached`] answers from the
//! [`ExchangeCache`] under a key that includes the principal, so one principal's token never
//! serves another.

use std::sync::Arc;

use airlock_egress::GuardedClient;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use secrecy::{ExposeSecret as _, SecretString};
use serde_json::Value;
use url::Url;

use super::cache::{CacheKey, ExchangeCache};
use super::endpoint::{self, Client};
use super::{OAuthError, Tokens};

const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const ACCESS_TOKEN: &str = "urn:ietf:params:oauth:token-type:access_token";

/// One configured exchange: where, as which client, for which scopes, by which grant.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The authorization server's token endpoint.
    pub token_endpoint: Url,
    /// airlock's client id there.
    pub client_id: String,
    /// The client secret; `None` for a public client.
    pub client_secret: Option<SecretString>,
    /// The scopes asked for (Entra: for example `api://downstream/.default`).
    pub scopes: Vec<String>,
    /// The grant.
    pub grant: Grant,
}

/// How the subject token is exchanged.
#[derive(Debug, Clone)]
pub enum Grant {
    /// RFC 8693 token exchange.
    TokenExchange {
        /// The `audience` asked for: the logical name of the upstream.
        audience: Option<String>,
        /// The `resource` asked for: the upstream's URL.
        resource: Option<String>,
        /// airlock acting for the subject (delegation, RFC 8693 §1.1); `None` for
        /// impersonation.
        actor: Option<Actor>,
    },
    /// RFC 7523 jwt-bearer with `requested_token_use=on_behalf_of` (Entra's on-behalf-of).
    JwtBearer,
}

/// The party acting for the subject: its token, and who that token names.
#[derive(Debug, Clone)]
pub struct Actor {
    /// The actor token sent as `actor_token`.
    pub token: SecretString,
    /// The actor token's subject: the subject token's `may_act.sub` must equal it.
    pub subject: String,
    /// The actor token's issuer: when the subject token's `may_act` names an `iss`, it must
    /// equal this (and an actor without one does not match it).
    pub issuer: Option<String>,
}

impl Exchange {
    /// Exchanges `subject` (the caller's access token) for a token for the upstream.
    ///
    /// # Errors
    /// [`OAuthError::MayActMissing`], [`OAuthError::MayActMismatch`] or
    /// [`OAuthError::SubjectUnreadable`] before anything is sent, when an actor is configured;
    /// otherwise as the token endpoint answers ([`OAuthError::Refused`] and the others).
    pub async fn exchange(
        &self,
        guard: &GuardedClient,
        subject: &SecretString,
    ) -> Result<Tokens, OAuthError> {
        let scope = self.scopes.join(" ");
        let mut form = Vec::with_capacity(10);
        match &self.grant {
            Grant::TokenExchange {
                audience,
                resource,
                actor,
            } => {
                if let Some(actor) = actor {
                    may_act(subject, actor)?;
                    form.push(("actor_token", actor.token.expose_secret()));
                    form.push(("actor_token_type", ACCESS_TOKEN));
                }
                form.extend([
                    ("grant_type", TOKEN_EXCHANGE),
                    ("subject_token", subject.expose_secret()),
                    ("subject_token_type", ACCESS_TOKEN),
                    ("requested_token_type", ACCESS_TOKEN),
                ]);
                form.extend(audience.as_deref().map(|a| ("audience", a)));
                form.extend(resource.as_deref().map(|r| ("resource", r)));
            }
            Grant::JwtBearer => form.extend([
                ("grant_type", JWT_BEARER),
                ("assertion", subject.expose_secret()),
                ("requested_token_use", "on_behalf_of"),
            ]),
        }
        if !scope.is_empty() {
            form.push(("scope", &scope));
        }
        let client = Client {
            id: &self.client_id,
            secret: self.client_secret.as_ref(),
        };
        endpoint::post(guard, &self.token_endpoint, client, &form).await
    }

    /// The cache key of `principal`'s `subject` token exchanged here: the endpoint, client,
    /// grant, audience, resource, actor and scopes all count.
    #[must_use]
    pub fn cache_key<'a>(&self, principal: &'a str, subject: &SecretString) -> CacheKey<'a> {
        let (grant, audience, resource, actor) = match &self.grant {
            Grant::TokenExchange {
                audience,
                resource,
                actor,
            } => (
                TOKEN_EXCHANGE,
                audience.as_deref().unwrap_or(""),
                resource.as_deref().unwrap_or(""),
                actor.as_ref().map_or("", |a| a.subject.as_str()),
            ),
            Grant::JwtBearer => (JWT_BEARER, "", "", ""),
        };
        let parts = [
            self.token_endpoint.as_str(),
            &self.client_id,
            grant,
            audience,
            resource,
            actor,
        ];
        CacheKey::of(principal, &parts, &self.scopes, subject)
    }

    /// [`Exchange::exchange`] answered from `cache` when it can: a token exchanged earlier for
    /// the same principal, subject token, target and scopes, not within the skew of expiring.
    /// A token exchanged here is kept for later calls. `principal` is who the resource server
    /// found the subject token to stand for; two concurrent misses may both exchange.
    ///
    /// # Errors
    /// As [`Exchange::exchange`] (an error is never cached).
    pub async fn exchange_cached(
        &self,
        guard: &GuardedClient,
        cache: &ExchangeCache,
        principal: &str,
        subject: &SecretString,
    ) -> Result<Arc<Tokens>, OAuthError> {
        let key = self.cache_key(principal, subject);
        if let Some(hit) = cache.get(&key) {
            return Ok(hit);
        }
        let epoch = cache.epoch();
        let tokens = Arc::new(self.exchange(guard, subject).await?);
        cache.store(&key, &tokens, Some(epoch));
        Ok(tokens)
    }
}

/// RFC 8693 §4.4: the subject token's `may_act` must name the actor.
///
/// The subject token is read without checking its signature: airlock's resource server
/// verified it (issuer, signature, audience, expiry) when the caller presented it, and this
/// check only narrows what the authorization server, which verifies it again, would accept.
fn may_act(subject: &SecretString, actor: &Actor) -> Result<(), OAuthError> {
    let claims = claims(subject.expose_secret()).ok_or(OAuthError::SubjectUnreadable)?;
    let Some(may_act) = claims.get("may_act").filter(|v| !v.is_null()) else {
        return Err(OAuthError::MayActMissing {
            actor: actor.subject.clone(),
        });
    };
    let sub_matches = may_act.get("sub").and_then(Value::as_str) == Some(actor.subject.as_str());
    let iss_matches = match may_act.get("iss") {
        None => true,
        Some(iss) => iss.as_str().is_some() && iss.as_str() == actor.issuer.as_deref(),
    };
    if sub_matches && iss_matches {
        Ok(())
    } else {
        Err(OAuthError::MayActMismatch {
            actor: actor.subject.clone(),
        })
    }
}

/// The claims of a compact JWS, unverified (see [`may_act`]).
fn claims(token: &str) -> Option<serde_json::Map<String, Value>> {
    let mut parts = token.split('.');
    let (Some(_), Some(payload), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    let bytes = URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    match serde_json::from_slice(&bytes).ok()? {
        Value::Object(claims) => Some(claims),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn jwt(claims: &Value) -> SecretString {
        let part = |v: &Value| URL_SAFE_NO_PAD.encode(v.to_string());
        SecretString::from(format!(
            "{}.{}.sig",
            part(&json!({"alg": "ES256"})),
            part(claims)
        ))
    }

    fn actor(issuer: Option<&str>) -> Actor {
        Actor {
            token: SecretString::from("actor-token"),
            subject: "airlock".into(),
            issuer: issuer.map(str::to_owned),
        }
    }

    #[test]
    fn may_act_must_name_the_actor_by_sub_and_iss() {
        let named = jwt(&json!({"sub": "alice", "may_act": {"sub": "airlock"}}));
        assert!(may_act(&named, &actor(None)).is_ok());
        let with_iss = jwt(&json!({"may_act": {"sub": "airlock", "iss": "https://as"}}));
        assert!(may_act(&with_iss, &actor(Some("https://as"))).is_ok());
        for (subject, actor, kind) in [
            (
                jwt(&json!({"sub": "alice"})),
                actor(None),
                "may_act_missing",
            ),
            (
                jwt(&json!({"may_act": null})),
                actor(None),
                "may_act_missing",
            ),
            (
                jwt(&json!({"may_act": {"sub": "mallory"}})),
                actor(None),
                "may_act_mismatch",
            ),
            (
                jwt(&json!({"may_act": "airlock"})),
                actor(None),
                "may_act_mismatch",
            ),
            (with_iss.clone(), actor(None), "may_act_mismatch"),
            (with_iss, actor(Some("https://other")), "may_act_mismatch"),
            (
                SecretString::from("opaque"),
                actor(None),
                "subject_unreadable",
            ),
            (
                SecretString::from("a.!!.c"),
                actor(None),
                "subject_unreadable",
            ),
        ] {
            assert_eq!(may_act(&subject, &actor).unwrap_err().kind(), kind);
        }
    }

    #[test]
    fn the_cache_key_depends_on_the_target() {
        let subject = SecretString::from("subject");
        let exchange = |audience: &str| Exchange {
            token_endpoint: Url::parse("https://as.example/token").unwrap(),
            client_id: "airlock".into(),
            client_secret: None,
            scopes: vec!["read".into()],
            grant: Grant::TokenExchange {
                audience: Some(audience.into()),
                resource: None,
                actor: None,
            },
        };
        let (a, b) = (exchange("crm"), exchange("erp"));
        let cache = ExchangeCache::new();
        let tokens = Tokens {
            access: SecretString::from("t"),
            refresh: None,
            expires_in: Some(std::time::Duration::from_secs(3_600)),
            scope: None,
            issued_token_type: None,
        };
        cache.insert(&a.cache_key("p", &subject), tokens);
        assert!(cache.get(&a.cache_key("p", &subject)).is_some());
        assert!(cache.get(&b.cache_key("p", &subject)).is_none());
        assert!(cache.get(&a.cache_key("q", &subject)).is_none());
        let other = SecretString::from("another subject");
        assert!(cache.get(&a.cache_key("p", &other)).is_none());
    }
}
