//! The errors of an MCP call and of discovery.
//!
//! Guarantees: every failure has a stable [`CallErrorKind`] that callers, logs and the ledger can
//! branch on, and a message a model or an operator can read. No message carries a credential, a
//! URL or a pinned IP address: upstreams are named by host only, and HTTP statuses are reported
//! as "the MCP server answered 401".

use std::fmt;
use std::time::Duration;

use airlock_egress::{Delivery, EgressError};

/// What kind of failure an MCP call ended in. The names from [`CallErrorKind::as_str`] are stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallErrorKind {
    /// The tool ran and reported `isError: true`; the message is its text.
    ToolError,
    /// The server answered a request with a JSON-RPC error; the message is its message.
    JsonRpc,
    /// The egress guard refused the destination before any request (the guard's reason).
    Blocked,
    /// The server answered with a 3xx, which is never followed.
    Redirect,
    /// The whole-call deadline passed.
    Timeout,
    /// The server answered with an HTTP error status.
    HttpStatus,
    /// The replies of the call were larger than the cap.
    TooLarge,
    /// A reply that breaks the transport rules: a content coding other than identity, a content
    /// type that is neither JSON nor an event stream, or a body that is not JSON-RPC.
    BadReply,
    /// The server does not speak the protocol revision the connection asks for.
    Protocol,
    /// The server could not be reached (name resolution, connection, TLS).
    Unreachable,
    /// The connection broke after a request was handed to it, before its answer was complete.
    ConnectionLost,
    /// The call could not be made as configured (for example a missing credential or an invalid
    /// header name); no request was sent.
    Config,
    /// Anything else the MCP SDK reported.
    Other,
}

impl CallErrorKind {
    /// The stable, machine-readable name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ToolError => "tool_error",
            Self::JsonRpc => "jsonrpc_error",
            Self::Blocked => "blocked",
            Self::Redirect => "redirect",
            Self::Timeout => "timeout",
            Self::HttpStatus => "http_status",
            Self::TooLarge => "too_large",
            Self::BadReply => "bad_reply",
            Self::Protocol => "protocol",
            Self::Unreachable => "unreachable",
            Self::ConnectionLost => "connection_lost",
            Self::Config => "config",
            Self::Other => "other",
        }
    }
}

impl fmt::Display for CallErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an MCP call (or a discovery) did not produce a result. A call never panics or raises
/// anything else: the runtime hands this to the model as the tool's error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct McpCallError {
    /// The stable kind.
    pub kind: CallErrorKind,
    /// A clear, credential-free message.
    pub message: String,
    /// For [`CallErrorKind::HttpStatus`]: the status the server answered, so a caller can
    /// classify it the way it classifies any HTTP status.
    pub status: Option<u16>,
    /// How far the call's own request (`tools/call`) got: a failure while the session opened
    /// sent nothing of the call; a break or a timeout after it was sent leaves the call's
    /// outcome unknown (docs/rules.md MCP-23).
    pub delivery: Delivery,
}

impl McpCallError {
    /// An error of `kind` with `message`.
    #[must_use]
    pub fn new(kind: CallErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            status: None,
            delivery: Delivery::NotSent,
        }
    }

    /// "no answer in 30 s", formatted from the whole-call deadline.
    #[must_use]
    pub fn timeout(after: Duration) -> Self {
        // The guard's own wording, so a timeout reads the same whichever layer saw it.
        Self::new(
            CallErrorKind::Timeout,
            EgressError::Timeout { after }.to_string(),
        )
    }

    /// "the MCP server answered 401" (never the address it came from).
    #[must_use]
    pub fn http_status(status: u16) -> Self {
        Self {
            status: Some(status),
            ..Self::new(
                CallErrorKind::HttpStatus,
                format!("the MCP server answered {status}"),
            )
        }
    }

    /// "the MCP server answered 302, a redirect, which is not followed".
    #[must_use]
    pub fn redirect(status: u16) -> Self {
        Self::new(
            CallErrorKind::Redirect,
            format!("the MCP server answered {status}, a redirect, which is not followed"),
        )
    }

    /// The replies passed the cap of `limit` bytes.
    #[must_use]
    pub fn too_large(limit: u64) -> Self {
        Self::new(
            CallErrorKind::TooLarge,
            format!("the MCP server's reply is larger than the {limit}-byte cap"),
        )
    }
}

impl From<EgressError> for McpCallError {
    fn from(err: EgressError) -> Self {
        let kind = match &err {
            EgressError::BlockedScheme { .. }
            | EgressError::BlockedUrl { .. }
            | EgressError::BlockedName { .. }
            | EgressError::BlockedAddress { .. }
            | EgressError::BlockedRequest { .. } => CallErrorKind::Blocked,
            EgressError::Unresolvable { .. }
            | EgressError::Tls { .. }
            | EgressError::Connect { .. } => CallErrorKind::Unreachable,
            EgressError::ConnectionLost { .. } => CallErrorKind::ConnectionLost,
            EgressError::Redirect { status } => return Self::redirect(*status),
            EgressError::HttpStatus { status } => return Self::http_status(*status),
            EgressError::Timeout { after } => return Self::timeout(*after),
            EgressError::TooLarge { limit } => return Self::too_large(*limit),
            EgressError::Encoding { .. } | EgressError::NotText { .. } => CallErrorKind::BadReply,
        };
        Self::new(kind, err.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_read_like_the_issue_says() {
        assert_eq!(
            McpCallError::timeout(Duration::from_secs(30)).message,
            "no answer in 30 s"
        );
        assert_eq!(
            McpCallError::http_status(401).message,
            "the MCP server answered 401"
        );
        assert_eq!(McpCallError::http_status(401).status, Some(401));
        assert!(McpCallError::redirect(302).message.contains("answered 302"));
    }

    #[test]
    fn egress_refusals_keep_the_guards_reason() {
        let err = McpCallError::from(EgressError::BlockedName {
            host: "localhost".into(),
            reason: "local name".into(),
        });
        assert_eq!(err.kind, CallErrorKind::Blocked);
        assert!(err.message.contains("local name"));
    }
}
