//! The open-file limit of a serving process (docs/rules.md OPS-67..OPS-69). At start `airlock
//! serve` raises its soft `RLIMIT_NOFILE` to the hard limit ([`raise`]) and serves at most as
//! many connections as leave [`RESERVED`] descriptors for everything else
//! ([`connection_cap`]), so a flood of connections meets airlock's own cap — where the oldest
//! idle connection gives way to a new one (OPS-12) — before the kernel's `EMFILE`, where every
//! `accept` fails and a caller waits out the accept loop's backoff.
//!
//! Guarantees: the limit is only ever raised, never lowered; a limit that cannot be read as
//! finite or cannot be raised leaves the process as it was (the failure is logged); the cap is
//! never above `[server] max_connections` and never 0.

/// Descriptors kept back from connections, for everything else a serving process opens: the
/// ledger (SQLite's database, its WAL and shared memory, the wake sockets; or a PostgreSQL
/// pool), connections to upstreams, MCP servers, model providers and webhooks, the listener,
/// the standard streams. *(airlock's choice: SQLite needs about ten, each pooled egress
/// connection one; 128 leaves room for a hundred egress connections at once.)*
pub const RESERVED: u64 = 128;

/// The soft open-file limit at start and after [`raise`] (`None`: unlimited).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileLimit {
    /// The soft limit the process was started with.
    pub found: Option<u64>,
    /// The soft limit in force now.
    pub now: Option<u64>,
}

/// The connections served at once under a soft limit of `limit` descriptors: `configured`
/// (`[server] max_connections`), or `limit` less [`RESERVED`] when that is fewer — less half
/// the limit when the limit is under twice [`RESERVED`], so a small limit still serves — and at
/// least 1. An unlimited process serves `configured`.
#[must_use]
pub fn connection_cap(configured: u64, limit: Option<u64>) -> u64 {
    let Some(limit) = limit else {
        return configured.max(1);
    };
    let reserved = RESERVED.min(limit / 2);
    configured.min(limit - reserved).max(1)
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit. A hard limit that is unlimited is left
/// alone (a platform that allows it caps the soft limit elsewhere, and raising to it fails).
#[cfg(unix)]
#[must_use]
pub fn raise() -> FileLimit {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let found = limit.current;
    let target = match (found, limit.maximum) {
        (Some(soft), Some(hard)) if hard > soft => hard,
        _ => return FileLimit { found, now: found },
    };
    let raised = Rlimit {
        current: Some(target),
        maximum: limit.maximum,
    };
    if let Err(error) = setrlimit(Resource::Nofile, raised) {
        tracing::warn!(%error, soft = ?found, hard = target, "the open-file limit could not be raised; keeping the soft one");
    }
    FileLimit {
        found,
        now: getrlimit(Resource::Nofile).current,
    }
}

/// Elsewhere the limit is not read: nothing to raise, no cap below the configured one.
#[cfg(not(unix))]
#[must_use]
pub fn raise() -> FileLimit {
    FileLimit {
        found: None,
        now: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_room_below_the_limit() {
        // The common `ulimit -n 1024` with the default `max_connections = 1024`.
        assert_eq!(connection_cap(1024, Some(1024)), 896);
        // A limit well above the configured cap changes nothing.
        assert_eq!(connection_cap(1024, Some(524_288)), 1024);
        assert_eq!(connection_cap(1024, Some(1024 + RESERVED)), 1024);
        assert_eq!(connection_cap(1024, None), 1024);
        // Small limits keep half for the rest, and always serve one.
        assert_eq!(connection_cap(1024, Some(200)), 100);
        assert_eq!(connection_cap(8, Some(128)), 8);
        assert_eq!(connection_cap(1024, Some(1)), 1);
        assert_eq!(connection_cap(1024, Some(0)), 1);
    }

    #[cfg(unix)]
    #[test]
    fn raising_never_lowers_the_limit() {
        let limit = raise();
        assert!(limit.now >= limit.found || limit.now.is_none(), "{limit:?}");
        assert_eq!(raise().now, limit.now, "a second raise finds it raised");
    }
}
