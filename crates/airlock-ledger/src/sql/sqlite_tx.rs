//! A SQLite transaction whose `BEGIN` rides on its first statement and whose `COMMIT` on its
//! last write, each write checked by a guard (see [`SQLITE_GUARD_TABLE`]).
//!
//! Guarantees. A commit lands only if every write changed exactly the rows it expected and
//! every commit check holds; otherwise nothing of the batch lands. A transaction left open (a
//! panic mid-batch, a failed `ROLLBACK`) never goes back to the pool: its connection is
//! closed, which rolls it back.

use sqlx::pool::PoolConnection;
use sqlx::{AssertSqlSafe, SqlSafeStr, SqlStr, Sqlite, SqliteConnection};

use crate::sql::write::{CommitCheck, CountedWrite, SqlValue, bound};

/// A SQLite write transaction whose `BEGIN IMMEDIATE` rides on its first statement and whose
/// `COMMIT` on its last: every statement is a hand-off to sqlx's SQLite thread (tens of
/// microseconds when that thread sleeps), so a batch that needs no read costs one hand-off,
/// not three.
#[derive(Debug)]
pub(crate) struct SqliteTx {
    pub(super) conn: PoolConnection<Sqlite>,
    /// How the transaction begins: `BEGIN IMMEDIATE` for a write, `BEGIN` for a read (in WAL
    /// mode its snapshot is taken at its first read and kept to its end).
    pub(super) begin: &'static str,
    /// `BEGIN` was sent and neither `COMMIT` nor `ROLLBACK` has ended it.
    pub(super) open: bool,
}

impl Drop for SqliteTx {
    /// A transaction left open (a panic mid-batch) must not go back to the pool: the
    /// connection is closed instead, which rolls it back.
    fn drop(&mut self) {
        if self.open {
            self.conn.close_on_drop();
        }
    }
}

impl SqliteTx {
    /// `sql`, behind the `BEGIN IMMEDIATE` if it is the transaction's first statement.
    pub(super) fn statement(&mut self, sql: impl SqlSafeStr) -> SqlStr {
        let sql = sql.into_sql_str();
        if self.open {
            return sql;
        }
        self.open = true;
        AssertSqlSafe(format!("{};\n{}", self.begin, sql.as_str())).into_sql_str()
    }

    /// Sends the `BEGIN` on its own if nothing opened the transaction yet.
    pub(super) async fn open_alone(&mut self) -> Result<(), sqlx::Error> {
        if !self.open {
            sqlx::query(AssertSqlSafe(self.begin))
                .execute(&mut *self.conn)
                .await?;
            self.open = true;
        }
        Ok(())
    }

    /// Runs `writes` (each followed by its guard) and commits, in one hand-off; `false` if a
    /// guard found a write short, and then nothing is committed.
    pub(super) async fn commit_writes(
        &mut self,
        writes: Vec<CountedWrite>,
        checks: Vec<CommitCheck>,
    ) -> Result<bool, sqlx::Error> {
        if writes.is_empty() && checks.is_empty() && !self.open {
            return Ok(true);
        }
        let (mut sql, binds) = guarded(writes, checks);
        sql.push_str("COMMIT");
        let sql = self.statement(AssertSqlSafe(sql));
        match bound!(sqlx::query(sql), &binds)
            .execute(&mut *self.conn)
            .await
        {
            Ok(_) => {
                self.open = false;
                Ok(true)
            }
            Err(e) => {
                self.rollback().await;
                if is_short_write(&e) {
                    Ok(false)
                } else {
                    Err(e)
                }
            }
        }
    }

    /// Ends the transaction if it is open. A failed `ROLLBACK` (the connection is gone) leaves
    /// `open` set, so the connection is closed rather than reused.
    pub(super) async fn rollback(&mut self) {
        if self.open
            && sqlx::query("ROLLBACK")
                .execute(&mut *self.conn)
                .await
                .is_ok()
        {
            self.open = false;
        }
    }
}

/// SQLite has no `RAISE` outside triggers, so a write that changed fewer rows than it must is
/// caught by a `CHECK` on a one-row temporary table: each guard stores whether the statement
/// before it changed exactly its rows, and `false` fails the constraint, which stops the
/// statement list before its `COMMIT`. Temporary: never in the WAL, never fsynced. Created on
/// every write connection (see the store's `after_connect`).
pub(crate) const SQLITE_GUARD_TABLE: &str = "CREATE TEMP TABLE IF NOT EXISTS airlock_guard \
     (ok INTEGER PRIMARY KEY CONSTRAINT airlock_short_write CHECK (ok = 1))";

/// Creates the guard table on a new write connection (the write pool's `after_connect`).
pub(crate) async fn create_guard_table(conn: &mut SqliteConnection) -> Result<(), sqlx::Error> {
    sqlx::query(SQLITE_GUARD_TABLE)
        .execute(conn)
        .await
        .map(|_| ())
}

pub(super) fn is_short_write(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.message().contains("airlock_short_write"))
}

/// The filter of a SQLite row source (see `DbTx::row_source`), which drops the padding rows;
/// a write's row source is where the check of the write before it is folded in.
pub(crate) const ROWS_KEPT: &str = "WHERE column1 IS NOT NULL";

/// SQLite: the writes one after another, their binds in order, then one guard that requires
/// the last write's count and every check. Each statement of the one hand-off sends its result
/// back from sqlx's thread, a wake-up of the waiting task, so checks ride on statements that run
/// anyway: a write's count is checked inside the next write's row source (`changes()` there is
/// still the count of the statement before: SQLite sets it when a statement ends, and restores
/// it after each trigger), so a short write makes the next one write nothing, which the check
/// after that finds short in turn, up to the last guard. A write that expects no rows could
/// not carry the chain on, nor could one without a row source: the count before it then gets a
/// guard statement of its own. Counts are bound, not formatted, so the text of a batch depends
/// only on its kinds of writes and their padded sizes (LEDGER-70).
pub(super) fn guarded(
    writes: Vec<CountedWrite>,
    checks: Vec<CommitCheck>,
) -> (String, Vec<SqlValue>) {
    let mut sql = String::new();
    let mut binds = Vec::new();
    // The count of the write before, not yet checked.
    let mut unchecked: Option<u64> = None;
    for w in writes {
        let at = w.sql.find(ROWS_KEPT).filter(|_| w.rows > 0);
        match (unchecked.take(), at) {
            (Some(n), Some(at)) => {
                let end = at + ROWS_KEPT.len();
                sql.push_str(&w.sql[..end]);
                sql.push_str(" AND changes() = ?");
                sql.push_str(&w.sql[end..]);
                binds.extend(w.binds);
                binds.push(count(n));
            }
            (pending, _) => {
                if let Some(n) = pending {
                    guard(&mut sql, &mut binds, Some(n), Vec::new());
                }
                sql.push_str(&w.sql);
                binds.extend(w.binds);
            }
        }
        sql.push_str(";\n");
        unchecked = Some(w.rows);
    }
    guard(&mut sql, &mut binds, unchecked, checks);
    (sql, binds)
}

/// A guard statement: the last statement changed `rows` rows (if given), and every check holds.
fn guard(sql: &mut String, binds: &mut Vec<SqlValue>, rows: Option<u64>, checks: Vec<CommitCheck>) {
    sql.push_str("INSERT OR REPLACE INTO temp.airlock_guard (ok) VALUES (");
    match rows {
        Some(n) => {
            sql.push_str("changes() = ?");
            binds.push(count(n));
        }
        None => sql.push('1'),
    }
    for check in checks {
        sql.push_str(&format!(" AND ({})", check.sql));
        binds.extend(check.binds);
    }
    sql.push_str(");\n");
}

fn count(n: u64) -> SqlValue {
    SqlValue::Int(i64::try_from(n).unwrap_or(i64::MAX))
}
