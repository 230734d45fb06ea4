//! A SQLite transaction whose `BEGIN` rides on its first statement and whose `COMMIT` on its
//! last write, each write checked by a guard (see [`SQLITE_GUARD_TABLE`]).
//!
//! Guarantees. A commit lands only if every write changed exactly the rows it expected and
//! every commit check holds; otherwise nothing of the batch lands. A transaction left open (a
//! panic mid-batch, a failed `ROLLBACK`) never goes back to the pool: its connection is
//! closed, which rolls it back.

use sqlx::pool::PoolConnection;
use sqlx::{AssertSqlSafe, SqlSafeStr, SqlStr, Sqlite};

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

pub(super) fn is_short_write(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.message().contains("airlock_short_write"))
}

/// SQLite: the statements one after another, each followed by its guard, their binds in order;
/// the last guard also requires every check. Each statement of the one hand-off still sends
/// its result back from sqlx's thread (a wake-up), so a check adds a clause, not a statement.
pub(super) fn guarded(
    writes: Vec<CountedWrite>,
    mut checks: Vec<CommitCheck>,
) -> (String, Vec<SqlValue>) {
    let mut sql = String::new();
    let mut binds = Vec::new();
    let last = writes.len().saturating_sub(1);
    let mut add_checks = |sql: &mut String, binds: &mut Vec<SqlValue>| {
        for check in std::mem::take(&mut checks) {
            sql.push_str(&format!(" AND ({})", check.sql));
            binds.extend(check.binds);
        }
    };
    if writes.is_empty() {
        // Nothing to follow: the checks stand alone.
        sql.push_str("INSERT OR REPLACE INTO temp.airlock_guard (ok) VALUES (1");
        add_checks(&mut sql, &mut binds);
        sql.push_str(");\n");
    }
    for (i, w) in writes.into_iter().enumerate() {
        sql.push_str(&w.sql);
        binds.extend(w.binds);
        // `rows` is a count we computed, not input: formatting it into the SQL is safe.
        sql.push_str(&format!(
            ";\nINSERT OR REPLACE INTO temp.airlock_guard (ok) VALUES (changes() = {}",
            w.rows
        ));
        if i == last {
            add_checks(&mut sql, &mut binds);
        }
        sql.push_str(");\n");
    }
    (sql, binds)
}
