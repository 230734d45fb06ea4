//! [`Ledger`]: the one store type. It plays each role of [`Store`](crate::Store) (one file
//! per role: `sessions`, `agent_runs`, `invocations`, `reads`, `confirmations`, `pins`,
//! `rates`; the outbox in `crate::outbox`) by handing each write to the writer lanes as a job
//! that runs one transition (`record`, `lease`, `decide`, `sweep`, `runs`), and each read to
//! the read pool (`reads`), expiring overdue rows on the way. Backend differences end at
//! construction (see `sqlite`, `postgres`).
//!
//! Guarantees: every role is played in full, on both backends; a write's future resolves only
//! after its commit is durable, and no read returns an overdue parked row as still waiting.

mod agent_runs;
mod budgets;
mod confirmations;
mod freezes;
mod fresh_reads;
mod invocations;
mod open;
mod pins;
mod rates;
mod reads;
mod sessions;
mod transactional;
mod vault;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use crate::commit::writer::Writer;
use crate::sql::db::DbPool;
use crate::support::wakeups::Wakeups;
use crate::vocabulary::clock::Clock;

/// Aborts a background task when the store goes away.
pub(crate) struct AbortOnDrop(pub(crate) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The ledger on SQLite ([`Ledger::open`]) or PostgreSQL ([`Ledger::connect`]); use it as
/// `Arc<dyn Store>`. [`SqliteStore`](crate::SqliteStore) and [`PgStore`](crate::PgStore)
/// name this type.
pub struct Ledger {
    pub(crate) pool: DbPool,
    pub(crate) writer: Writer,
    pub(crate) wakeups: Arc<Wakeups>,
    pub(crate) clock: Arc<dyn Clock>,
    sweep_limit: i64,
    pub(crate) listener: Option<AbortOnDrop>,
    commits: Arc<AtomicU64>,
    commit_ns: Arc<AtomicU64>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let backend = match self.pool {
            DbPool::Sqlite(_) => "sqlite",
            DbPool::Postgres(_) => "postgres",
        };
        f.debug_struct("Ledger")
            .field("backend", &backend)
            .finish_non_exhaustive()
    }
}

/// How a store tells other processes about its commits, besides `NOTIFY` on PostgreSQL.
pub(crate) struct Announce {
    /// SQLite: the database's wake sockets.
    #[cfg(unix)]
    pub(crate) wake: Option<crate::support::wake::Announcer>,
}
