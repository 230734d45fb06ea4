//! Host-name rules, applied before any resolution.
//!
//! Guarantees: a name is compared only after IDNA (UTS 46) and lower-casing, with one trailing dot
//! stripped; empty labels, characters outside `[a-z0-9.-_]`, `localhost`, dotless names and the
//! never-public suffixes are refused without asking DNS (docs/rules.md EGRESS-6, EGRESS-7). The
//! operator's deny list wins over everything; the allow list is the only way past the suffix rules.

use std::fmt;

use crate::{EgressError, EgressPolicy};

/// A host name that passed syntax normalization: ASCII, lower-case, no trailing dot, no empty
/// label, only `[a-z0-9.-_]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostName(String);

impl HostName {
    /// The normalized name.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for HostName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Suffixes no tenant API lives under; matched on whole labels at the end of the name.
const NEVER_PUBLIC_SUFFIXES: &[&str] = &[
    "localhost",
    "local",
    "internal",
    "svc",
    "arpa",
    "localdomain",
    "lan",
    "home",
    "corp",
    "intranet",
    "private",
    "test",
    "invalid",
    "example",
    "onion",
    "alt",
];

/// Normalizes a name's syntax: IDNA, lower-case, one trailing dot, empty labels, charset, lengths.
pub(crate) fn normalize(raw: &str) -> Result<HostName, &'static str> {
    // IDNA first, so fullwidth or enclosed letters cannot spell a refused name past the rules.
    let ascii = idna::domain_to_ascii(raw).map_err(|_| "not a valid international name")?;
    let lower = ascii.to_ascii_lowercase();
    let name = lower.strip_suffix('.').unwrap_or(&lower);
    if name.is_empty() {
        return Err("empty name");
    }
    if name.len() > 253 {
        return Err("name longer than 253 characters");
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Err("empty label");
        }
        if label.len() > 63 {
            return Err("label longer than 63 characters");
        }
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'_'))
    {
        return Err("characters outside [a-z0-9.-_]");
    }
    Ok(HostName(name.to_owned()))
}

/// Why a syntactically fine name can never be public, if it cannot.
pub(crate) fn never_public(name: &HostName) -> Option<&'static str> {
    let name = name.as_str();
    if !name.contains('.') {
        return Some(if name == "localhost" {
            "localhost"
        } else {
            "single-label name"
        });
    }
    let last = name.rsplit('.').next().unwrap_or(name);
    // `.cluster.local` is covered by `local`, since matching is on the last label.
    NEVER_PUBLIC_SUFFIXES
        .contains(&last)
        .then_some("never-public suffix")
}

/// True when `name` is listed in `hosts` (entries compared after the same normalization).
pub(crate) fn listed(hosts: &[String], name: &HostName) -> bool {
    hosts.iter().any(|h| normalize(h).is_ok_and(|h| h == *name))
}

/// Applies every name rule and the operator's host lists to a raw host name.
///
/// Returns the normalized name and whether the operator allowed it explicitly (an allowed host
/// may resolve to private addresses).
///
/// # Errors
/// [`EgressError::BlockedName`] naming the rule.
pub fn check_host(policy: &EgressPolicy, raw: &str) -> Result<(HostName, bool), EgressError> {
    let blocked = |reason: &str| EgressError::BlockedName {
        host: crate::error::sanitize(raw.as_bytes()),
        reason: reason.to_owned(),
    };
    let name = normalize(raw).map_err(blocked)?;
    if listed(&policy.deny_hosts, &name) {
        return Err(blocked("denied by the operator"));
    }
    if listed(&policy.allow_hosts, &name) {
        return Ok((name, true));
    }
    match never_public(&name) {
        Some(reason) => Err(blocked(reason)),
        None => Ok((name, false)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(raw: &str) -> String {
        check_host(&EgressPolicy::default(), raw)
            .unwrap()
            .0
            .to_string()
    }

    fn refused(raw: &str) -> String {
        match check_host(&EgressPolicy::default(), raw) {
            Err(EgressError::BlockedName { reason, .. }) => reason,
            other => panic!("{raw}: {other:?}"),
        }
    }

    #[test]
    fn normalizes_case_idna_and_one_trailing_dot() {
        assert_eq!(ok("API.Example.COM."), "api.example.com");
        assert_eq!(ok("bücher.de"), "xn--bcher-kva.de");
    }

    #[test]
    fn refuses_by_rule() {
        assert_eq!(refused("localhost."), "localhost");
        assert_eq!(refused("a.localhost"), "never-public suffix");
        assert_eq!(refused("a..b"), "empty label");
        assert_eq!(refused(".a.b"), "empty label");
        assert_eq!(refused("x.cluster.local"), "never-public suffix");
        assert_eq!(refused("exa$mple.com"), "characters outside [a-z0-9.-_]");
        assert_eq!(
            refused(&format!("{}.com", "a".repeat(64))),
            "label longer than 63 characters"
        );
    }

    #[test]
    fn operator_lists() {
        let policy = EgressPolicy {
            allow_hosts: vec!["Vault.Internal.".into()],
            deny_hosts: vec!["api.example.com".into()],
            ..EgressPolicy::default()
        };
        assert!(check_host(&policy, "vault.internal").unwrap().1);
        assert!(check_host(&policy, "API.example.com").is_err());
    }
}
