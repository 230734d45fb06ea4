//! `[egress]` of `airlock.toml`: the operator's egress policy. Nothing private is reachable
//! unless `allow` names it; `deny` always wins; every entry that is neither a CIDR, an address
//! nor a host name is an error at its line.

use std::time::Duration;

use ipnet::IpNet;

use crate::diag::Diag;
use crate::fields::Fields;
use crate::tree::Node;
use crate::values::duration;

/// Default whole-call egress deadline: 30 s.
pub const DEFAULT_EGRESS_DEADLINE: Duration = Duration::from_secs(30);
/// Default egress body cap: 5 MiB.
pub const DEFAULT_BODY_CAP: u64 = 5 * 1024 * 1024;

/// The operator's egress policy. Allow lists are empty by default: nothing private is reachable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressSettings {
    /// CIDRs allowed although not public (from `allow`).
    pub allow_cidrs: Vec<IpNet>,
    /// Host names allowed although not public (from `allow`).
    pub allow_hosts: Vec<String>,
    /// CIDRs always blocked (from `deny`).
    pub deny_cidrs: Vec<IpNet>,
    /// Host names always blocked (from `deny`).
    pub deny_hosts: Vec<String>,
    /// `ports`: when set, the only ports allowed.
    pub ports: Option<Vec<u16>>,
    /// `deadline`: one deadline for every request of a call (default `30s`).
    pub deadline: Duration,
    /// `body_cap`: decoded body cap in bytes (default 5 MiB).
    pub body_cap: u64,
    /// `allow_integrations`: the catalog integrations (by slug) whose calls may reach what
    /// `allow` lets through; every other one reaches public addresses only (docs/rules.md
    /// EGRESS-38). Default: none.
    pub allow_integrations: Vec<String>,
    /// `allow_fetch`: whether the `fetch` builtin may reach what `allow` lets through; by
    /// default it reaches public addresses only, since its URL is whatever a model or a caller
    /// asks for (docs/rules.md EGRESS-40). Default: `false`.
    pub allow_fetch: bool,
}

pub(crate) fn read_egress(node: Option<&Node>, d: &mut Diag) -> EgressSettings {
    let mut settings = EgressSettings {
        allow_cidrs: Vec::new(),
        allow_hosts: Vec::new(),
        deny_cidrs: Vec::new(),
        deny_hosts: Vec::new(),
        ports: None,
        deadline: DEFAULT_EGRESS_DEADLINE,
        body_cap: DEFAULT_BODY_CAP,
        allow_integrations: Vec::new(),
        allow_fetch: false,
    };
    let Some(f) = node.and_then(|n| {
        Fields::open(
            n,
            "egress",
            &[
                "allow",
                "deny",
                "ports",
                "deadline",
                "body_cap",
                "allow_integrations",
                "allow_fetch",
            ],
            d,
        )
    }) else {
        return settings;
    };
    (settings.allow_cidrs, settings.allow_hosts) = cidrs_and_hosts(&f, "allow", d);
    (settings.deny_cidrs, settings.deny_hosts) = cidrs_and_hosts(&f, "deny", d);
    if let Ok(Some(allow)) = f.opt_bool("allow_fetch", d) {
        settings.allow_fetch = allow;
    }
    if let Some(slugs) = f.opt_str_list("allow_integrations", d) {
        settings.allow_integrations = slugs.into_iter().map(|(slug, _)| slug).collect();
    }
    if let Some(ports) = f.opt_list("ports", d) {
        let mut list = Vec::new();
        for (path, port) in ports {
            match port
                .to_json()
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .filter(|p| *p != 0)
            {
                Some(p) => list.push(p),
                None => d.push(port.at, &path, "expected a port number between 1 and 65535"),
            }
        }
        settings.ports = Some(list);
    }
    if let Some(deadline) = f
        .get("deadline")
        .and_then(|n| duration(n, "egress.deadline", d))
    {
        settings.deadline = deadline;
    }
    if let Some(cap) = f.opt_u64("body_cap", d) {
        settings.body_cap = cap;
    }
    settings
}

fn cidrs_and_hosts(f: &Fields<'_>, key: &str, d: &mut Diag) -> (Vec<IpNet>, Vec<String>) {
    let (mut cidrs, mut hosts) = (Vec::new(), Vec::new());
    for (i, (entry, at)) in f
        .opt_str_list(key, d)
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        if let Ok(net) = entry.parse::<IpNet>() {
            cidrs.push(net.trunc());
        } else if let Ok(ip) = entry.parse::<std::net::IpAddr>() {
            cidrs.push(IpNet::from(ip));
        } else if !entry.is_empty()
            && entry
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
        {
            hosts.push(entry.to_ascii_lowercase().trim_end_matches('.').to_owned());
        } else {
            d.push(
                at,
                &format!("egress.{key}[{i}]"),
                format!(
                    "`{entry}` is neither a CIDR (`10.0.0.0/8`), an IP address nor a host name"
                ),
            );
        }
    }
    (cidrs, hosts)
}
