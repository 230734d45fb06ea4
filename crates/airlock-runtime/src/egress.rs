//! The operator's `[egress]` settings as the guard's policies: the one place the two meet.

use airlock_egress::{DEFAULT_DNS_TIMEOUT, EgressPolicy};
use airlock_spec::EgressSettings;

/// The egress policy an `airlock.toml` describes.
#[must_use]
pub fn egress_policy(settings: &EgressSettings) -> EgressPolicy {
    EgressPolicy {
        allow_cidrs: settings.allow_cidrs.clone(),
        allow_hosts: settings.allow_hosts.clone(),
        deny_cidrs: settings.deny_cidrs.clone(),
        deny_hosts: settings.deny_hosts.clone(),
        ports: settings.ports.clone(),
        deadline: settings.deadline,
        max_body_bytes: settings.body_cap,
        dns_timeout: DEFAULT_DNS_TIMEOUT.min(settings.deadline),
    }
}
