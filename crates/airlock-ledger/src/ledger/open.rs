//! Opening a [`Ledger`] over its pools, and the counts of what its writer lanes committed.
//!
//! Guarantees: every lane of one ledger shares one context (pool, clock, wakeups, recent rows,
//! outbox routes, wake announcer), so a commit wakes its waiters and is counted whichever lane
//! made it; [`Ledger::commits`] and [`Ledger::commit_time`] only grow, and count this store's
//! commits since it opened.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::{Announce, Ledger};
use crate::commit::writer::{LaneContext, Writer};
use crate::sql::db::{DbPool, WriteDb};
use crate::store_config::StoreConfig;
use crate::support::cache::RecentRows;
use crate::support::wakeups::Wakeups;

impl Ledger {
    /// Writes go through `write` (the writer lanes), reads through `read`.
    pub(crate) fn start(
        write: WriteDb,
        read: DbPool,
        config: &StoreConfig,
        lanes: usize,
        announce: Announce,
    ) -> Self {
        let wakeups = Arc::new(Wakeups::default());
        let commits = Arc::new(AtomicU64::new(0));
        let commit_ns = Arc::new(AtomicU64::new(0));
        let ctx = Arc::new(LaneContext {
            pool: write,
            clock: Arc::clone(&config.clock),
            wakeups: Arc::clone(&wakeups),
            approval_ttl: config.approval_ttl,
            sessions: Arc::default(),
            recent: RecentRows::default(),
            budgets: Arc::default(),
            routes: config.outbox.clone().into(),
            #[cfg(unix)]
            wake: announce.wake,
            commits: Arc::clone(&commits),
            commit_ns: Arc::clone(&commit_ns),
            ack_at_commit: config.listen,
        });
        Self {
            writer: Writer::start(&ctx, lanes),
            pool: read,
            wakeups,
            clock: Arc::clone(&config.clock),
            sweep_limit: config.sweep_limit,
            listener: None,
            commits,
            commit_ns,
        }
    }

    /// How many write transactions this store's writer lanes have committed since it opened:
    /// each one durable commit (one fsync on SQLite, one commit flush on PostgreSQL), however
    /// many callers' writes it carried. What the benchmarks count a step's commits with.
    #[must_use]
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// The time those transactions took, summed: each from its `BEGIN` to the database's
    /// acknowledgement of its commit (its rows' encoding included). What the benchmarks measure
    /// a step's commits with, beside pricing them at one commit's latency.
    #[must_use]
    pub fn commit_time(&self) -> Duration {
        Duration::from_nanos(self.commit_ns.load(Ordering::Relaxed))
    }

    pub(crate) fn wakeups(&self) -> Arc<Wakeups> {
        Arc::clone(&self.wakeups)
    }
}
