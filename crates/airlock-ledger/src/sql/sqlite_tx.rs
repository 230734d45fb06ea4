//! A SQLite read transaction on sqlx's read pool: one snapshot for every read in it, its
//! `BEGIN` riding on its first statement. (Writes go through the writer's own connection,
//! `lite_tx`.)
//!
//! Guarantees. Every read of one transaction sees the database as of its first read (WAL keeps
//! that snapshot to the transaction's end), so a reader that checks rows against each other
//! (the audit) never sees half of a concurrent commit. A transaction left open (a panic
//! mid-read, a failed `ROLLBACK`) never goes back to the pool: its connection is closed.

use sqlx::pool::PoolConnection;
use sqlx::{AssertSqlSafe, SqlSafeStr, SqlStr, Sqlite};

/// A SQLite read transaction whose `BEGIN` rides on its first statement: every statement is a
/// hand-off to sqlx's SQLite thread, so the `BEGIN` costs none of its own.
#[derive(Debug)]
pub(crate) struct SqliteTx {
    pub(super) conn: PoolConnection<Sqlite>,
    /// `BEGIN` was sent and `ROLLBACK` has not ended it.
    pub(super) open: bool,
}

impl Drop for SqliteTx {
    /// A transaction left open must not go back to the pool: the connection is closed instead.
    fn drop(&mut self) {
        if self.open {
            self.conn.close_on_drop();
        }
    }
}

impl SqliteTx {
    pub(super) fn new(conn: PoolConnection<Sqlite>) -> Self {
        Self { conn, open: false }
    }

    /// `sql`, behind the `BEGIN` if it is the transaction's first statement.
    pub(super) fn statement(&mut self, sql: impl SqlSafeStr) -> SqlStr {
        let sql = sql.into_sql_str();
        if self.open {
            return sql;
        }
        self.open = true;
        AssertSqlSafe(format!("BEGIN;\n{}", sql.as_str())).into_sql_str()
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
