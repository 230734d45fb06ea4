//! The operator's offline check: would the guard let this URL (or base + path) through, and where
//! would it connect?
//!
//! Guarantees: runs exactly the checks a real request runs up to the connection (URL, name,
//! resolution through the given resolver, every address, the port list), sends nothing, and
//! reports the addresses a request would be pinned to. `airlock egress check` prints the
//! [`CheckReport`] and exits 0 for allow, 3 for block.

use std::fmt;
use std::net::SocketAddr;

use crate::pin;
use crate::resolve::Resolve;
use crate::url_check::{self, TargetHost};
use crate::{EgressError, EgressPolicy};

/// The outcome of [`check_url`] or [`check_join`].
#[derive(Debug)]
pub struct CheckReport {
    /// The URL checked (for a join, the joined URL when the join succeeded).
    pub url: String,
    /// The addresses a request would connect to, or why it is refused.
    pub outcome: Result<Vec<SocketAddr>, EgressError>,
}

impl CheckReport {
    /// True when the guard would let the request through.
    #[must_use]
    pub fn is_allowed(&self) -> bool {
        self.outcome.is_ok()
    }

    /// The refusal kind (see [`EgressError::kind`]), or `None` when allowed.
    #[must_use]
    pub fn kind(&self) -> Option<&'static str> {
        self.outcome.as_ref().err().map(EgressError::kind)
    }
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.outcome {
            Ok(addrs) => {
                writeln!(f, "allow {}", self.url)?;
                let list: Vec<String> = addrs.iter().map(ToString::to_string).collect();
                write!(f, "  would connect to: {}", list.join(", "))
            }
            Err(err) => {
                writeln!(f, "block {}", self.url)?;
                write!(f, "  reason ({}): {}", err.kind(), err.detail())
            }
        }
    }
}

/// Checks `url` as the guard would, resolving through `resolver` (one lookup, no request).
pub async fn check_url(policy: &EgressPolicy, url: &str, resolver: &dyn Resolve) -> CheckReport {
    CheckReport {
        url: url.escape_debug().to_string(),
        outcome: check(policy, url, resolver).await,
    }
}

async fn check(
    policy: &EgressPolicy,
    url: &str,
    resolver: &dyn Resolve,
) -> Result<Vec<SocketAddr>, EgressError> {
    let target = url_check::parse_target(policy, url)?;
    let pinned = pin::pin(policy, resolver, &target, None).await?;
    Ok(pinned.socket_addrs(target.port))
}

/// Checks `url` with every rule that needs no DNS: the URL text and shape, the scheme, the
/// ports, the name rules and the operator's host lists, and — for an IP literal — the address
/// table and the operator's CIDRs. A name that passes is not resolved, so its addresses are not
/// judged: that verdict belongs to the request (or to [`check_url`] with a resolver).
///
/// # Errors
/// The refusal a request to `url` would get before any DNS lookup.
pub fn check_offline(policy: &EgressPolicy, url: &str) -> Result<(), EgressError> {
    let target = url_check::parse_target(policy, url)?;
    match target.host {
        TargetHost::Ip(addr) => policy
            .judge_address(addr, false)
            .map(drop)
            .map_err(|reason| EgressError::BlockedAddress {
                host: target.host_label(),
                addr,
                reason,
            }),
        TargetHost::Name { .. } => Ok(()),
    }
}

/// Checks the join of a base URL with a declared path, then the joined URL as [`check_url`].
pub async fn check_join(
    policy: &EgressPolicy,
    base: &str,
    path: &str,
    resolver: &dyn Resolve,
) -> CheckReport {
    let joined =
        url_check::parse_target(policy, base).and_then(|base| url_check::join(&base.url, path));
    match joined {
        Ok(url) => check_url(policy, url.as_str(), resolver).await,
        Err(err) => CheckReport {
            url: format!("{} + {}", base.escape_debug(), path.escape_debug()),
            outcome: Err(err),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StaticResolver;

    #[tokio::test]
    async fn reports_read_like_the_cli_prints_them() {
        let resolver = StaticResolver::parse_overrides(["api.example.com=93.184.215.14"]).unwrap();
        let policy = EgressPolicy::default();
        let allow = check_url(&policy, "https://api.example.com/v1", &resolver).await;
        assert_eq!(
            allow.to_string(),
            "allow https://api.example.com/v1\n  would connect to: 93.184.215.14:443"
        );
        let block = check_url(&policy, "http://169.254.169.254/", &resolver).await;
        assert_eq!(block.kind(), Some("blocked_address"));
        assert_eq!(
            block.to_string(),
            "block http://169.254.169.254/\n  reason (blocked_address): 169.254.169.254 \
             (169.254.169.254) is refused: link-local (cloud metadata) (169.254.0.0/16)"
        );
        let join = check_join(
            &policy,
            "https://api.example.com",
            "//evil.com/x",
            &resolver,
        )
        .await;
        assert_eq!(join.kind(), Some("blocked_url"));
    }

    #[test]
    fn offline_judges_literals_and_names_but_never_resolves() {
        let policy = EgressPolicy::default();
        let kind = |url: &str| check_offline(&policy, url).err().map(|e| e.kind());
        assert_eq!(kind("http://10.0.0.5/"), Some("blocked_address"));
        assert_eq!(kind("https://svc.internal/"), Some("blocked_name"));
        assert_eq!(kind("ftp://api.example.com/"), Some("blocked_scheme"));
        assert_eq!(kind("https://api.example.com/v1"), None);
        assert_eq!(kind("https://93.184.215.14/"), None);
        let allowed = EgressPolicy {
            allow_cidrs: vec!["10.0.0.0/8".parse().unwrap()],
            ..EgressPolicy::default()
        };
        assert!(check_offline(&allowed, "http://10.0.0.5/").is_ok());
    }
}
