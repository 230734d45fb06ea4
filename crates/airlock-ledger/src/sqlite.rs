//! The embedded backend: one SQLite file in WAL mode, created and migrated on first open.
//!
//! Durability: `journal_mode = WAL` with `synchronous = FULL`. In WAL mode FULL fsyncs the log
//! on every commit, so a committed write survives power loss; NORMAL would only fsync at
//! checkpoints and could lose the last commits — for an at-most-once call that could mean
//! losing the `running` mark of a call that then ran. Throughput comes from group commit
//! instead (one writer lane batches concurrent writes into one transaction and one fsync).
//!
//! Writes go through the writer lane's own connection, on the lane's thread (`lite_tx`); reads
//! use a separate pool of read connections, which WAL lets run beside the writer.
//!
//! [`backup`] copies a live ledger into a new file, consistent as of one instant, while the
//! writer keeps committing (docs/rules.md OPS-74).
//!
//! [`Ledger::open_relaxed`] is the one exception, for benchmarks only: `synchronous =
//! NORMAL`, to measure the ledger's CPU cost without the fsync. It is never durable and is not
//! reachable from a deployment's configuration.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::Connection as _;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous,
};

use crate::ledger::{AbortOnDrop, Announce, Ledger};
use crate::sql::db::{DbPool, WriteDb};
use crate::sql::lite_tx::LiteDb;
use crate::store_config::StoreConfig;
#[cfg(unix)]
use crate::support::wake::{self, Announcer, Bound};
use crate::vocabulary::error::LedgerError;

/// The migrations, run at open. A database holding versions this build does not know (a newer
/// release migrated it) is opened, not refused (OPS-86): migrations only add, so an older
/// replica keeps working beside a newer one during a rolling upgrade, and may restart then.
/// A known version whose text changed is still refused (sqlx compares checksums).
pub(crate) static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate::Migrator {
    ignore_missing: true,
    ..sqlx::migrate!("./migrations/sqlite")
};

/// The ledger in a SQLite file: a [`Ledger`] made by [`Ledger::open`].
pub type SqliteStore = Ledger;

fn options(path: &Path, synchronous: SqliteSynchronous) -> SqliteConnectOptions {
    SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(synchronous)
        .foreign_keys(true)
        // Another process (a second replica, a CLI) may hold the write lock briefly.
        .busy_timeout(Duration::from_secs(10))
}

/// The SQLite constructors.
impl Ledger {
    /// Opens (creating and migrating if needed) the ledger at `path`.
    pub async fn open(path: impl AsRef<Path>, config: StoreConfig) -> Result<Self, LedgerError> {
        Self::open_with(path.as_ref(), config, SqliteSynchronous::Full).await
    }

    /// For benchmarks only; never durable. [`Ledger::open`] with `synchronous = NORMAL`:
    /// commits skip the fsync (WAL syncs only at checkpoints), so a power loss can lose the last
    /// commits — an at-most-once call's `running` mark among them. It exists to measure the
    /// ledger's CPU cost apart from the disk; no deployment setting leads here.
    pub async fn open_relaxed(
        path: impl AsRef<Path>,
        config: StoreConfig,
    ) -> Result<Self, LedgerError> {
        Self::open_with(path.as_ref(), config, SqliteSynchronous::Normal).await
    }

    async fn open_with(
        path: &Path,
        config: StoreConfig,
        synchronous: SqliteSynchronous,
    ) -> Result<Self, LedgerError> {
        let opts = options(path, synchronous);
        let mut migrating = SqliteConnection::connect_with(&opts).await?;
        MIGRATOR.run(&mut migrating).await?;
        migrating.close().await?;
        let write = LiteDb {
            path: path.to_owned(),
            synchronous: match synchronous {
                SqliteSynchronous::Normal => "NORMAL",
                _ => "FULL",
            },
        };
        // Connections are opened here, not on the first read (which would wait for one).
        let read = SqlitePoolOptions::new()
            .max_connections(4)
            .min_connections(2)
            .test_before_acquire(false)
            .connect_with(opts.read_only(true))
            .await?;
        #[cfg(unix)]
        let bound = config.listen.then(|| listen_beside(path)).flatten();
        let announce = Announce {
            #[cfg(unix)]
            wake: Some(Announcer::new(
                path,
                bound.as_ref().map(|b| b.path().to_owned()),
            )),
        };
        #[cfg_attr(not(unix), allow(unused_mut))]
        let mut ledger = Self::start(
            WriteDb::Sqlite(write),
            DbPool::Sqlite(read),
            &config,
            1,
            announce,
        );
        #[cfg(unix)]
        if let Some(bound) = bound {
            let task = tokio::spawn(wake::listen(bound, ledger.wakeups()));
            ledger.listener = Some(AbortOnDrop(task));
        }
        Ok(ledger)
    }

    /// Opens a ledger from a `sqlite://path` URL (or a bare path).
    pub async fn open_url(url: &str, config: StoreConfig) -> Result<Self, LedgerError> {
        let path = url.strip_prefix("sqlite://").unwrap_or(url);
        let opts = SqliteConnectOptions::from_str(&format!("sqlite://{path}"))?;
        Self::open(opts.get_filename(), config).await
    }
}

/// Writes a consistent copy of the SQLite ledger at `source` into `dest`, which must not exist
/// or be empty; `source` is never written (docs/rules.md OPS-74).
///
/// `VACUUM INTO` reads the whole database inside one read transaction, so the copy is the
/// ledger as of that transaction's start — every committed batch before it, none after — while
/// WAL lets the writer go on committing beside it. (SQLite's online backup API copies page by
/// page and starts over whenever another connection writes, so under steady traffic it may
/// never finish; it is also not reachable through sqlx without unsafe code.) The copy is
/// written without a WAL of its own, compacted, and is not synced here: the caller syncs it.
///
/// # Errors
/// `source` is not an SQLite database or cannot be read; `dest` exists and is not empty, or
/// cannot be written.
pub async fn backup(source: &Path, dest: &Path) -> Result<(), LedgerError> {
    let opts = SqliteConnectOptions::new()
        .filename(source)
        .read_only(true)
        .busy_timeout(Duration::from_secs(10));
    let mut connection = SqliteConnection::connect_with(&opts).await?;
    let target = dest
        .to_str()
        .ok_or_else(|| LedgerError::Invalid(format!("{} is not a UTF-8 path", dest.display())))?;
    sqlx::query("VACUUM INTO ?")
        .bind(target)
        .execute(&mut connection)
        .await?;
    connection.close().await?;
    Ok(())
}

/// The store's wake socket, or none: a store that cannot listen still works, its waiters
/// woken by other processes only at their deadlines, so it warns instead of refusing to start.
#[cfg(unix)]
fn listen_beside(database: &Path) -> Option<Bound> {
    wake::bind(database)
        .inspect_err(|error| {
            tracing::warn!(%error, database = %database.display(), "cannot listen for other processes' ledger changes; they reach this process only at waiters' deadlines and the worker's safety-net poll");
        })
        .ok()
}

#[cfg(test)]
mod tests {
    use sqlx::sqlite::SqlitePoolOptions;

    use super::MIGRATOR;
    use crate::sql::row::open_rows;
    use crate::vocabulary::state::InvocationState;

    #[test]
    fn the_open_rows_are_the_states_that_are_not_terminal() {
        let open: Vec<&str> = InvocationState::ALL
            .iter()
            .filter(|s| !s.is_terminal())
            .map(|s| s.as_str())
            .collect();
        let listed = open_rows!()
            .trim_start_matches("state IN (")
            .trim_end_matches(')');
        let listed: Vec<&str> = listed.split(", ").map(|w| w.trim_matches('\'')).collect();
        assert_eq!(listed, open);
    }

    /// On each backend, the newest migration that builds `invocations_open` builds it over
    /// exactly [`open_rows!`]. A new open state needs a new migration (applied migrations are
    /// checksummed and must not change).
    #[test]
    fn both_backends_index_exactly_the_open_rows() {
        for backend in ["sqlite", "postgres"] {
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("migrations")
                .join(backend);
            let mut files: Vec<_> = std::fs::read_dir(dir)
                .unwrap()
                .map(|f| f.unwrap().path())
                .collect();
            files.sort();
            let newest = files
                .iter()
                .rev()
                .map(|f| std::fs::read_to_string(f).unwrap())
                .find(|sql| sql.contains("CREATE INDEX invocations_open"))
                .unwrap();
            assert!(
                newest.contains(concat!("WHERE ", open_rows!(), ";")),
                "{backend}"
            );
        }
    }

    /// A query by state that scanned the table would read every finished call of the ledger.
    #[tokio::test]
    async fn every_query_by_state_or_run_reads_a_partial_index() {
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect("sqlite::memory:")
            .await
            .unwrap();
        MIGRATOR.run(&pool).await.unwrap();
        let queries = [
            (
                crate::transitions::sweep::EXPIRED_LEASES,
                "invocations_open",
            ),
            (crate::transitions::sweep::EXPIRED_WAITS, "invocations_open"),
            (crate::reads::PENDING_APPROVALS, "invocations_waiting"),
            (
                crate::reads::PENDING_APPROVALS_NEWEST,
                "invocations_waiting",
            ),
            (crate::reads::APPROVED_UNCLAIMED, "invocations_open"),
            (crate::reads::IN_DOUBT, "invocations_open"),
            (crate::reads::RUN_INVOCATIONS, "invocations_run_order"),
            (
                crate::transitions::runs::WAITING_IN_RUN,
                "invocations_run_order",
            ),
        ];
        for (where_, index) in queries {
            let sql = format!("EXPLAIN QUERY PLAN SELECT id FROM invocations WHERE {where_}");
            let params = (1..=4)
                .filter(|n| where_.contains(&format!("${n}")))
                .count();
            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
            for _ in 0..params {
                q = q.bind(0_i64);
            }
            let plan: Vec<String> = q
                .fetch_all(&pool)
                .await
                .unwrap()
                .iter()
                .map(|r| sqlx::Row::get::<String, _>(r, "detail"))
                .collect();
            assert!(
                plan.iter().any(|step| step.contains(index)),
                "{where_}: {plan:?}"
            );
            // LEDGER-86: a list in the index's order is read in order, never sorted.
            assert!(
                !(index == "invocations_waiting"
                    && plan.iter().any(|step| step.contains("TEMP B-TREE"))),
                "{where_}: {plan:?}"
            );
        }
    }
}
