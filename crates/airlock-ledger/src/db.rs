//! One thin layer over the two sqlx backends, so the state machine is written once.
//!
//! Every statement the ledger runs uses `$n` placeholders and only two column types, text and
//! 64-bit integers (see the migrations), which both SQLite and PostgreSQL accept unchanged. The
//! enums here only dispatch; they hold no logic.

use sqlx::postgres::{PgPool, PgRow};
use sqlx::sqlite::{SqlitePool, SqliteRow};
use sqlx::{AssertSqlSafe, Postgres, Row, SqlSafeStr, Sqlite, Transaction};

/// A value bound to a `$n` placeholder (in the ledger's statements and a transactional tool's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SqlValue {
    /// SQL NULL, typed as text.
    Null,
    /// SQL NULL, typed as an integer (PostgreSQL types every parameter).
    NullInt,
    /// A 64-bit integer.
    Int(i64),
    /// Text.
    Text(String),
}

impl From<i64> for SqlValue {
    fn from(v: i64) -> Self {
        Self::Int(v)
    }
}
impl From<String> for SqlValue {
    fn from(v: String) -> Self {
        Self::Text(v)
    }
}
impl From<&str> for SqlValue {
    fn from(v: &str) -> Self {
        Self::Text(v.to_owned())
    }
}
impl From<Option<i64>> for SqlValue {
    fn from(v: Option<i64>) -> Self {
        v.map_or(Self::NullInt, Self::Int)
    }
}
impl From<Option<String>> for SqlValue {
    fn from(v: Option<String>) -> Self {
        v.map_or(Self::Null, Self::Text)
    }
}

/// A connection pool of either backend.
#[derive(Debug, Clone)]
pub(crate) enum DbPool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// An open transaction of either backend.
#[derive(Debug)]
pub(crate) enum DbTx {
    Sqlite(Transaction<'static, Sqlite>),
    Postgres(Transaction<'static, Postgres>),
}

/// A fetched row of either backend, read by column name.
pub(crate) enum DbRow {
    Sqlite(SqliteRow),
    Postgres(PgRow),
}

macro_rules! bound {
    ($q:expr, $binds:expr) => {{
        let mut q = $q;
        for b in $binds {
            q = match b {
                SqlValue::Null => q.bind(None::<String>),
                SqlValue::NullInt => q.bind(None::<i64>),
                SqlValue::Int(i) => q.bind(*i),
                SqlValue::Text(s) => q.bind(s.clone()),
            };
        }
        q
    }};
}

impl DbRow {
    pub(crate) fn text(&self, col: &str) -> Result<Option<String>, sqlx::Error> {
        match self {
            Self::Sqlite(r) => r.try_get(col),
            Self::Postgres(r) => r.try_get(col),
        }
    }

    pub(crate) fn int(&self, col: &str) -> Result<Option<i64>, sqlx::Error> {
        match self {
            Self::Sqlite(r) => r.try_get(col),
            Self::Postgres(r) => r.try_get(col),
        }
    }

    /// A NOT NULL text column.
    pub(crate) fn req_text(&self, col: &str) -> Result<String, sqlx::Error> {
        self.text(col)?.ok_or_else(|| null_column(col))
    }

    /// A NOT NULL integer column.
    pub(crate) fn req_int(&self, col: &str) -> Result<i64, sqlx::Error> {
        self.int(col)?.ok_or_else(|| null_column(col))
    }
}

fn null_column(col: &str) -> sqlx::Error {
    sqlx::Error::ColumnDecode {
        index: col.to_owned(),
        source: "unexpected NULL".into(),
    }
}

impl DbPool {
    pub(crate) async fn fetch_optional(
        &self,
        sql: impl SqlSafeStr,
        binds: &[SqlValue],
    ) -> Result<Option<DbRow>, sqlx::Error> {
        Ok(match self {
            Self::Sqlite(p) => bound!(sqlx::query(sql), binds)
                .fetch_optional(p)
                .await?
                .map(DbRow::Sqlite),
            Self::Postgres(p) => bound!(sqlx::query(sql), binds)
                .fetch_optional(p)
                .await?
                .map(DbRow::Postgres),
        })
    }

    pub(crate) async fn fetch_all(
        &self,
        sql: impl SqlSafeStr,
        binds: &[SqlValue],
    ) -> Result<Vec<DbRow>, sqlx::Error> {
        Ok(match self {
            Self::Sqlite(p) => bound!(sqlx::query(sql), binds)
                .fetch_all(p)
                .await?
                .into_iter()
                .map(DbRow::Sqlite)
                .collect(),
            Self::Postgres(p) => bound!(sqlx::query(sql), binds)
                .fetch_all(p)
                .await?
                .into_iter()
                .map(DbRow::Postgres)
                .collect(),
        })
    }

    /// Opens a write transaction that owns `lane` of the audit chain.
    ///
    /// SQLite: `BEGIN IMMEDIATE` takes the database write lock up front, so reading the chain
    /// head and appending to it cannot interleave with another process (a deferred `BEGIN`
    /// would fail with SQLITE_BUSY when upgrading). PostgreSQL: a transaction-scoped advisory
    /// lock per (schema, lane) serializes the lane across processes; other lanes proceed.
    pub(crate) async fn begin_write(&self, lane: i64) -> Result<DbTx, sqlx::Error> {
        match self {
            Self::Sqlite(p) => Ok(DbTx::Sqlite(p.begin_with("BEGIN IMMEDIATE").await?)),
            Self::Postgres(p) => {
                // BEGIN and the lock in one simple-query message: one round trip, not two.
                // `lane` is an integer we own, so formatting it into the SQL is safe.
                let sql = format!(
                    "BEGIN; SELECT pg_advisory_xact_lock(hashtext(current_schema()), {lane}::int)"
                );
                Ok(DbTx::Postgres(p.begin_with(AssertSqlSafe(sql)).await?))
            }
        }
    }
}

impl DbTx {
    pub(crate) async fn execute(
        &mut self,
        sql: impl SqlSafeStr,
        binds: &[SqlValue],
    ) -> Result<u64, sqlx::Error> {
        Ok(match self {
            Self::Sqlite(tx) => bound!(sqlx::query(sql), binds)
                .execute(&mut **tx)
                .await?
                .rows_affected(),
            Self::Postgres(tx) => bound!(sqlx::query(sql), binds)
                .execute(&mut **tx)
                .await?
                .rows_affected(),
        })
    }

    pub(crate) async fn fetch_optional(
        &mut self,
        sql: impl SqlSafeStr,
        binds: &[SqlValue],
    ) -> Result<Option<DbRow>, sqlx::Error> {
        Ok(match self {
            Self::Sqlite(tx) => bound!(sqlx::query(sql), binds)
                .fetch_optional(&mut **tx)
                .await?
                .map(DbRow::Sqlite),
            Self::Postgres(tx) => bound!(sqlx::query(sql), binds)
                .fetch_optional(&mut **tx)
                .await?
                .map(DbRow::Postgres),
        })
    }

    pub(crate) async fn fetch_all(
        &mut self,
        sql: impl SqlSafeStr,
        binds: &[SqlValue],
    ) -> Result<Vec<DbRow>, sqlx::Error> {
        Ok(match self {
            Self::Sqlite(tx) => bound!(sqlx::query(sql), binds)
                .fetch_all(&mut **tx)
                .await?
                .into_iter()
                .map(DbRow::Sqlite)
                .collect(),
            Self::Postgres(tx) => bound!(sqlx::query(sql), binds)
                .fetch_all(&mut **tx)
                .await?
                .into_iter()
                .map(DbRow::Postgres)
                .collect(),
        })
    }

    pub(crate) async fn commit(self) -> Result<(), sqlx::Error> {
        match self {
            Self::Sqlite(tx) => tx.commit().await,
            Self::Postgres(tx) => tx.commit().await,
        }
    }

    pub(crate) async fn rollback(self) -> Result<(), sqlx::Error> {
        match self {
            Self::Sqlite(tx) => tx.rollback().await,
            Self::Postgres(tx) => tx.rollback().await,
        }
    }
}
