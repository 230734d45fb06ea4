//! Tool errors: the one vocabulary ([`ToolErrorKind`], defined by the ledger that stores it) and
//! the one mapping per source error type into it.
//!
//! Guarantees: every egress failure becomes a kind through [`egress_error`], every MCP-client
//! failure through [`mcp_error`], and an HTTP status through
//! [`ToolErrorKind::from_http_status`] — so a DNS failure, a refused connection, a 500 or a
//! timeout is the same kind whether an api tool, an MCP tool or `fetch` met it. The message is
//! the source's own credential-free wording. A failure after which the request may have
//! reached the upstream unanswered is marked [`ToolError::into_unanswered`], whichever source
//! saw it, so the ledger parks an at-most-once call in doubt (LEDGER-19).

use airlock_egress::{Delivery, EgressError};
use airlock_mcp::{CallErrorKind, McpCallError};

pub use airlock_ledger::{ToolError, ToolErrorKind};

/// An egress guard's failure as a tool error.
pub(crate) fn egress_error(error: &EgressError) -> ToolError {
    let kind = match error {
        EgressError::BlockedScheme { .. }
        | EgressError::BlockedUrl { .. }
        | EgressError::BlockedName { .. }
        | EgressError::BlockedAddress { .. }
        | EgressError::BlockedRequest { .. } => ToolErrorKind::Blocked,
        EgressError::Unresolvable { .. }
        | EgressError::Connect { .. }
        | EgressError::Tls { .. } => ToolErrorKind::Unreachable,
        EgressError::ConnectionLost { .. } => ToolErrorKind::UpstreamError,
        EgressError::Timeout { .. } => ToolErrorKind::Timeout,
        EgressError::HttpStatus { status } => ToolErrorKind::from_http_status(*status),
        EgressError::Redirect { .. }
        | EgressError::Encoding { .. }
        | EgressError::NotText { .. }
        | EgressError::TooLarge { .. } => ToolErrorKind::BadResponse,
    };
    marked(ToolError::new(kind, error.to_string()), error.delivery())
}

/// `error`, marked unanswered when its request may have reached the upstream unanswered.
fn marked(error: ToolError, delivery: Delivery) -> ToolError {
    match delivery {
        Delivery::Unanswered => error.into_unanswered(),
        Delivery::NotSent | Delivery::Answered => error,
    }
}

/// An MCP client's failure as a tool error.
pub(crate) fn mcp_error(error: McpCallError) -> ToolError {
    let kind = match error.kind {
        CallErrorKind::ToolError => ToolErrorKind::ToolFailed,
        CallErrorKind::Blocked => ToolErrorKind::Blocked,
        CallErrorKind::Unreachable => ToolErrorKind::Unreachable,
        CallErrorKind::ConnectionLost => ToolErrorKind::UpstreamError,
        CallErrorKind::Timeout => ToolErrorKind::Timeout,
        CallErrorKind::HttpStatus => error.status.map_or(
            ToolErrorKind::UpstreamError,
            ToolErrorKind::from_http_status,
        ),
        CallErrorKind::JsonRpc | CallErrorKind::Other => ToolErrorKind::UpstreamError,
        CallErrorKind::Redirect
        | CallErrorKind::TooLarge
        | CallErrorKind::BadReply
        | CallErrorKind::Protocol => ToolErrorKind::BadResponse,
        CallErrorKind::Config => ToolErrorKind::BadDeclaration,
    };
    marked(ToolError::new(kind, error.message), error.delivery)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_same_cause_is_the_same_kind_from_either_source() {
        let causes: [(fn() -> EgressError, ToolErrorKind); 4] = [
            (
                || EgressError::Connect {
                    host: "api.example.com".into(),
                    source: "connection refused".into(),
                },
                ToolErrorKind::Unreachable,
            ),
            (
                || EgressError::Timeout {
                    after: Duration::from_secs(1),
                },
                ToolErrorKind::Timeout,
            ),
            (
                || EgressError::HttpStatus { status: 500 },
                ToolErrorKind::UpstreamError,
            ),
            (
                || EgressError::HttpStatus { status: 401 },
                ToolErrorKind::CredentialInvalid,
            ),
        ];
        for (cause, kind) in causes {
            assert_eq!(egress_error(&cause()).kind, kind, "{}", cause());
            let via_mcp = mcp_error(McpCallError::from(cause()));
            assert_eq!(via_mcp.kind, kind, "{} through the MCP client", cause());
        }
    }
}
