//! One thin layer over the two sqlx backends, so the state machine is written once.
//!
//! Every statement the ledger runs uses `$n` placeholders and only two column types, text and
//! 64-bit integers (see the migrations), which both SQLite and PostgreSQL accept unchanged. The
//! enums here only dispatch; they hold no logic.

use sqlx::postgres::{PgPool, PgRow};
use sqlx::sqlite::{SqlitePool, SqliteRow};
use sqlx::{AssertSqlSafe, Row, SqlSafeStr};

use crate::sql::pg_statement::{
    Finish, as_ctes, bind_columns, fits_one_statement, lone_write, lone_write_then, pg_groups,
    pg_row_source,
};
use crate::sql::pg_tx::PgTx;
pub(crate) use crate::sql::sqlite_tx::SqliteTx;
use crate::sql::sqlite_tx::{ROWS_KEPT, guarded, is_short_write};
pub use crate::sql::write::SqlValue;
use crate::sql::write::bound;
pub(crate) use crate::sql::write::{CommitCheck, CountedWrite};

impl CountedWrite {
    /// A write of the rows in `binds` (`width` values each), every one of which it must
    /// affect; `sql` gets the statement's row source (see [`DbTx::row_source`]).
    pub(crate) fn rows(
        tx: &DbTx,
        width: usize,
        mut binds: Vec<SqlValue>,
        sees_earlier: bool,
        sql: impl FnOnce(&str) -> String,
    ) -> Self {
        let rows = binds.len() / width.max(1);
        if let DbTx::Sqlite(_) = tx {
            pad_rows(&mut binds, width);
        }
        Self {
            sql: sql(&tx.row_source(&binds, width)),
            binds,
            width,
            rows: u64::try_from(rows).unwrap_or(u64::MAX),
            sees_earlier,
        }
    }
}

/// SQLite (LEDGER-70): pads `binds` with all-NULL rows up to the next power of two, which
/// the row source filters out (see [`DbTx::row_source`]). A batch's writes run as one statement
/// list whose text sqlx caches per connection; with exact row counts nearly every batch under
/// load had a text of its own and was parsed and planned again, where powers of two leave a
/// few texts per kind, each prepared once.
fn pad_rows(binds: &mut Vec<SqlValue>, width: usize) {
    let rows = binds.len() / width.max(1);
    let padded = rows.next_power_of_two();
    binds.resize(padded * width, SqlValue::Null);
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
    Sqlite(SqliteTx),
    Postgres(PgTx),
}

/// A fetched row of either backend, read by column name.
pub(crate) enum DbRow {
    Sqlite(SqliteRow),
    Postgres(PgRow),
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
    /// SQLite: `BEGIN IMMEDIATE` (sent with the first statement) takes the database write lock
    /// before anything is read, so reading the chain head and appending to it cannot
    /// interleave with another process (a deferred `BEGIN` would fail with SQLITE_BUSY when
    /// upgrading). PostgreSQL: a transaction-scoped advisory
    /// lock per (schema, lane) serializes the lane across processes; other lanes proceed.
    pub(crate) async fn begin_write(&self, lane: i64) -> Result<DbTx, sqlx::Error> {
        match self {
            Self::Sqlite(p) => Ok(DbTx::Sqlite(SqliteTx {
                conn: p.acquire().await?,
                begin: "BEGIN IMMEDIATE",
                open: false,
            })),
            Self::Postgres(p) => {
                // BEGIN and the lock in one simple-query message: one round trip, not two,
                // and sent only if the batch reads (LEDGER-53). `lane` is an integer we own,
                // so formatting it into the SQL is safe.
                let sql = format!(
                    "BEGIN; SELECT pg_advisory_xact_lock(hashtext(current_schema()), {lane}::int)"
                );
                Ok(DbTx::Postgres(PgTx::new(p.acquire().await?, sql)))
            }
        }
    }

    /// Opens a read-only transaction: every read in it sees one snapshot, so a reader that
    /// checks rows against each other (the audit) never sees half of a concurrent commit.
    pub(crate) async fn begin_read(&self) -> Result<DbTx, sqlx::Error> {
        match self {
            Self::Sqlite(p) => Ok(DbTx::Sqlite(SqliteTx {
                conn: p.acquire().await?,
                begin: "BEGIN",
                open: false,
            })),
            Self::Postgres(p) => Ok(DbTx::Postgres(PgTx::new(
                p.acquire().await?,
                "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY".to_owned(),
            ))),
        }
    }
}

impl DbTx {
    /// `rows` parenthesized tuples of `width` placeholders each, for parameters that appear in
    /// the statement in bind order. SQLite gets anonymous `?`: sqlx finds the index of a `$n`
    /// through `sqlite3_bind_parameter_name`, a linear scan per parameter, which made the
    /// hundreds of binds of a batch's multi-row statements cost more than running them.
    /// PostgreSQL gets `$1, $2, …`.
    pub(crate) fn tuples(&self, rows: usize, width: usize) -> String {
        let mut sql = String::with_capacity(rows * width * 5);
        for r in 0..rows {
            sql.push_str(if r == 0 { "(" } else { ", (" });
            for k in 1..=width {
                if k > 1 {
                    sql.push_str(", ");
                }
                match self {
                    Self::Sqlite(_) => sql.push('?'),
                    Self::Postgres(_) => {
                        sql.push('$');
                        sql.push_str(&(r * width + k).to_string());
                    }
                }
            }
            sql.push(')');
        }
        sql
    }

    /// The rows of `binds` (`width` values each) as a statement's row source, with columns
    /// named `column1, column2, …` where a name is needed. SQLite: `VALUES (?, …), …` of which
    /// the rows whose first value is NULL (the padding of `CountedWrite::rows`) are dropped; no
    /// real row has a NULL first column (an id, a lane). The `WHERE` also keeps SQLite from
    /// reading an `ON CONFLICT` after the row source as a join constraint.
    /// PostgreSQL: one array per column through `unnest` (LEDGER-52), so the statement's text
    /// is the same however many rows it carries: each connection prepares it once, where a
    /// `VALUES` list made a new statement for every batch size (a parse, a plan and an extra
    /// round trip per batch once sqlx's statement cache overflowed, which more concurrent
    /// callers made ever more likely). A column's type is its first row's value's.
    pub(crate) fn row_source(&self, binds: &[SqlValue], width: usize) -> String {
        match self {
            Self::Sqlite(_) => format!(
                "SELECT * FROM (VALUES {}) {ROWS_KEPT}",
                self.tuples(binds.len() / width.max(1), width)
            ),
            Self::Postgres(_) => pg_row_source(binds, width),
        }
    }
}

impl DbTx {
    /// Runs `writes` in order; `false` if any affected fewer rows than it expected (none can
    /// affect more: each is an insert that skips conflicts or an update keyed by primary key,
    /// so a sum of counts is short exactly when one of them is).
    ///
    /// One round trip where the backend allows, the bulk of a batch's time: on SQLite one
    /// multi-statement execute (sqlx binds `?` across the statements in order), each statement
    /// checked by its guard (see [`crate::sql::sqlite_tx::SQLITE_GUARD_TABLE`]) — one hand-off to sqlx's SQLite
    /// thread instead of one per statement. PostgreSQL
    /// cannot prepare several statements as one, so there the writes become data-modifying
    /// CTEs of one statement, which all see the snapshot from before it; a write that must see
    /// an earlier one's rows starts a new statement.
    pub(crate) async fn execute_counted(
        &mut self,
        writes: Vec<CountedWrite>,
    ) -> Result<bool, sqlx::Error> {
        if writes.is_empty() {
            return Ok(true);
        }
        let groups: Vec<Vec<CountedWrite>> = match self {
            Self::Sqlite(_) => vec![writes],
            Self::Postgres(_) => pg_groups(writes),
        };
        for group in groups {
            let expected: u64 = group.iter().map(|w| w.rows).sum();
            let done = match self {
                Self::Sqlite(tx) => {
                    let (sql, binds) = guarded(group, Vec::new());
                    let sql = tx.statement(AssertSqlSafe(sql));
                    match bound!(sqlx::query(sql), &binds)
                        .execute(&mut *tx.conn)
                        .await
                    {
                        Ok(_) => expected,
                        Err(e) if is_short_write(&e) => return Ok(false),
                        Err(e) => return Err(e),
                    }
                }
                Self::Postgres(tx) => {
                    let (sql, columns) = as_ctes(group, Finish::Count)?;
                    let q = bind_columns(sqlx::query(AssertSqlSafe(sql)), columns);
                    let n: Option<i64> = q.fetch_one(tx.conn().await?).await?.try_get("n")?;
                    n.map_or(0, |n| u64::try_from(n).unwrap_or(0))
                }
            };
            if done != expected {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Runs `writes` as [`DbTx::execute_counted`] does, then `query` (at most one row, of a
    /// table the writes do not touch: on PostgreSQL it reads the snapshot from before them).
    /// On PostgreSQL writes that fit one statement and the query are that one statement, so
    /// one round trip (AGENT-55). `false` (and no row) if a write was short.
    ///
    /// `last`: these are the job's last writes. If its batch is that one job and nothing was
    /// sent yet, on PostgreSQL the statement is sent alone, its own transaction (AGENT-62).
    pub(crate) async fn execute_counted_then(
        &mut self,
        writes: Vec<CountedWrite>,
        query: &str,
        binds: &[SqlValue],
        last: bool,
    ) -> Result<(bool, Option<DbRow>), sqlx::Error> {
        if let Self::Postgres(tx) = self
            && last
            && fits_one_statement(&writes)
            && let Some(conn) = tx.last_alone()
        {
            let (stored, row) = lone_write_then(conn, writes, query, binds).await?;
            return Ok((stored, row.map(DbRow::Postgres)));
        }
        let tx = match self {
            Self::Postgres(tx) if fits_one_statement(&writes) => tx,
            _ => {
                if !self.execute_counted(writes).await? {
                    return Ok((false, None));
                }
                let row = self
                    .fetch_optional(AssertSqlSafe(query.to_owned()), binds)
                    .await?;
                return Ok((true, row));
            }
        };
        let expected: u64 = writes.iter().map(|w| w.rows).sum();
        let (sql, columns) = as_ctes(writes, Finish::Then(query))?;
        let q = bind_columns(sqlx::query(AssertSqlSafe(sql)), columns);
        let row = bound!(q, binds).fetch_one(tx.conn().await?).await?;
        let n: Option<i64> = row.try_get("n")?;
        if n.map_or(0, |n| u64::try_from(n).unwrap_or(0)) != expected {
            return Ok((false, None));
        }
        let found: Option<bool> = row.try_get("found_")?;
        Ok((true, found.map(|_| DbRow::Postgres(row))))
    }

    pub(crate) async fn execute(
        &mut self,
        sql: impl SqlSafeStr,
        binds: &[SqlValue],
    ) -> Result<u64, sqlx::Error> {
        Ok(match self {
            Self::Sqlite(tx) => {
                // AGENT-33: a `BEGIN` riding on this statement would add the connection's
                // previous `changes()` (whatever its last write, in an earlier transaction,
                // changed) to this statement's count, and a compare-and-swap that matched
                // nothing could read as done. A counted statement never carries the `BEGIN`.
                tx.open_alone().await?;
                bound!(sqlx::query(tx.statement(sql)), binds)
                    .execute(&mut *tx.conn)
                    .await?
                    .rows_affected()
            }
            Self::Postgres(tx) => bound!(sqlx::query(sql), binds)
                .execute(tx.conn().await?)
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
            Self::Sqlite(tx) => bound!(sqlx::query(tx.statement(sql)), binds)
                .fetch_optional(&mut *tx.conn)
                .await?
                .map(DbRow::Sqlite),
            Self::Postgres(tx) => bound!(sqlx::query(sql), binds)
                .fetch_optional(tx.conn().await?)
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
            Self::Sqlite(tx) => bound!(sqlx::query(tx.statement(sql)), binds)
                .fetch_all(&mut *tx.conn)
                .await?
                .into_iter()
                .map(DbRow::Sqlite)
                .collect(),
            Self::Postgres(tx) => bound!(sqlx::query(sql), binds)
                .fetch_all(tx.conn().await?)
                .await?
                .into_iter()
                .map(DbRow::Postgres)
                .collect(),
        })
    }

    /// Runs `writes` as [`DbTx::execute_counted`] does and commits, the commit also requiring
    /// `checks` (SQLite; a batch on PostgreSQL never makes any, see `budget_memo`); `false` if
    /// one was short or a check false, and then the transaction is rolled back. On SQLite the
    /// writes and the `COMMIT` are one hand-off.
    pub(crate) async fn commit_writes(
        &mut self,
        writes: Vec<CountedWrite>,
        checks: Vec<CommitCheck>,
    ) -> Result<bool, sqlx::Error> {
        match self {
            Self::Sqlite(tx) => return tx.commit_writes(writes, checks).await,
            Self::Postgres(tx) => {
                // A batch on PostgreSQL reads every limit under its lock and makes no checks
                // (`budget_memo`); one made here would be lost.
                debug_assert!(checks.is_empty(), "commit checks on PostgreSQL");
                // LEDGER-53: a batch that read nothing commits as its one statement.
                if fits_one_statement(&writes)
                    && let Some(conn) = tx.unopened()
                {
                    return lone_write(conn, writes).await;
                }
            }
        }
        let outcome = self.execute_counted(writes).await;
        match (outcome, self) {
            (Ok(true), Self::Postgres(tx)) => tx.commit().await.map(|()| true),
            (outcome, tx) => {
                let _ = tx.rollback().await;
                outcome.map(|_| false)
            }
        }
    }

    /// No transaction is open (committed or rolled back): the connection can carry the
    /// lane's next batch (see the writer's kept transaction).
    pub(crate) fn idle(&self) -> bool {
        match self {
            Self::Sqlite(tx) => !tx.open,
            Self::Postgres(tx) => tx.idle(),
        }
    }

    /// Readies an idle transaction for the lane's next batch, on the same connection.
    pub(crate) fn next_batch(&mut self) {
        if let Self::Postgres(tx) = self {
            tx.next_batch();
        }
    }

    /// Marks the transaction as a batch of one job (AGENT-62; PostgreSQL only: SQLite's writes
    /// and `COMMIT` are one hand-off already).
    pub(crate) fn set_sole(&mut self, sole: bool) {
        if let Self::Postgres(tx) = self {
            tx.set_sole(sole);
        }
    }

    pub(crate) async fn rollback(&mut self) -> Result<(), sqlx::Error> {
        match self {
            Self::Sqlite(tx) => {
                tx.rollback().await;
                Ok(())
            }
            Self::Postgres(tx) => tx.rollback().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::sqlite_tx::SQLITE_GUARD_TABLE;

    async fn sqlite_pool_with(table: &str) -> DbPool {
        let pool = sqlx::sqlite::SqlitePoolOptions::new()
            .max_connections(1)
            .connect("sqlite::memory:")
            .await
            .unwrap();
        for sql in [SQLITE_GUARD_TABLE, table] {
            sqlx::query(AssertSqlSafe(sql))
                .execute(&pool)
                .await
                .unwrap();
        }
        DbPool::Sqlite(pool)
    }

    /// `sql`'s one integer, read through `pool`.
    async fn count(pool: &DbPool, sql: &'static str) -> i64 {
        let DbPool::Sqlite(p) = pool else {
            unreachable!()
        };
        sqlx::query_scalar(sql).fetch_one(p).await.unwrap()
    }

    fn insert(tx: &DbTx, rows: i64) -> CountedWrite {
        let binds = (0..rows).flat_map(|i| [i.into(), format!("v{i}").into()]);
        CountedWrite::rows(tx, 2, binds.collect(), false, |rows| {
            format!("INSERT INTO t (id, v) {rows} ON CONFLICT (id) DO NOTHING")
        })
    }

    /// LEDGER-70: row counts within one power of two share a statement text (so a connection
    /// prepares it once), the padding writes nothing, and the guard still counts real rows.
    #[tokio::test]
    async fn sqlite_row_counts_share_a_padded_statement_text() {
        let pool = sqlite_pool_with("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)").await;
        let mut tx = pool.begin_write(0).await.unwrap();
        let texts: Vec<String> = (1..=9).map(|n| insert(&tx, n).sql).collect();
        assert_eq!(texts[2], texts[3], "3 and 4 rows");
        assert_eq!(texts[4], texts[7], "5 and 8 rows");
        assert_ne!(texts[7], texts[8], "8 and 9 rows");
        let write = insert(&tx, 3);
        assert_eq!(
            (write.rows, write.binds.len()),
            (3, 8),
            "3 real rows, 4 bound"
        );
        assert!(tx.commit_writes(vec![write], Vec::new()).await.unwrap());
        drop(tx);
        let n = count(&pool, "SELECT count(*) FROM t WHERE v IS NOT NULL").await;
        let all = count(&pool, "SELECT count(*) FROM t").await;
        assert_eq!((n, all), (3, 3));
        // The same rows again conflict: the guard finds the write short and nothing commits.
        let mut tx = pool.begin_write(0).await.unwrap();
        let again = insert(&tx, 4);
        assert!(!tx.commit_writes(vec![again], Vec::new()).await.unwrap());
    }

    /// LEDGER-70: a batch's writes are checked without a statement each — a short write
    /// anywhere in the batch, first or last, still keeps the whole commit from landing, and
    /// only the last write is followed by a guard.
    #[tokio::test]
    async fn a_short_write_anywhere_in_a_sqlite_batch_fails_it_with_one_guard() {
        let pool = sqlite_pool_with("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)").await;
        let tx = pool.begin_write(0).await.unwrap();
        let (sql, _) = guarded(
            vec![insert(&tx, 1), insert(&tx, 2), insert(&tx, 3)],
            Vec::new(),
        );
        assert_eq!(sql.matches("airlock_guard").count(), 1, "{sql}");
        assert_eq!(
            sql.matches(";\n").count(),
            4,
            "three writes and a guard: {sql}"
        );
        drop(tx);
        let rows_from = |tx: &DbTx, first: i64, n: i64| {
            let binds = (first..first + n).flat_map(|i| [i.into(), format!("v{i}").into()]);
            CountedWrite::rows(tx, 2, binds.collect(), false, |rows| {
                format!("INSERT INTO t (id, v) {rows} ON CONFLICT (id) DO NOTHING")
            })
        };
        let mut tx = pool.begin_write(0).await.unwrap();
        assert!(
            tx.commit_writes(vec![rows_from(&tx, 0, 2)], Vec::new())
                .await
                .unwrap()
        );
        // Rows 0 and 1 exist: a write of them again is short, wherever it stands.
        for short_at in 0..3 {
            let writes = (0..3)
                .map(|i| match i == short_at {
                    true => rows_from(&tx, 0, 2),
                    false => rows_from(&tx, 10 * (i + 1) + 10 * short_at, 3),
                })
                .collect();
            assert!(
                !tx.commit_writes(writes, Vec::new()).await.unwrap(),
                "short at {short_at}"
            );
        }
        let all = tx.commit_writes(
            vec![rows_from(&tx, 100, 1), rows_from(&tx, 200, 2)],
            Vec::new(),
        );
        assert!(all.await.unwrap(), "no write short: the batch lands");
        drop(tx);
        let n = count(&pool, "SELECT count(*) FROM t").await;
        assert_eq!(
            n, 5,
            "the first two rows and the last batch's three, nothing of the short ones"
        );
    }

    /// LEDGER-74: a commit's checks hold it back when false, after writes or with none.
    #[tokio::test]
    async fn a_false_check_keeps_a_sqlite_commit_from_landing() {
        let pool = sqlite_pool_with("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)").await;
        let check = |ok: i64| CommitCheck {
            sql: "? = 1".to_owned(),
            binds: vec![SqlValue::Int(ok)],
        };
        for (writes, ok, landed) in [(1, 0, false), (0, 0, false), (1, 1, true), (0, 1, true)] {
            let mut tx = pool.begin_write(0).await.unwrap();
            let write = (writes > 0).then(|| insert(&tx, 1));
            let committed = tx
                .commit_writes(write.into_iter().collect(), vec![check(ok)])
                .await
                .unwrap();
            assert_eq!(committed, landed, "{writes} writes, check {ok}");
        }
        let n = count(&pool, "SELECT count(*) FROM t").await;
        assert_eq!(n, 1, "only the write whose check held landed");
    }

    /// AGENT-33: on SQLite the first statement of a write transaction carries its `BEGIN
    /// IMMEDIATE` with it; the affected-row count it reports must still be its own, because
    /// `Batch::save`'s compare-and-swap reads a count of 0 as "another writer got there first".
    #[tokio::test]
    async fn a_first_statements_count_is_its_own_on_sqlite() {
        let pool = sqlx::sqlite::SqlitePoolOptions::new()
            .max_connections(1)
            .connect("sqlite::memory:")
            .await
            .unwrap();
        sqlx::query("CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER)")
            .execute(&pool)
            .await
            .unwrap();
        sqlx::query("INSERT INTO t VALUES (1, 0), (2, 0)")
            .execute(&pool)
            .await
            .unwrap();
        let pool = DbPool::Sqlite(pool);
        let counts = [
            ("UPDATE t SET v = 1 WHERE id = 1", 1),
            ("UPDATE t SET v = 1", 2),
            ("UPDATE t SET v = 1 WHERE id = 3", 0),
        ];
        for (sql, expected) in counts {
            let mut tx = pool.begin_write(0).await.unwrap();
            let n = tx.execute(AssertSqlSafe(sql), &[]).await.unwrap();
            assert_eq!(n, expected, "{sql}");
            let later = tx.execute(AssertSqlSafe(sql), &[]).await.unwrap();
            assert_eq!(later, expected, "{sql} (not first)");
            tx.rollback().await.unwrap();
        }
    }
}
