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

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions, PgSslMode};

use crate::ledger::{AbortOnDrop, Announce, Ledger};
use crate::sql::db::{DbPool, WriteDb};
use crate::store_config::StoreConfig;
use crate::support::wakeups::Wakeups;
use crate::vocabulary::error::LedgerError;

/// The migrations, run at open. A database holding versions this build does not know (a newer
/// release migrated it) is opened, not refused (OPS-86): migrations only add, so an older
/// replica keeps working beside a newer one during a rolling upgrade, and may restart then.
/// A known version whose text changed is still refused (sqlx compares checksums).
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate::Migrator {
    ignore_missing: true,
    ..sqlx::migrate!("./migrations/postgres")
};

/// How the writer lanes' connections plan (LEDGER-91). A lane runs the same few statements
/// batch after batch, each finding its rows by key, so each is planned once per connection (a
/// generic plan) instead of at every execution: at one client that was a quarter of a
/// millisecond of planning per commit. A generic plan is made without the values, for a table
/// size that grows, so sequential scans and hash or merge joins, which only win on a small
/// table, are priced out: a batch's update joins its rows to the table by its primary key,
/// whatever the table's size when the plan was made.
const LANE_PLANNING: [(&str, &str); 4] = [
    ("plan_cache_mode", "force_generic_plan"),
    ("enable_seqscan", "off"),
    ("enable_hashjoin", "off"),
    ("enable_mergejoin", "off"),
];

/// A pool of at most `max` connections, `min` of them opened now rather than on first use, with
/// no liveness ping per acquire (a round trip per batch or read): a dead connection fails its
/// statement, and a batch is retried.
fn pool_options(max: usize, min: usize) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(u32::try_from(max).unwrap_or(16))
        .min_connections(u32::try_from(min).unwrap_or(4))
        .test_before_acquire(false)
        .acquire_timeout(Duration::from_secs(30))
}

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
        // arrays they carry, each finds its rows by key. That holds for reads; the lanes'
        // connections are a pool of their own whose generic plans cannot scan (LEDGER-91).
        let reads = options
            .clone()
            .options([("plan_cache_mode", "force_custom_plan")]);
        // One for LISTEN, the rest for reads.
        let pool = pool_options(6, 2).connect_with(reads).await?;
        MIGRATOR.run(&pool).await?;
        // One per writer lane, kept by it; two more for the announcer's NOTIFYs, since sqlx
        // pings a connection given back before another may take it.
        let writes = pool_options(lanes + 2, lanes)
            .connect_with(options.options(LANE_PLANNING))
            .await?;
        let mut listener = PgListener::connect_with(&pool).await?;
        listener.listen(CHANNEL).await?;
        let mut ledger = Self::start(
            WriteDb::Postgres(writes),
            DbPool::Postgres(pool),
            &config,
            lanes,
            Announce {
                #[cfg(unix)]
                wake: None,
            },
        );
        let task = tokio::spawn(listen(listener, ledger.wakeups()));
        ledger.listener = Some(AbortOnDrop(task));
        Ok(ledger)
    }

    /// Connects to a `postgres://` URL.
    ///
    /// A URL to this machine's own server that does not choose `sslmode` connects without TLS
    /// (OPS-65); any other URL connects as it says (`sslmode=prefer` when it says nothing).
    pub async fn connect_url(url: &str, config: StoreConfig) -> Result<Self, LedgerError> {
        let options = url.parse()?;
        let sslmode_chosen = chooses_sslmode(url) || std::env::var_os("PGSSLMODE").is_some();
        Self::connect(plain_on_loopback(options, sslmode_chosen), config).await
    }
}

/// Whether `url`'s query names an `sslmode` (sqlx also reads `ssl-mode`).
fn chooses_sslmode(url: &str) -> bool {
    url.split_once('?').is_some_and(|(_, query)| {
        query
            .split('&')
            .any(|pair| matches!(pair.split('=').next(), Some("sslmode" | "ssl-mode")))
    })
}

/// OPS-65: TLS to a server on this machine protects nothing a loopback connection exposes,
/// and `prefer`, the default, negotiates it whenever the server offers it; measured, it cost a
/// third of an agent run's step and half its throughput. So a connection to a loopback host
/// whose mode nobody chose is plain; a chosen mode is always kept.
fn plain_on_loopback(options: PgConnectOptions, sslmode_chosen: bool) -> PgConnectOptions {
    let host = options.get_host();
    let loopback = host == "localhost"
        || host.starts_with('/')
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if loopback && !sslmode_chosen {
        options.ssl_mode(PgSslMode::Disable)
    } else {
        options
    }
}

/// Feeds notifications from every process into this process's wakeups.
async fn listen(mut listener: PgListener, wakeups: Arc<Wakeups>) {
    loop {
        match listener.try_recv().await {
            Ok(Some(n)) => wakeups.hear(n.payload()),
            // The connection dropped and will be re-established: anything sent meanwhile was
            // missed, so wake every waiter to re-read its row.
            Ok(None) => wakeups.notify_all(),
            Err(e) => {
                tracing::warn!(error = %e, "ledger LISTEN connection failed; retrying");
                wakeups.notify_all();
                // Back off before reconnecting (not polling rows: waiters are already woken).
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(url: &str) -> PgSslMode {
        let options: PgConnectOptions = url.parse().unwrap();
        plain_on_loopback(options, chooses_sslmode(url)).get_ssl_mode()
    }

    /// OPS-65: plain on loopback unless the URL chooses; a remote host keeps `prefer`.
    #[test]
    fn a_loopback_server_is_reached_without_tls_unless_the_url_chooses() {
        for url in [
            "postgres://a@127.0.0.1:5432/db",
            "postgres://a@localhost/db",
            "postgres://a@[::1]:5432/db",
            "postgres://a@127.0.0.2/db?application_name=x",
        ] {
            assert!(matches!(mode(url), PgSslMode::Disable), "{url}");
        }
        assert!(matches!(
            mode("postgres://a@db.example.com/db"),
            PgSslMode::Prefer
        ));
        assert!(matches!(
            mode("postgres://a@10.0.0.5/db"),
            PgSslMode::Prefer
        ));
        let chosen = "postgres://a@127.0.0.1/db?sslmode=require";
        assert!(matches!(mode(chosen), PgSslMode::Require));
        let chosen = "postgres://a@127.0.0.1/db?application_name=x&ssl-mode=prefer";
        assert!(matches!(mode(chosen), PgSslMode::Prefer));
    }
}
