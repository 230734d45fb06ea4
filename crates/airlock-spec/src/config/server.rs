//! `[server]` of `airlock.toml`: bounds on what clients may hold of the HTTP server.
//!
//! Guarantees: every bound is at least 1 (a zero bound would refuse every request, so it is an
//! error, not a setting); an absent key keeps its documented default.

use std::time::Duration;

use crate::diag::Diag;
use crate::fields::Fields;
use crate::tree::Node;
use crate::values::duration;

/// Default `[server] header_timeout`: 10 s.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Default `[server] max_connections`.
pub const DEFAULT_MAX_CONNECTIONS: u64 = 1024;
/// Default `[server] max_in_flight`.
pub const DEFAULT_MAX_IN_FLIGHT: u64 = 512;
/// Default `[server] max_in_flight_per_principal`.
pub const DEFAULT_MAX_IN_FLIGHT_PER_PRINCIPAL: u64 = 256;

/// `[server]`: bounds on what clients may hold of the HTTP server. Every bound is at least 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// `header_timeout`: how long a connection may take to send a request's headers, and how
    /// long it may stay idle between requests (default `10s`).
    pub header_timeout: Duration,
    /// `max_connections`: open connections served at once; more are answered 503 and closed.
    pub max_connections: u64,
    /// `max_in_flight`: requests handled at once (health checks aside); more are answered 503.
    pub max_in_flight: u64,
    /// `max_in_flight_per_principal`: requests handled at once for one bearer token's principal.
    pub max_in_flight_per_principal: u64,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            max_in_flight_per_principal: DEFAULT_MAX_IN_FLIGHT_PER_PRINCIPAL,
        }
    }
}

/// `[server]`: a zero bound would refuse every request, so it is an error, not a setting.
pub(super) fn server(node: Option<&Node>, d: &mut Diag) -> ServerLimits {
    let mut limits = ServerLimits::default();
    let keys = [
        "public_url",
        "header_timeout",
        "max_connections",
        "max_in_flight",
        "max_in_flight_per_principal",
    ];
    let Some(f) = node.and_then(|n| Fields::open(n, "server", &keys, d)) else {
        return limits;
    };
    if let Some(timeout) = f
        .get("header_timeout")
        .and_then(|n| duration(n, "server.header_timeout", d))
    {
        if timeout.is_zero() {
            d.push(
                f.key_at("header_timeout"),
                "server.header_timeout",
                "must be longer than 0s",
            );
        } else {
            limits.header_timeout = timeout;
        }
    }
    for (key, slot) in [
        ("max_connections", &mut limits.max_connections),
        ("max_in_flight", &mut limits.max_in_flight),
        (
            "max_in_flight_per_principal",
            &mut limits.max_in_flight_per_principal,
        ),
    ] {
        match f.opt_u64(key, d) {
            Some(0) => d.push(f.key_at(key), &f.key(key), "must be at least 1"),
            Some(n) => *slot = n,
            None => {}
        }
    }
    limits
}
