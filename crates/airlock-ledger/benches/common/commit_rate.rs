//! The machine's single-thread durable commit rate, the baseline the ledger's throughput targets
//! are stated in: one SQLite transaction (a one-row INSERT) per iteration on one connection, in
//! WAL mode with `synchronous = FULL` (one fsync per commit). Shared by the ledger's and the
//! binary crate's bench binaries (`#[path]`), so both measure the same thing.

use std::time::Instant;

use sqlx::ConnectOptions as _;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};

/// Commits per second of 400 sequential one-row transactions in a new file `name` in `dir`.
pub(crate) async fn single_thread_commit_rate(dir: &std::path::Path, name: &str) -> f64 {
    let mut conn = SqliteConnectOptions::new()
        .filename(dir.join(name))
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

/// The baseline measured before, between and after the runs it is compared with: this
/// machine's fsync latency drifts by 2× within minutes, so one reading taken before the runs
/// can belong to another regime than the runs themselves. Each reading is printed; the ratio
/// uses their median.
#[derive(Default)]
pub(crate) struct Baseline(Vec<f64>);

impl Baseline {
    /// Takes one more reading (in a new file in `dir`).
    pub(crate) async fn measure(&mut self, dir: &std::path::Path) {
        let name = format!("baseline-{}.db", self.0.len());
        self.0.push(single_thread_commit_rate(dir, &name).await);
    }

    /// The median reading (the lower middle of an even count), 0 when there is none.
    pub(crate) fn median(&self) -> f64 {
        let mut sorted = self.0.clone();
        sorted.sort_by(f64::total_cmp);
        sorted
            .get(sorted.len().saturating_sub(1) / 2)
            .copied()
            .unwrap_or(0.0)
    }

    /// The readings, rounded, in the order taken.
    pub(crate) fn readings(&self) -> String {
        let all: Vec<String> = self.0.iter().map(|r| format!("{r:.0}")).collect();
        all.join(", ")
    }
}
