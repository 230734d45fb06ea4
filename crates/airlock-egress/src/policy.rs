//! The operator's egress policy and the per-address decision built on the address table.
//!
//! Guarantees: the unspecified address is refused whatever the lists say; an operator `deny`
//! CIDR wins over everything (checked against the address and the IPv4 it embeds); an `allow`
//! CIDR or host is the only way to reach a non-public address; nothing is allowed implicitly.

use std::net::IpAddr;
use std::time::Duration;

use ipnet::IpNet;

use crate::address::{self, Classification};

/// The default whole-call deadline: 30 s.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(30);
/// The default cap on a decoded response body: 5 MiB.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 5 * 1024 * 1024;
/// The default DNS timeout: 5 s.
pub const DEFAULT_DNS_TIMEOUT: Duration = Duration::from_secs(5);

/// What the egress guard lets through (the `egress` section of `airlock.toml`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressPolicy {
    /// CIDRs the operator allows even though the table refuses them (default: none).
    pub allow_cidrs: Vec<IpNet>,
    /// Host names the operator allows past the name rules; their addresses may be private
    /// (default: none). Exact names, compared after IDNA, lower-casing and one trailing dot.
    pub allow_hosts: Vec<String>,
    /// CIDRs always refused, e.g. the gateway's own public addresses (default: none).
    pub deny_cidrs: Vec<IpNet>,
    /// Host names always refused (default: none).
    pub deny_hosts: Vec<String>,
    /// When set, the only destination ports allowed (default: any port but 0).
    pub ports: Option<Vec<u16>>,
    /// One deadline for every request of a call (default 30 s).
    pub deadline: Duration,
    /// Cap on a decoded response body, in bytes (default 5 MiB = 5,242,880).
    pub max_body_bytes: u64,
    /// Time allowed for one DNS lookup (default 5 s; the call deadline still applies).
    pub dns_timeout: Duration,
}

impl Default for EgressPolicy {
    fn default() -> Self {
        Self {
            allow_cidrs: Vec::new(),
            allow_hosts: Vec::new(),
            deny_cidrs: Vec::new(),
            deny_hosts: Vec::new(),
            ports: None,
            deadline: DEFAULT_DEADLINE,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            dns_timeout: DEFAULT_DNS_TIMEOUT,
        }
    }
}

/// An address the policy allows, and where to dial it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AllowedAddr {
    /// Where to connect (the IPv4 of a mapped address).
    pub(crate) dial: IpAddr,
    /// True when only an operator allow rule let it through (not public by the table).
    pub(crate) by_operator: bool,
}

impl EgressPolicy {
    /// This policy without the operator's `allow` lists: only public addresses are reached,
    /// while `deny`, the ports, the deadline and the body cap still apply. The policy of what
    /// tenants and callers declare (docs/rules.md EGRESS-38).
    #[must_use]
    pub fn public_only(&self) -> Self {
        Self {
            allow_cidrs: Vec::new(),
            allow_hosts: Vec::new(),
            ..self.clone()
        }
    }

    /// Decides one address. `host_allowed` is true when the name was on the operator's allow list.
    pub(crate) fn judge_address(
        &self,
        addr: IpAddr,
        host_allowed: bool,
    ) -> Result<AllowedAddr, String> {
        if address::is_unspecified(addr) {
            return Err("unspecified address (reaches the local host)".into());
        }
        let embedded = address::embedded_ipv4_of(addr).map(|e| IpAddr::V4(e.ipv4()));
        let matches = |nets: &[IpNet]| {
            nets.iter()
                .any(|n| n.contains(&addr) || embedded.is_some_and(|e| n.contains(&e)))
        };
        if matches(&self.deny_cidrs) {
            return Err("denied by the operator".into());
        }
        match address::classify(addr) {
            Classification::Public { dial } => Ok(AllowedAddr {
                dial,
                by_operator: false,
            }),
            Classification::Special(special) => {
                if host_allowed || matches(&self.allow_cidrs) {
                    // A mapped address is dialled as its IPv4, like a public one.
                    let dial = match address::embedded_ipv4_of(addr) {
                        Some(address::Embedding::Mapped(v4)) => IpAddr::V4(v4),
                        _ => addr,
                    };
                    Ok(AllowedAddr {
                        dial,
                        by_operator: true,
                    })
                } else {
                    Err(special.to_string())
                }
            }
        }
    }

    /// True when `port` is a destination this policy allows.
    pub(crate) fn port_allowed(&self, port: u16) -> bool {
        port != 0
            && self
                .ports
                .as_ref()
                .is_none_or(|ports| ports.contains(&port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    #[test]
    fn deny_wins_over_allow_and_table() {
        let policy = EgressPolicy {
            allow_cidrs: vec![net("127.0.0.0/8")],
            deny_cidrs: vec![net("127.0.0.1/32"), net("34.1.2.3/32")],
            ..EgressPolicy::default()
        };
        assert!(
            policy
                .judge_address("127.0.0.1".parse().unwrap(), true)
                .is_err()
        );
        assert!(
            policy
                .judge_address("::ffff:127.0.0.1".parse().unwrap(), true)
                .is_err()
        );
        assert!(
            policy
                .judge_address("34.1.2.3".parse().unwrap(), false)
                .is_err()
        );
        let ok = policy
            .judge_address("127.0.0.2".parse().unwrap(), false)
            .unwrap();
        assert!(ok.by_operator);
    }

    #[test]
    fn unspecified_is_never_allowed() {
        let policy = EgressPolicy {
            allow_cidrs: vec![net("0.0.0.0/0"), net("::/0")],
            ..EgressPolicy::default()
        };
        for a in ["0.0.0.0", "::", "::ffff:0.0.0.0"] {
            assert!(
                policy.judge_address(a.parse().unwrap(), true).is_err(),
                "{a}"
            );
        }
    }

    #[test]
    fn ports() {
        let mut policy = EgressPolicy::default();
        assert!(policy.port_allowed(8443) && !policy.port_allowed(0));
        policy.ports = Some(vec![443]);
        assert!(policy.port_allowed(443) && !policy.port_allowed(80));
    }
}
