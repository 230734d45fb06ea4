//! [`StoreConfig`]: the settings both backends share, with the defaults a serving process
//! starts from. The clock is a setting so tests can inject one instead of sleeping.

use std::sync::Arc;
use std::time::Duration;

use crate::support::notice::OutboxRoute;
use crate::vocabulary::clock::{Clock, SystemClock};

/// Settings shared by both backends.
#[derive(Clone)]
pub struct StoreConfig {
    /// How long a parked row waits for a person (default 7 days; a call may override it).
    pub approval_ttl: Duration,
    /// Writer lanes (PostgreSQL only; SQLite always has one). Default 2: fewer lanes make
    /// bigger batches (fewer commits, fewer fsyncs); on the benchmark machine 2 lanes beat 4
    /// and 8 at 16 callers (see the ledger README).
    pub lanes: usize,
    /// Most rows one sweep changes per kind (default 500).
    pub sweep_limit: i64,
    /// The clock (default: the system clock).
    pub clock: Arc<dyn Clock>,
    /// SQLite: hear other processes' commits on a wake socket beside the database file
    /// (default off). The serving process turns it on; a CLI process that only decides or
    /// reads does not need it. PostgreSQL always listens (`LISTEN` takes nothing from others);
    /// there this marks a process that serves on, whose writes are acknowledged at their
    /// commit rather than once other processes were told (OPS-57: a process that may exit at
    /// once keeps it off, OPS-43).
    pub listen: bool,
    /// The outbox's destinations and their events (LEDGER-30; default none: no outbox rows,
    /// and the write path costs what it did without). Every process that writes to a ledger
    /// whose server notifies should be given the same routes, so a decision taken by the CLI
    /// is told too.
    pub outbox: Vec<OutboxRoute>,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            approval_ttl: Duration::from_secs(7 * 24 * 3600),
            lanes: 2,
            sweep_limit: 500,
            clock: Arc::new(SystemClock),
            listen: false,
            outbox: Vec::new(),
        }
    }
}

impl std::fmt::Debug for StoreConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreConfig")
            .field("approval_ttl", &self.approval_ttl)
            .field("lanes", &self.lanes)
            .field("sweep_limit", &self.sweep_limit)
            .field("listen", &self.listen)
            .field("outbox", &self.outbox)
            .finish_non_exhaustive()
    }
}
