//! Tracing and metrics for every guarded request.
//!
//! Guarantees: each request (or prepared call) gets one `egress` span recording the host, the
//! checked addresses, the address actually connected to and the decision; every refusal by a rule
//! increments `airlock_egress_blocked_total{kind}`, every other failure
//! `airlock_egress_failed_total{kind}`. Neither ever records a URL (its query may hold a key).

use tracing::field::Empty;

use crate::EgressError;

/// The span of one guarded request.
pub(crate) fn request_span() -> tracing::Span {
    tracing::info_span!(
        "egress",
        host = Empty,
        checked = Empty,
        chosen = Empty,
        decision = Empty
    )
}

/// True for a refusal by one of the guard's rules (as opposed to a network failure or timeout).
pub(crate) fn is_block(err: &EgressError) -> bool {
    match err {
        EgressError::BlockedScheme { .. }
        | EgressError::BlockedUrl { .. }
        | EgressError::BlockedName { .. }
        | EgressError::BlockedAddress { .. }
        | EgressError::BlockedRequest { .. }
        | EgressError::Unresolvable { .. }
        | EgressError::Redirect { .. }
        | EgressError::Encoding { .. }
        | EgressError::NotText { .. }
        | EgressError::TooLarge { .. } => true,
        EgressError::Timeout { .. }
        | EgressError::Tls { .. }
        | EgressError::Connect { .. }
        | EgressError::ConnectionLost { .. }
        | EgressError::HttpStatus { .. } => false,
    }
}

/// Records the decision on the span and counts a refusal or failure.
pub(crate) fn finish(span: &tracing::Span, result: Result<(), &EgressError>) {
    match result {
        Ok(()) => {
            span.record("decision", "allow");
        }
        Err(err) => {
            let kind = err.kind();
            span.record("decision", kind);
            if is_block(err) {
                metrics::counter!("airlock_egress_blocked_total", "kind" => kind).increment(1);
                tracing::info!(parent: span, kind, reason = %err.detail(), "egress blocked");
            } else {
                metrics::counter!("airlock_egress_failed_total", "kind" => kind).increment(1);
                tracing::info!(parent: span, kind, reason = %err.detail(), "egress failed");
            }
        }
    }
}
