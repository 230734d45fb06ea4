//! Tool errors: what the model (and the ledger row) is told when a tool call fails.
//!
//! A [`ToolError`] is a tool *result* with `is_error: true`, never a protocol error: the model
//! reads the message and may correct itself. The kind is a stable word stored on ledger rows;
//! the message never contains a credential (callers build it from paths and names, not values).

use std::time::Duration;

/// Why a tool call failed, as a stable word (`as_str`) stored with the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolErrorKind {
    /// The arguments do not fit the tool: schema violations, refused path values.
    BadArguments,
    /// The declaration or the connection cannot be executed as given (a hand-made model, a base
    /// URL that does not parse, a join that would change the origin).
    BadDeclaration,
    /// The connection has no credential, or the credential has the wrong shape.
    CredentialMissing,
    /// The upstream refused the credential (HTTP 401 or 403).
    CredentialInvalid,
    /// Too many calls: the upstream said 429, or airlock's own rate limit refused.
    RateLimited,
    /// The upstream refused the request (any other 4xx).
    BadRequest,
    /// The upstream failed or could not be reached (408, 5xx, network and guard failures).
    UpstreamError,
    /// The upstream answered something airlock does not pass on: a redirect, a non-text or
    /// oversized body, invalid JSON, or a `response.select` path that is not there.
    BadResponse,
}

impl ToolErrorKind {
    /// The stable word stored on ledger rows and shown to clients.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BadArguments => "bad_arguments",
            Self::BadDeclaration => "bad_declaration",
            Self::CredentialMissing => "credential_missing",
            Self::CredentialInvalid => "credential_invalid",
            Self::RateLimited => "rate_limited",
            Self::BadRequest => "bad_request",
            Self::UpstreamError => "upstream_error",
            Self::BadResponse => "bad_response",
        }
    }
}

impl std::fmt::Display for ToolErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed tool call: a kind, a message for the model, and for `rate_limited` when to retry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    /// Why it failed.
    pub kind: ToolErrorKind,
    /// What the model is told; never contains a credential.
    pub message: String,
    /// For [`ToolErrorKind::RateLimited`]: how long to wait, when known.
    pub retry_after: Option<Duration>,
}

impl ToolError {
    /// An error of `kind` with `message`.
    #[must_use]
    pub fn new(kind: ToolErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            retry_after: None,
        }
    }

    /// A `rate_limited` error, with the wait when known.
    #[must_use]
    pub fn rate_limited(message: impl Into<String>, retry_after: Option<Duration>) -> Self {
        Self {
            kind: ToolErrorKind::RateLimited,
            message: message.into(),
            retry_after,
        }
    }

    /// Shorthand for [`ToolErrorKind::BadArguments`].
    pub(crate) fn bad_arguments(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::BadArguments, message)
    }

    /// Shorthand for [`ToolErrorKind::BadDeclaration`].
    pub(crate) fn bad_declaration(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::BadDeclaration, message)
    }

    /// Shorthand for [`ToolErrorKind::BadResponse`].
    pub(crate) fn bad_response(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::BadResponse, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_have_stable_words() {
        let all = [
            (ToolErrorKind::BadArguments, "bad_arguments"),
            (ToolErrorKind::BadDeclaration, "bad_declaration"),
            (ToolErrorKind::CredentialMissing, "credential_missing"),
            (ToolErrorKind::CredentialInvalid, "credential_invalid"),
            (ToolErrorKind::RateLimited, "rate_limited"),
            (ToolErrorKind::BadRequest, "bad_request"),
            (ToolErrorKind::UpstreamError, "upstream_error"),
            (ToolErrorKind::BadResponse, "bad_response"),
        ];
        for (kind, word) in all {
            assert_eq!(kind.as_str(), word);
            assert_eq!(kind.to_string(), word);
        }
    }

    #[test]
    fn display_is_the_message() {
        let e = ToolError::rate_limited("HTTP 429: slow down", Some(Duration::from_secs(3)));
        assert_eq!(e.to_string(), "HTTP 429: slow down");
        assert_eq!(e.retry_after, Some(Duration::from_secs(3)));
    }
}
