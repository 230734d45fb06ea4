//! Pinning: resolving a checked URL's host once and judging every address it has.
//!
//! Guarantees: one lookup per call of this function, under the DNS timeout (and the call
//! deadline, when there is one); an empty answer, a failed lookup or a timeout blocks; every
//! address must be allowed by the policy, and one refused address refuses the whole name. The
//! result is the only set of addresses a connection for this host may go to.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::time::Instant;

use crate::error::HumanDuration;
use crate::policy::AllowedAddr;
use crate::resolve::Resolve;
use crate::url_check::{Target, TargetHost};
use crate::{EgressError, EgressPolicy};

/// The checked addresses of one host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pinned {
    /// The allowed addresses, deduplicated, in answer order.
    pub(crate) addrs: Vec<AllowedAddr>,
}

impl Pinned {
    /// Where connections may go, with the URL's port.
    pub(crate) fn socket_addrs(&self, port: u16) -> Vec<SocketAddr> {
        self.addrs
            .iter()
            .map(|a| SocketAddr::new(a.dial, port))
            .collect()
    }

    /// True when every address is a loopback address the operator allowed explicitly: the only
    /// place a credential may travel over plain `http`.
    pub(crate) fn operator_loopback_only(&self) -> bool {
        self.addrs
            .iter()
            .all(|a| a.by_operator && crate::address::is_loopback(a.dial))
    }
}

/// A remembered refusal of [`pin`] (whose errors carry no foreign source, so can be rebuilt).
#[derive(Debug, Clone)]
pub(crate) struct Refusal {
    kind: RefusalKind,
    host: String,
    reason: String,
}

#[derive(Debug, Clone)]
enum RefusalKind {
    Address(IpAddr),
    Unresolvable,
    Timeout(Duration),
    Other(&'static str),
}

impl From<&EgressError> for Refusal {
    fn from(err: &EgressError) -> Self {
        let (kind, host, reason) = match err {
            EgressError::BlockedAddress { host, addr, reason } => {
                (RefusalKind::Address(*addr), host.clone(), reason.clone())
            }
            EgressError::Unresolvable { host, reason } => {
                (RefusalKind::Unresolvable, host.clone(), reason.clone())
            }
            EgressError::Timeout { after } => {
                (RefusalKind::Timeout(*after), String::new(), String::new())
            }
            other => (
                RefusalKind::Other(other.kind()),
                String::new(),
                other.to_string(),
            ),
        };
        Self { kind, host, reason }
    }
}

impl From<Refusal> for EgressError {
    fn from(r: Refusal) -> Self {
        match r.kind {
            RefusalKind::Address(addr) => Self::BlockedAddress {
                host: r.host,
                addr,
                reason: r.reason,
            },
            RefusalKind::Unresolvable => Self::Unresolvable {
                host: r.host,
                reason: r.reason,
            },
            RefusalKind::Timeout(after) => Self::Timeout { after },
            // `pin` returns no other kind; should it ever, the call still refuses the host.
            RefusalKind::Other(kind) => Self::BlockedAddress {
                host: r.host,
                addr: IpAddr::from([0, 0, 0, 0]),
                reason: format!("{kind}: {}", r.reason),
            },
        }
    }
}

/// The whole-call deadline and its length (for the "no answer in 30 s" message).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline {
    pub(crate) at: Instant,
    pub(crate) budget: Duration,
}

impl Deadline {
    pub(crate) fn starting_now(budget: Duration) -> Self {
        Self {
            at: Instant::now() + budget,
            budget,
        }
    }

    pub(crate) fn error(self) -> EgressError {
        EgressError::Timeout { after: self.budget }
    }
}

/// Resolves (for a name) and judges every address of `target`'s host.
pub(crate) async fn pin(
    policy: &EgressPolicy,
    resolver: &dyn Resolve,
    target: &Target,
    deadline: Option<Deadline>,
) -> Result<Pinned, EgressError> {
    let host = target.host_label();
    let (answer, host_allowed) = match &target.host {
        // IP literals are never resolved, but judged exactly like an answer.
        TargetHost::Ip(ip) => (vec![*ip], false),
        TargetHost::Name {
            name,
            operator_allowed,
        } => (
            lookup(policy, resolver, name.as_str(), deadline).await?,
            *operator_allowed,
        ),
    };
    if answer.is_empty() {
        return Err(EgressError::Unresolvable {
            host,
            reason: "empty answer".into(),
        });
    }
    let mut addrs: Vec<AllowedAddr> = Vec::with_capacity(answer.len());
    for addr in answer {
        let allowed = policy.judge_address(addr, host_allowed).map_err(|reason| {
            EgressError::BlockedAddress {
                host: host.clone(),
                addr,
                reason,
            }
        })?;
        if !addrs.iter().any(|a| a.dial == allowed.dial) {
            addrs.push(allowed);
        }
    }
    Ok(Pinned { addrs })
}

async fn lookup(
    policy: &EgressPolicy,
    resolver: &dyn Resolve,
    name: &str,
    deadline: Option<Deadline>,
) -> Result<Vec<IpAddr>, EgressError> {
    let dns_deadline = Instant::now() + policy.dns_timeout;
    let call_first = deadline.filter(|d| d.at < dns_deadline);
    let until = call_first.map_or(dns_deadline, |d| d.at);
    match tokio::time::timeout_at(until, resolver.lookup(name)).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => Err(EgressError::Unresolvable {
            host: name.to_owned(),
            reason: e.to_string(),
        }),
        Err(_) => Err(match call_first {
            Some(d) => d.error(),
            None => EgressError::Unresolvable {
                host: name.to_owned(),
                reason: format!("no DNS answer in {}", HumanDuration(policy.dns_timeout)),
            },
        }),
    }
}
