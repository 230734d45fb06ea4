//! The writer lane's own SQLite connection: every statement of a batch is a function call on
//! the lane's thread, where a driver with a thread of its own answers each statement with a
//! hand-off and a wake-up of the waiting task (docs/benchmarks.md, "A writer that owns its
//! connection"). Reads outside the writer keep sqlx's pool.
//!
//! Guarantees. A commit lands only if every write changed exactly the rows it expected and
//! every commit check holds; otherwise the transaction is rolled back and nothing of the batch
//! lands. A transaction that ended under its batch fails the batch's later statements and its
//! commit. A connection whose transaction could not be ended is never reused ([`LiteTx::idle`]),
//! and closing the connection rolls it back.
//! Errors carry SQLite's extended code, so a unique violation reads as one (the chain's
//! collision retry depends on it).

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rusqlite::types::{Null, Value, ValueRef};
use rusqlite::{CachedStatement, Connection, OpenFlags, Statement};
use sqlx::error::{DatabaseError, ErrorKind};

use crate::sql::write::{CommitCheck, CountedWrite, SqlValue};

/// Statements a connection keeps prepared: a batch's kinds of writes at their padded sizes,
/// the jobs' reads and the transactional tools' statements (LEDGER-70).
const PREPARED: usize = 256;

/// Where and how the writer opens its connection.
#[derive(Debug, Clone)]
pub(crate) struct LiteDb {
    pub(crate) path: PathBuf,
    /// `FULL` (durable, every commit fsynced) or `NORMAL` (benchmarks only).
    pub(crate) synchronous: &'static str,
}

impl LiteDb {
    /// Opens a write connection with the store's settings (see `crate::sqlite`); its write
    /// transactions begin with `BEGIN IMMEDIATE`, so reading the chain head and appending to
    /// it cannot interleave with another process.
    pub(crate) fn begin_write(&self) -> Result<LiteTx, sqlx::Error> {
        self.connect().map_err(into_sqlx)
    }

    fn connect(&self) -> rusqlite::Result<LiteTx> {
        // URI names as sqlx opens them (migrations, reads), so both drivers open one file.
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI;
        let conn = Connection::open_with_flags(&self.path, flags)?;
        // Another process (a second replica, a CLI) may hold the write lock briefly.
        conn.busy_timeout(Duration::from_secs(10))?;
        // A batch's statement journal stays in memory instead of spilling to a temporary file.
        conn.execute_batch(&format!(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = {}; PRAGMA foreign_keys = ON; \
             PRAGMA temp_store = MEMORY;",
            self.synchronous
        ))?;
        conn.set_prepared_statement_cache_capacity(PREPARED);
        Ok(LiteTx { conn, begun: false })
    }
}

/// The writer's connection and the transaction open on it, if any. `BEGIN IMMEDIATE` is sent
/// before the batch's first statement, so a batch that has nothing to write never takes the
/// lock.
#[derive(Debug)]
pub(crate) struct LiteTx {
    conn: Connection,
    /// This batch sent its `BEGIN IMMEDIATE` and has not committed or rolled back. SQLite can
    /// end a transaction by itself (a full disk, a `ROLLBACK` in a tool's SQL): a batch that
    /// began must still find it open, or its later statements would commit on their own.
    begun: bool,
}

impl LiteTx {
    /// No transaction is open, by SQLite's own answer, and none was begun that has not been
    /// ended here: the connection can carry the lane's next batch.
    pub(crate) fn idle(&self) -> bool {
        !self.begun && self.conn.is_autocommit()
    }

    fn begin(&mut self) -> rusqlite::Result<()> {
        if !self.begun {
            self.conn.execute_batch("BEGIN IMMEDIATE")?;
            self.begun = true;
        }
        self.still_open()
    }

    /// The batch's transaction has not ended under it.
    fn still_open(&self) -> rusqlite::Result<()> {
        if self.conn.is_autocommit() {
            let ended = rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ABORT);
            let why = "the write transaction ended before its commit; nothing after it was kept";
            return Err(rusqlite::Error::SqliteFailure(ended, Some(why.to_owned())));
        }
        Ok(())
    }

    /// Runs one statement; returns the rows it changed (0 for one that changed none, a read or
    /// a schema change, whatever the connection wrote before it).
    pub(crate) fn execute(&mut self, sql: &str, binds: &[SqlValue]) -> Result<u64, sqlx::Error> {
        self.run(sql, binds).map_err(into_sqlx)
    }

    /// `sql`, prepared (or taken from the connection's cache) with `binds` bound, inside the
    /// batch's transaction.
    fn prepared(&mut self, sql: &str, binds: &[SqlValue]) -> rusqlite::Result<CachedStatement<'_>> {
        self.begin()?;
        let mut statement = self.conn.prepare_cached(sql)?;
        bind(&mut statement, binds)?;
        Ok(statement)
    }

    fn run(&mut self, sql: &str, binds: &[SqlValue]) -> rusqlite::Result<u64> {
        let before = self.conn.total_changes();
        let mut statement = self.prepared(sql, binds)?;
        let mut rows = statement.raw_query();
        while rows.next()?.is_some() {}
        drop(rows);
        drop(statement);
        // `changes()` is the last write's count, which may be an earlier statement's.
        Ok(if self.conn.total_changes() == before {
            0
        } else {
            self.conn.changes()
        })
    }

    /// The rows a query returns, read by column name.
    pub(crate) fn fetch_all(
        &mut self,
        sql: &str,
        binds: &[SqlValue],
    ) -> Result<Vec<LiteRow>, sqlx::Error> {
        self.query(sql, binds, usize::MAX).map_err(into_sqlx)
    }

    /// The first row a query returns, if any.
    pub(crate) fn fetch_optional(
        &mut self,
        sql: &str,
        binds: &[SqlValue],
    ) -> Result<Option<LiteRow>, sqlx::Error> {
        let rows = self.query(sql, binds, 1).map_err(into_sqlx)?;
        Ok(rows.into_iter().next())
    }

    fn query(
        &mut self,
        sql: &str,
        binds: &[SqlValue],
        most: usize,
    ) -> rusqlite::Result<Vec<LiteRow>> {
        let mut statement = self.prepared(sql, binds)?;
        let columns: Arc<[String]> = statement
            .column_names()
            .into_iter()
            .map(str::to_owned)
            .collect();
        let mut rows = statement.raw_query();
        let mut out = Vec::new();
        while out.len() < most
            && let Some(row) = rows.next()?
        {
            let values = (0..columns.len())
                .map(|i| owned(row.get_ref(i)?))
                .collect::<rusqlite::Result<_>>()?;
            out.push(LiteRow {
                columns: Arc::clone(&columns),
                values,
            });
        }
        Ok(out)
    }

    /// Runs `writes` in order; `false` at the first that changed fewer rows than it expected
    /// (the writes before it stay in the open transaction, for the caller to roll back).
    pub(crate) fn execute_counted(&mut self, writes: &[CountedWrite]) -> Result<bool, sqlx::Error> {
        for write in writes {
            if self.execute(&write.sql, &write.binds)? != write.rows {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Runs `writes` and commits, the commit also requiring every check; `false` if a write was
    /// short or a check false, and then nothing is committed.
    pub(crate) fn commit_writes(
        &mut self,
        writes: &[CountedWrite],
        checks: Vec<CommitCheck>,
    ) -> Result<bool, sqlx::Error> {
        if writes.is_empty() && checks.is_empty() && !self.begun {
            return Ok(true);
        }
        let landed = self
            .execute_counted(writes)
            .and_then(|full| Ok(full && self.checks_hold(checks)?));
        let committed = match landed {
            Ok(true) => self
                .still_open()
                .and_then(|()| self.conn.execute_batch("COMMIT"))
                .map(|()| self.begun = false)
                .map_err(into_sqlx),
            Ok(false) => {
                self.rollback();
                return Ok(false);
            }
            Err(e) => Err(e),
        };
        committed.map(|()| true).inspect_err(|_| self.rollback())
    }

    /// The checks, all at once; true when there are none.
    fn checks_hold(&mut self, checks: Vec<CommitCheck>) -> Result<bool, sqlx::Error> {
        if checks.is_empty() {
            return Ok(true);
        }
        let mut sql = String::from("SELECT 1 WHERE 1");
        let mut binds = Vec::new();
        for check in checks {
            sql.push_str(&format!(" AND ({})", check.sql));
            binds.extend(check.binds);
        }
        Ok(self.fetch_optional(&sql, &binds)?.is_some())
    }

    /// Ends the transaction if one is open. If the `ROLLBACK` fails (the connection is gone),
    /// [`LiteTx::idle`] stays false and the lane drops the connection, which rolls it back.
    pub(crate) fn rollback(&mut self) {
        if !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        self.begun = false;
    }
}

/// Binds `binds` to the statement's parameters: `$n` (and `?n`) by their number, as the
/// ledger's statements and a transactional tool's use them, and anonymous `?` in order.
fn bind(statement: &mut Statement<'_>, binds: &[SqlValue]) -> rusqlite::Result<()> {
    for index in 1..=statement.parameter_count() {
        let number = match statement.parameter_name(index) {
            None => index,
            Some(name) => name
                .get(1..)
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| rusqlite::Error::InvalidParameterName(name.to_owned()))?,
        };
        let value = number
            .checked_sub(1)
            .and_then(|i| binds.get(i))
            .ok_or(rusqlite::Error::InvalidParameterCount(number, binds.len()))?;
        match value {
            SqlValue::Null | SqlValue::NullInt => statement.raw_bind_parameter(index, Null),
            SqlValue::Int(v) => statement.raw_bind_parameter(index, v),
            SqlValue::Text(s) => statement.raw_bind_parameter(index, s.as_str()),
        }?;
    }
    Ok(())
}

fn owned(value: ValueRef<'_>) -> rusqlite::Result<Value> {
    Ok(match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Integer(i),
        ValueRef::Real(r) => Value::Real(r),
        ValueRef::Text(_) => Value::Text(value.as_str()?.to_owned()),
        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
    })
}

/// A row read on the writer's connection: its values, and its statement's column names.
#[derive(Debug)]
pub(crate) struct LiteRow {
    columns: Arc<[String]>,
    values: Vec<Value>,
}

impl LiteRow {
    /// The text in `col`, `None` for NULL.
    pub(crate) fn text(&self, col: &str) -> Result<Option<String>, sqlx::Error> {
        match self.value(col)? {
            Value::Null => Ok(None),
            Value::Text(s) => Ok(Some(s.clone())),
            other => Err(mismatch(col, "text", other)),
        }
    }

    /// The integer in `col`, `None` for NULL.
    pub(crate) fn int(&self, col: &str) -> Result<Option<i64>, sqlx::Error> {
        match self.value(col)? {
            Value::Null => Ok(None),
            Value::Integer(i) => Ok(Some(*i)),
            other => Err(mismatch(col, "integer", other)),
        }
    }

    /// The integer in the first column, `None` for NULL.
    pub(crate) fn first_int(&self) -> Result<Option<i64>, sqlx::Error> {
        match self.columns.first() {
            Some(col) => self.int(col),
            None => Err(sqlx::Error::ColumnIndexOutOfBounds { index: 0, len: 0 }),
        }
    }

    fn value(&self, col: &str) -> Result<&Value, sqlx::Error> {
        self.columns
            .iter()
            .position(|c| c == col)
            .and_then(|i| self.values.get(i))
            .ok_or_else(|| sqlx::Error::ColumnNotFound(col.to_owned()))
    }
}

fn mismatch(col: &str, wanted: &str, found: &Value) -> sqlx::Error {
    sqlx::Error::ColumnDecode {
        index: col.to_owned(),
        source: format!("expected {wanted}, found {:?}", found.data_type()).into(),
    }
}

/// An error SQLite returned, as the rest of the ledger reads database errors (sqlx's).
#[derive(Debug)]
struct LiteError {
    /// SQLite's extended result code (`SQLITE_CONSTRAINT_UNIQUE` is 2067).
    code: i32,
    message: String,
}

impl std::fmt::Display for LiteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "(code: {}) {}", self.code, self.message)
    }
}

impl std::error::Error for LiteError {}

impl DatabaseError for LiteError {
    fn message(&self) -> &str {
        &self.message
    }

    fn code(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Owned(self.code.to_string()))
    }

    fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
        self
    }

    fn kind(&self) -> ErrorKind {
        use rusqlite::ffi;
        match self.code {
            ffi::SQLITE_CONSTRAINT_UNIQUE | ffi::SQLITE_CONSTRAINT_PRIMARYKEY => {
                ErrorKind::UniqueViolation
            }
            ffi::SQLITE_CONSTRAINT_FOREIGNKEY => ErrorKind::ForeignKeyViolation,
            ffi::SQLITE_CONSTRAINT_NOTNULL => ErrorKind::NotNullViolation,
            ffi::SQLITE_CONSTRAINT_CHECK => ErrorKind::CheckViolation,
            _ => ErrorKind::Other,
        }
    }
}

/// SQLite's refusals become database errors (their code and message kept); anything else the
/// driver reports (a value it could not bind or read) is a protocol error.
fn into_sqlx(e: rusqlite::Error) -> sqlx::Error {
    match e {
        rusqlite::Error::SqliteFailure(failure, message) => {
            sqlx::Error::Database(Box::new(LiteError {
                code: failure.extended_code,
                message: message.unwrap_or_else(|| failure.to_string()),
            }))
        }
        other => sqlx::Error::Protocol(other.to_string()),
    }
}

/// A writer's connection settings for a fresh database file in a temporary directory (kept
/// while the directory lives).
#[cfg(test)]
pub(crate) fn scratch() -> (tempfile::TempDir, LiteDb) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = LiteDb {
        path: dir.path().join("ledger.db"),
        synchronous: "FULL",
    };
    (dir, db)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch database and the writer's connection, inside a transaction that created `t`.
    fn with_table() -> (tempfile::TempDir, LiteTx) {
        let (dir, db) = scratch();
        let mut tx = db.begin_write().unwrap();
        tx.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)", &[])
            .unwrap();
        (dir, tx)
    }

    /// A transaction SQLite ended under the batch (here a `ROLLBACK` in a statement's place)
    /// is an error for every later statement and for the commit, never a silent new
    /// transaction nor a commit reported for writes that were rolled back.
    #[test]
    fn a_transaction_ended_mid_batch_fails_the_batch() {
        let (_dir, mut tx) = with_table();
        assert!(tx.commit_writes(&[], Vec::new()).unwrap());
        tx.execute("INSERT INTO t VALUES (1)", &[]).unwrap();
        tx.execute("ROLLBACK", &[]).unwrap();
        assert!(!tx.idle(), "begun and not ended here");
        assert!(tx.execute("INSERT INTO t VALUES (2)", &[]).is_err());
        assert!(tx.commit_writes(&[], Vec::new()).is_err());
        assert!(tx.idle(), "the failed commit ended the batch");
        let n = tx
            .fetch_optional("SELECT count(*) AS n FROM t", &[])
            .unwrap();
        assert_eq!(n.unwrap().int("n").unwrap(), Some(0));
    }

    /// A statement that changed nothing reports 0, a schema change too, whatever the
    /// connection's last write changed (AGENT-33).
    #[test]
    fn a_schema_change_counts_no_rows() {
        let (_dir, mut tx) = with_table();
        assert_eq!(tx.execute("INSERT INTO t VALUES (1), (2)", &[]).unwrap(), 2);
        assert_eq!(tx.execute("CREATE INDEX t_id ON t (id)", &[]).unwrap(), 0);
        assert_eq!(tx.execute("SAVEPOINT s", &[]).unwrap(), 0);
        assert_eq!(tx.execute("RELEASE s", &[]).unwrap(), 0);
    }

    /// LEDGER-89: the workspace's build configuration, which also builds SQLite, asks for
    /// `fdatasync`.
    #[test]
    fn sqlite_is_built_to_sync_with_fdatasync() {
        let flags = option_env!("LIBSQLITE3_FLAGS").unwrap_or_default();
        assert!(flags.contains("-DHAVE_FDATASYNC=1"), "{flags:?}");
    }
}
