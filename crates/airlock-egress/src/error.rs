//! The one error type of the egress guard.
//!
//! Guarantees: every variant has a stable [`EgressError::kind`] string that callers, logs and
//! metrics branch on; no message contains a credential (URLs are never formatted, only host
//! names, which cannot carry userinfo once the URL checks passed), and an upstream HTTP status is
//! reported without the address it came from ("the server answered 401").

use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

/// A boxed source error kept for logs (never formatted into our own message).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why an outbound request was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    /// The scheme is not `http`/`https`, or a credential would travel over plain `http`.
    #[error("scheme refused: {reason}")]
    BlockedScheme {
        /// What was wrong.
        reason: String,
    },
    /// The URL text or its parsed form is refused (controls, backslash, userinfo, port, syntax).
    #[error("URL refused: {reason}")]
    BlockedUrl {
        /// What was wrong.
        reason: String,
    },
    /// The host name is refused by the name rules or by the operator's deny list.
    #[error("host {host:?} refused: {reason}")]
    BlockedName {
        /// The host name as written in the URL (after IDNA and lower-casing).
        host: String,
        /// Which rule refused it.
        reason: String,
    },
    /// The host (an IP literal or a resolved name) has an address outside the public table.
    /// The message names the address only when the caller wrote it (an IP literal): what a
    /// name resolves to is the operator's to know, so it goes to the log ([`EgressError::detail`])
    /// and never to a caller (docs/rules.md EGRESS-39).
    #[error("{}", blocked_address_message(host, reason))]
    BlockedAddress {
        /// The host name or IP literal of the URL.
        host: String,
        /// The first refused address.
        addr: IpAddr,
        /// Which table entry or operator rule refused it.
        reason: String,
    },
    /// The request itself is refused (a caller-set `Host` header, `CONNECT`, framing headers).
    #[error("request refused: {reason}")]
    BlockedRequest {
        /// What was wrong.
        reason: String,
    },
    /// The name did not resolve: NXDOMAIN, SERVFAIL, a timeout or an empty answer.
    #[error("{host} could not be resolved: {reason}")]
    Unresolvable {
        /// The host name.
        host: String,
        /// What the resolver said.
        reason: String,
    },
    /// The server answered with a redirect, which is never followed.
    #[error("the server answered {status} (a redirect), which is not followed")]
    Redirect {
        /// The 3xx status code.
        status: u16,
    },
    /// The response carries a content coding other than `identity`.
    #[error("the response is encoded as {encoding:?}; only identity is accepted")]
    Encoding {
        /// The `Content-Encoding` value (sanitized and shortened).
        encoding: String,
    },
    /// The response body is not text.
    #[error("the response is not text ({content_type})")]
    NotText {
        /// The `Content-Type` value (sanitized and shortened), or a description.
        content_type: String,
    },
    /// The decoded body is larger than the cap.
    #[error("the response body is larger than {limit} bytes")]
    TooLarge {
        /// The cap in bytes.
        limit: u64,
    },
    /// The whole-call deadline passed before the call finished.
    #[error("no answer in {}", HumanDuration(*after))]
    Timeout {
        /// The whole-call deadline that passed.
        after: Duration,
    },
    /// The TLS handshake failed (for example a certificate for another name).
    #[error("TLS with {host} failed")]
    Tls {
        /// The host name the certificate was checked against.
        host: String,
        /// The underlying error, for logs.
        #[source]
        source: BoxError,
    },
    /// The connection could not be made: nothing of the request was sent.
    #[error("connection to {host} failed")]
    Connect {
        /// The host name or IP literal of the URL.
        host: String,
        /// The underlying error, for logs.
        #[source]
        source: BoxError,
    },
    /// The connection broke (reset, closed) after the request was handed to it and before the
    /// answer was complete: the upstream may have received the request and acted on it.
    #[error("the connection to {host} broke after the request was sent; it may have been received")]
    ConnectionLost {
        /// The host name or IP literal of the URL.
        host: String,
        /// The underlying error, for logs.
        #[source]
        source: BoxError,
    },
    /// The server answered with an error status (returned by [`crate::Response::error_for_status`]).
    #[error("the server answered {status}")]
    HttpStatus {
        /// The HTTP status code.
        status: u16,
    },
}

/// A refused address's message for a caller: an IP literal with the rule that refused it, a
/// name without the address it resolved to or the table entry that matched (either would tell
/// the caller about the operator's network).
fn blocked_address_message(host: &str, reason: &str) -> String {
    if is_ip_literal(host) {
        format!("{host} is refused: {reason}")
    } else {
        format!("{host} is refused: an address it resolves to is not allowed")
    }
}

fn is_ip_literal(host: &str) -> bool {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
        .is_ok()
}

impl EgressError {
    /// The operator's account of the failure, for the log and the operator's own commands
    /// (`airlock egress check`): the caller's message plus, for a refused address, the address
    /// and the rule that refused it. Never shown to a caller.
    #[must_use]
    pub fn detail(&self) -> String {
        match self {
            Self::BlockedAddress { host, addr, reason } => {
                format!("{host} ({addr}) is refused: {reason}")
            }
            other => other.to_string(),
        }
    }

    /// A stable, machine-readable name for the kind of failure.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::BlockedScheme { .. } => "blocked_scheme",
            Self::BlockedUrl { .. } => "blocked_url",
            Self::BlockedName { .. } => "blocked_name",
            Self::BlockedAddress { .. } => "blocked_address",
            Self::BlockedRequest { .. } => "blocked_request",
            Self::Unresolvable { .. } => "unresolvable",
            Self::Redirect { .. } => "redirect",
            Self::Encoding { .. } => "encoding",
            Self::NotText { .. } => "not_text",
            Self::TooLarge { .. } => "too_large",
            Self::Timeout { .. } => "timeout",
            Self::Tls { .. } => "tls",
            Self::Connect { .. } => "connect",
            Self::ConnectionLost { .. } => "connection_lost",
            Self::HttpStatus { .. } => "http_status",
        }
    }

    /// How far the request got (docs/rules.md EGRESS-30): whether the upstream may have
    /// received it without answering, which makes the outcome of a write unknown.
    #[must_use]
    pub fn delivery(&self) -> Delivery {
        match self {
            Self::BlockedScheme { .. }
            | Self::BlockedUrl { .. }
            | Self::BlockedName { .. }
            | Self::BlockedAddress { .. }
            | Self::BlockedRequest { .. }
            | Self::Unresolvable { .. }
            | Self::Tls { .. }
            | Self::Connect { .. } => Delivery::NotSent,
            // The guard cannot see whether the connection had taken the request when the
            // deadline passed, so a timeout counts as possibly received.
            Self::Timeout { .. } | Self::ConnectionLost { .. } => Delivery::Unanswered,
            Self::Redirect { .. }
            | Self::Encoding { .. }
            | Self::NotText { .. }
            | Self::TooLarge { .. }
            | Self::HttpStatus { .. } => Delivery::Answered,
        }
    }

    pub(crate) fn url(reason: impl Into<String>) -> Self {
        Self::BlockedUrl {
            reason: reason.into(),
        }
    }

    pub(crate) fn request(reason: impl Into<String>) -> Self {
        Self::BlockedRequest {
            reason: reason.into(),
        }
    }
}

/// How far a failed request got (docs/rules.md EGRESS-30).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Delivery {
    /// Nothing of the request left the machine: a refusal, a failed lookup, connection or TLS
    /// handshake. Retrying cannot run anything twice.
    NotSent,
    /// The request may have reached the upstream and no answer came back (the deadline
    /// passed, or the connection broke after the request was handed to it): whatever it asked
    /// for may have happened.
    Unanswered,
    /// The upstream answered (an error status, or a reply the guard does not pass on).
    Answered,
}

/// Formats a duration the way operators read it: "30 s", "300 ms".
pub(crate) struct HumanDuration(pub(crate) Duration);

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if ms >= 1000 && ms.is_multiple_of(1000) {
            write!(f, "{} s", ms / 1000)
        } else {
            write!(f, "{ms} ms")
        }
    }
}

/// Makes a server-supplied header value safe to show: printable ASCII only, at most 64 chars.
pub(crate) fn sanitize(value: &[u8]) -> String {
    let mut out: String = value
        .iter()
        .take(64)
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                char::from(b)
            } else {
                '?'
            }
        })
        .collect();
    if value.len() > 64 {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_reads_like_a_person_wrote_it() {
        let e = EgressError::Timeout {
            after: Duration::from_secs(30),
        };
        assert_eq!(e.to_string(), "no answer in 30 s");
        let e = EgressError::Timeout {
            after: Duration::from_millis(300),
        };
        assert_eq!(e.to_string(), "no answer in 300 ms");
    }

    #[test]
    fn http_status_names_only_the_status() {
        assert_eq!(
            EgressError::HttpStatus { status: 401 }.to_string(),
            "the server answered 401"
        );
    }

    /// EGRESS-39: what a name resolved to reaches the operator's log only, never a caller; an
    /// address the caller wrote itself is named back with the rule that refused it.
    #[test]
    fn a_refused_name_never_tells_the_caller_what_it_resolved_to() {
        let by_name = EgressError::BlockedAddress {
            host: "billing.internal.example".into(),
            addr: IpAddr::from([10, 0, 0, 5]),
            reason: "private-use (10.0.0.0/8)".into(),
        };
        let shown = by_name.to_string();
        assert!(!shown.contains("10.0.0"), "{shown}");
        assert!(shown.contains("billing.internal.example"), "{shown}");
        assert!(
            by_name.detail().contains("10.0.0.5"),
            "{}",
            by_name.detail()
        );
        let literal = EgressError::BlockedAddress {
            host: "[::1]".into(),
            addr: IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
            reason: "loopback".into(),
        };
        assert_eq!(literal.to_string(), "[::1] is refused: loopback");
    }

    #[test]
    fn every_kind_is_stable() {
        let kinds = [
            EgressError::BlockedScheme {
                reason: String::new(),
            }
            .kind(),
            EgressError::url("x").kind(),
            EgressError::BlockedName {
                host: String::new(),
                reason: String::new(),
            }
            .kind(),
            EgressError::BlockedAddress {
                host: String::new(),
                addr: IpAddr::from([127, 0, 0, 1]),
                reason: String::new(),
            }
            .kind(),
            EgressError::request("x").kind(),
            EgressError::Unresolvable {
                host: String::new(),
                reason: String::new(),
            }
            .kind(),
            EgressError::Redirect { status: 302 }.kind(),
            EgressError::Encoding {
                encoding: String::new(),
            }
            .kind(),
            EgressError::NotText {
                content_type: String::new(),
            }
            .kind(),
            EgressError::TooLarge { limit: 1 }.kind(),
            EgressError::Timeout {
                after: Duration::ZERO,
            }
            .kind(),
            EgressError::Tls {
                host: String::new(),
                source: "x".into(),
            }
            .kind(),
            EgressError::Connect {
                host: String::new(),
                source: "x".into(),
            }
            .kind(),
            EgressError::ConnectionLost {
                host: String::new(),
                source: "x".into(),
            }
            .kind(),
            EgressError::HttpStatus { status: 500 }.kind(),
        ];
        assert_eq!(
            kinds,
            [
                "blocked_scheme",
                "blocked_url",
                "blocked_name",
                "blocked_address",
                "blocked_request",
                "unresolvable",
                "redirect",
                "encoding",
                "not_text",
                "too_large",
                "timeout",
                "tls",
                "connect",
                "connection_lost",
                "http_status"
            ]
        );
    }

    #[test]
    fn sanitize_strips_controls_and_shortens() {
        assert_eq!(sanitize(b"gzip\r\nX"), "gzip??X");
        assert_eq!(sanitize(&[b'a'; 70]).chars().count(), 65);
    }
}
