//! Where a per-principal connection's credentials come from, as the vault uses them: a secret
//! each person sets, an account connected through an authorization server (refreshed here when
//! its token runs out), or the caller's own OAuth token exchanged on each call.
//!
//! Guarantees: every endpoint is reached through the operator's egress guard; an exchanged
//! token is cached only for the principal and subject token it was exchanged for; a refresh that
//! fails (a spent refresh token another replica rotated, say) first looks for a token another
//! replica stored meanwhile, and otherwise leaves the call waiting for the person to connect
//! again.

use std::sync::Arc;

use airlock_ledger::{CredentialUse, InvocationId, SealedCredential};
use airlock_spec::{Credentials, ExchangeGrant, PerPrincipal};
use secrecy::{ExposeSecret as _, SecretString};
use time::OffsetDateTime;
use url::Url;

use super::{
    Held, Personal, PersonalVault, REFRESH_SKEW, Unresolved, VaultError, context, failed, plain_of,
};
use crate::ToolErrorKind;
use crate::execute::RunCredential;
use crate::oauth::{Actor, AuthorizationServer, Exchange, Grant, Tokens};

/// How a connection's principals get their credentials.
#[derive(Debug)]
pub enum Source {
    /// Each person sets a secret.
    Stored,
    /// Each person connects an account at this authorization server.
    OAuth(AuthorizationServer),
    /// The caller's own OAuth token is exchanged.
    Exchange(Exchange),
}

impl Source {
    /// The source `spec` declares, its client secrets and actor token resolved.
    ///
    /// # Errors
    /// A credential path that does not resolve, or an endpoint that is not a URL (each named).
    pub fn from_spec(spec: &PerPrincipal, credentials: &Credentials) -> Result<Self, String> {
        let secret = |path: Option<&airlock_spec::CredentialPath>| {
            path.map(|p| credentials.get(p).cloned().map_err(|e| e.to_string()))
                .transpose()
        };
        let url = |text: &str| Url::parse(text).map_err(|e| format!("`{text}`: {e}"));
        Ok(match spec {
            PerPrincipal::Stored => Self::Stored,
            PerPrincipal::OAuth(o) => Self::OAuth(AuthorizationServer {
                authorization_endpoint: url(&o.authorization_endpoint)?,
                token_endpoint: url(&o.token_endpoint)?,
                client_id: o.client_id.clone(),
                client_secret: secret(o.client_secret.as_ref())?,
                scopes: o.scopes.clone(),
                resource: o.resource.clone(),
            }),
            PerPrincipal::Exchange(e) => {
                let grant = match e.grant {
                    ExchangeGrant::JwtBearer => Grant::JwtBearer,
                    ExchangeGrant::TokenExchange => Grant::TokenExchange {
                        audience: e.audience.clone(),
                        resource: e.resource.clone(),
                        actor: actor(secret(e.actor_token.as_ref())?, e.actor.as_ref()),
                    },
                };
                Self::Exchange(Exchange {
                    token_endpoint: url(&e.token_endpoint)?,
                    client_id: e.client_id.clone(),
                    client_secret: secret(e.client_secret.as_ref())?,
                    scopes: e.scopes.clone(),
                    grant,
                })
            }
        })
    }

    /// The word a credential use of this source is recorded with.
    pub(crate) fn exchanged_kind(exchange: &Exchange) -> &'static str {
        match exchange.grant {
            Grant::TokenExchange { .. } => "token_exchange",
            Grant::JwtBearer => "jwt_bearer",
        }
    }
}

fn actor(token: Option<SecretString>, subject: Option<&String>) -> Option<Actor> {
    Some(Actor {
        token: token?,
        subject: subject?.clone(),
        issuer: None,
    })
}

/// Who issued a token: its endpoint's origin (never a path or query, which may name tenants).
pub(crate) fn issuer_of(endpoint: &Url) -> String {
    endpoint.origin().ascii_serialization()
}

impl PersonalVault {
    /// The caller's own token exchanged for one for `connection` (cached per principal and
    /// subject token).
    pub(super) async fn exchange(
        &self,
        connection: &str,
        principal: &str,
        subject: Option<&SecretString>,
    ) -> Result<Personal, Unresolved> {
        let Some(Source::Exchange(exchange)) = self.declared.get(connection) else {
            return Err(self.waiting(connection, principal, "is not set"));
        };
        let Some(subject) = subject else {
            return Err(failed(
                ToolErrorKind::CredentialMissing,
                format!(
                    "connection `{connection}` exchanges the caller's own OAuth token, and no request with one runs this call (its caller did not sign in with OAuth, or it runs after its caller's request ended: call it again)"
                ),
            ));
        };
        let tokens = exchange
            .exchange_cached(&self.guard, &self.exchanged, principal, subject)
            .await
            .map_err(|e| {
                failed(
                    ToolErrorKind::CredentialInvalid,
                    format!("connection `{connection}`: the token exchange failed: {e}"),
                )
            })?;
        Ok(Personal {
            credential: RunCredential::Token(tokens.access.clone()),
            used: CredentialUse {
                connection: connection.to_owned(),
                principal: principal.to_owned(),
                kind: Source::exchanged_kind(exchange).to_owned(),
                issuer: Some(issuer_of(&exchange.token_endpoint)),
                digest: self
                    .keys
                    .current
                    .digest(tokens.access.expose_secret().as_bytes()),
            },
        })
    }

    /// A connected account's token, refreshed: by another replica meanwhile (read again), or
    /// here with its refresh token.
    pub(super) async fn refreshed(
        &self,
        connection: &str,
        principal: &str,
    ) -> Result<Arc<Held>, Unresolved> {
        let soon = OffsetDateTime::now_utc() + REFRESH_SKEW;
        self.forget(Some(connection), principal);
        let again = self.load(connection, principal).await?;
        if again.expires_at.is_none_or(|at| at > soon) {
            return Ok(again);
        }
        let expired = || {
            self.waiting(
                connection,
                principal,
                "has expired and could not be refreshed",
            )
        };
        let Some(Source::OAuth(server)) = self.declared.get(connection) else {
            return Err(expired());
        };
        let stored = self
            .store
            .credential(connection.to_owned(), principal.to_owned())
            .await
            .map_err(|e| failed(ToolErrorKind::Database, e.to_string()))?;
        let refresh = stored
            .and_then(|s| s.refresh_sealed)
            .and_then(|sealed| {
                self.keys
                    .open(&context(connection, principal), &sealed)
                    .ok()
            })
            .and_then(|plain| String::from_utf8(plain.to_vec()).ok())
            .map(SecretString::from)
            .ok_or_else(expired)?;
        let tokens = match server.refresh(&self.guard, &refresh).await {
            Ok(tokens) => tokens,
            Err(error) => {
                tracing::warn!(connection, principal, %error, "refreshing a connected account failed");
                return Err(expired());
            }
        };
        self.store_tokens(connection, principal, &tokens, "oauth refresh")
            .await
            .map_err(|e| failed(ToolErrorKind::Database, e.to_string()))?;
        self.load(connection, principal).await
    }

    /// Stores `tokens` as `principal`'s connected account on `connection`, in `by`'s name,
    /// and releases the calls that waited for it.
    pub(crate) async fn store_tokens(
        &self,
        connection: &str,
        principal: &str,
        tokens: &Tokens,
        by: &str,
    ) -> Result<Vec<InvocationId>, VaultError> {
        let Some(Source::OAuth(server)) = self.declared.get(connection) else {
            return Err(VaultError::NotPerPrincipal(connection.to_owned()));
        };
        let context = context(connection, principal);
        let plain = plain_of(&RunCredential::Token(tokens.access.clone()))?;
        let refresh_sealed = tokens
            .refresh
            .as_ref()
            .map(|r| self.keys.seal(&context, r.expose_secret().as_bytes()))
            .transpose()?;
        let now = OffsetDateTime::now_utc();
        let sealed = SealedCredential {
            connection: connection.to_owned(),
            principal: principal.to_owned(),
            kind: "oauth".to_owned(),
            sealed: self.keys.seal(&context, plain.as_bytes())?,
            refresh_sealed,
            expires_at: tokens
                .expires_in
                .and_then(|d| time::Duration::try_from(d).ok())
                .map(|d| now + d),
            issuer: Some(issuer_of(&server.token_endpoint)),
            digest: self
                .keys
                .current
                .digest(tokens.access.expose_secret().as_bytes()),
            set_by: by.to_owned(),
            set_at: now,
        };
        let released = self.store.set_credential(sealed).await?;
        self.forget(Some(connection), principal);
        Ok(released)
    }
}
