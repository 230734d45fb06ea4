//! The replicated backend: PostgreSQL through a connection pool, migrated at start.
//!
//! Durability is the server's: run with `synchronous_commit = on` (the default) so a commit is
//! flushed before it is acknowledged. Several writer lanes commit in parallel, and PostgreSQL
//! flushes their commit records together. Waiters are woken across processes by
//! `NOTIFY airlock_ledger` (sent after each write transaction commits, in a short transaction
//! of its own: see `writer::announce`) and a `LISTEN`ing task per store.
//!
//! Migrations are versioned (`migrations/postgres/`) and idempotent: sqlx records applied
//! versions and takes an advisory lock, so replicas starting together apply each once.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};

use crate::db::DbPool;
use crate::error::LedgerError;
use crate::ledger::{AbortOnDrop, Announce, Ledger};
use crate::notify::Notifier;
use crate::store_config::StoreConfig;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// The `LISTEN` channel.
const CHANNEL: &str = "airlock_ledger";

/// The ledger in a PostgreSQL database: a [`Ledger`] made by [`Ledger::connect`].
pub type PgStore = Ledger;

/// The PostgreSQL constructors.
impl Ledger {
    /// Connects with `options` (set `search_path` there to use a schema), migrates, and
    /// starts listening for changes made by other processes.
    pub async fn connect(
        options: PgConnectOptions,
        config: StoreConfig,
    ) -> Result<Self, LedgerError> {
        let lanes = config.lanes.max(1);
        // LEDGER-52: the batch's statements are prepared once per connection whatever their
        // row count, so a cached generic plan would be made for whatever count came first and
        // a table size long gone (a sequential scan where the index is right); planned for the
        // arrays they carry, each finds its rows by key.
        let options = options.options([("plan_cache_mode", "force_custom_plan")]);
        let pool = PgPoolOptions::new()
            // One per writer lane, one for LISTEN, the rest for reads.
            .max_connections(u32::try_from(lanes + 6).unwrap_or(16))
            // Opened now, not on the first write or read; and no liveness ping per acquire
            // (a round trip per batch): a dead connection fails its batch, which is retried.
            .min_connections(u32::try_from(lanes + 2).unwrap_or(6))
            .test_before_acquire(false)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options)
            .await?;
        MIGRATOR.run(&pool).await?;
        let mut listener = PgListener::connect_with(&pool).await?;
        listener.listen(CHANNEL).await?;
        let mut ledger = Self::start(
            DbPool::Postgres(pool.clone()),
            DbPool::Postgres(pool),
            &config,
            lanes,
            Announce {
                #[cfg(unix)]
                wake: None,
            },
        );
        let task = tokio::spawn(listen(listener, ledger.notifier()));
        ledger.listener = Some(AbortOnDrop(task));
        Ok(ledger)
    }

    /// Connects to a `postgres://` URL.
    pub async fn connect_url(url: &str, config: StoreConfig) -> Result<Self, LedgerError> {
        Self::connect(url.parse()?, config).await
    }
}

/// Feeds notifications from every process into this process's notifier.
async fn listen(mut listener: PgListener, notifier: Arc<Notifier>) {
    loop {
        match listener.try_recv().await {
            Ok(Some(n)) => notifier.hear(n.payload()),
            // The connection dropped and will be re-established: anything sent meanwhile was
            // missed, so wake every waiter to re-read its row.
            Ok(None) => notifier.notify_all(),
            Err(e) => {
                tracing::warn!(error = %e, "ledger LISTEN connection failed; retrying");
                notifier.notify_all();
                // Back off before reconnecting (not polling rows: waiters are already woken).
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}
