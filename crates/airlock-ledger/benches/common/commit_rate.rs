//! The machine's single-thread durable commit rate, the baseline the ledger's throughput targets
//! are stated in: one SQLite transaction (a one-row INSERT) per iteration on one connection, in
//! WAL mode with `synchronous = FULL` (one fsync per commit). Shared by the ledger's and the
//! binary crate's bench binaries (`#[path]`), so both measure the same thing.

use std::time::Instant;

use sqlx::ConnectOptions as _;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};

/// Commits per second of 400 sequential one-row transactions in a new file `baseline.db` in `dir`.
pub(crate) async fn single_thread_commit_rate(dir: &std::path::Path) -> f64 {
    let mut conn = SqliteConnectOptions::new()
        .filename(dir.join("baseline.db"))
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .connect()
        .await
        .unwrap();
    sqlx::query("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
        .execute(&mut conn)
        .await
        .unwrap();
    let n = 400;
    let start = Instant::now();
    for i in 0..n {
        sqlx::query("INSERT INTO t (v) VALUES ($1)")
            .bind(format!("row {i}"))
            .execute(&mut conn)
            .await
            .unwrap();
    }
    f64::from(n) / start.elapsed().as_secs_f64()
}
