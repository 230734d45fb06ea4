//! The OAuth client side of per-person credentials: "connect your account" (the authorization
//! code flow with PKCE, and refresh) against an upstream's authorization server, and token
//! exchange for callers that reached airlock with an OAuth access token (RFC 8693 token
//! exchange, RFC 7523 jwt-bearer as Entra's on-behalf-of), with a per-principal cache.
//!
//! Guarantees:
//! - Every request goes through the egress guard (`airlock_egress::GuardedClient`): its address checks, pins,
//!   deadline and body cap apply, and a credential never travels over plain `http` (except to an
//!   operator-allowed loopback address).
//! - A client with a secret authenticates with HTTP Basic (`client_secret_basic`, id and secret
//!   form-encoded first, RFC 6749 §2.3.1); a public client sends its `client_id` in the form.
//! - The PKCE verifier is 32 random bytes (43 base64url characters) and the challenge its S256
//!   digest; `plain` is never offered.
//! - With an actor token, the subject token's `may_act` claim must name the actor before
//!   anything is sent ([`Exchange::exchange`]).
//! - No secret (access, refresh, subject or actor token, client secret, code, verifier) is ever
//!   in an error, a log line or a `Debug` output: secrets are [`SecretString`]s, and an
//!   authorization server's own error text is cut short, stripped of control characters and of
//!   any secret the request carried before it is kept.
//! - [`ExchangeCache`] never answers one principal with another's token, and never with a token
//!   that expires within [`ExchangeCache::SKEW`].
//!
//! Why hand-written form posts and not the `oauth2` crate: `oauth2` (v5) has no RFC 8693 or
//! RFC 7523 grant, so those two — the larger half of this module — would be written by hand
//! anyway, over the same form post and the same token-response parsing that code and refresh
//! need; `oauth2` would add only PKCE (a dozen lines here) while bringing a second `rand`
//! (0.8), `chrono` and `serde_path_to_error` into a tree built on two cores; and its parse
//! errors carry the raw response body, which can hold a token, so every error would need
//! re-mapping. Here the token response is read as a JSON value, field by field, so no
//! deserializer message can echo a value either.

mod cache;
mod client;
mod endpoint;
mod exchange;

use std::time::Duration;

use airlock_egress::EgressError;
use secrecy::SecretString;

pub use cache::{CacheClock, CacheKey, ExchangeCache};
pub use client::{AuthorizationServer, PkceVerifier};
pub use exchange::{Actor, Exchange, Grant};

/// What a token endpoint issued. `Debug` shows no token (each is a [`SecretString`]).
#[derive(Debug, Clone)]
pub struct Tokens {
    /// The access token, to send as `Authorization: Bearer`.
    pub access: SecretString,
    /// The refresh token: the new one when the server rotated it; after
    /// [`AuthorizationServer::refresh`] without rotation, the one that was used (RFC 6749 §6:
    /// the client keeps it).
    pub refresh: Option<SecretString>,
    /// The access token's lifetime as the server stated it (`expires_in`), from when it was
    /// received; `None` when the server did not say.
    pub expires_in: Option<Duration>,
    /// The scopes granted, when the server named them (they may differ from those asked for).
    pub scope: Option<String>,
    /// RFC 8693's `issued_token_type`, when the server named it.
    pub issued_token_type: Option<String>,
}

/// Why an OAuth request failed. Each message says what to do about it and holds no secret.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    /// The authorization server answered with an OAuth error (RFC 6749 §5.2), for example
    /// `invalid_grant` for a spent code or a revoked refresh token.
    #[error("the authorization server {host} refused the request: {error}{}", detail(description.as_deref()))]
    Refused {
        /// The token endpoint's host.
        host: String,
        /// The HTTP status of the refusal.
        status: u16,
        /// The server's `error` code.
        error: String,
        /// The server's `error_description`, cleaned (see the module docs).
        description: Option<String>,
    },
    /// The server answered an HTTP error without an OAuth error body.
    #[error("the authorization server {host} answered HTTP {status} without an OAuth error")]
    Status {
        /// The token endpoint's host.
        host: String,
        /// The HTTP status.
        status: u16,
    },
    /// The egress guard refused the request, or it failed on the way (unresolvable, refused
    /// address, timeout, TLS, a body over the cap).
    #[error("the token endpoint could not be reached: {0}")]
    Unreachable(#[source] EgressError),
    /// A success answer that is not a usable token response.
    #[error("the authorization server {host} answered with no usable token: {reason}")]
    Malformed {
        /// The token endpoint's host.
        host: String,
        /// What was wrong with the answer (never a value from it).
        reason: &'static str,
    },
    /// The subject token has no `may_act` claim, so it lets no one act for its subject.
    #[error(
        "the subject token has no may_act claim, so it does not let {actor} act for its subject; no exchange was asked for"
    )]
    MayActMissing {
        /// The configured actor.
        actor: String,
    },
    /// The subject token's `may_act` claim names another party than the actor.
    #[error(
        "the subject token's may_act claim does not name {actor} (sub and iss must both match); no exchange was asked for"
    )]
    MayActMismatch {
        /// The configured actor.
        actor: String,
    },
    /// The subject token's claims cannot be read, so its `may_act` cannot be checked.
    #[error(
        "the subject token is not a JWT whose claims can be read, so its may_act claim cannot be checked; no exchange was asked for"
    )]
    SubjectUnreadable,
}

impl OAuthError {
    /// A stable, machine-readable name for the kind of failure.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Refused { .. } => "refused",
            Self::Status { .. } => "http_status",
            Self::Unreachable(_) => "unreachable",
            Self::Malformed { .. } => "malformed",
            Self::MayActMissing { .. } => "may_act_missing",
            Self::MayActMismatch { .. } => "may_act_mismatch",
            Self::SubjectUnreadable => "subject_unreadable",
        }
    }
}

fn detail(description: Option<&str>) -> String {
    description.map_or_else(String::new, |d| format!(" ({d})"))
}
