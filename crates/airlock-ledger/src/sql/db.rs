//! One thin layer over the two backends, so the state machine is written once: sqlx's pools
//! for reads and PostgreSQL's writes, the writer's own connection for SQLite's (`lite_tx`).
//!
//! Every statement the ledger runs uses `$n` placeholders and only two column types, text and
//! 64-bit integers (see the migrations), which both SQLite and PostgreSQL accept unchanged. The
//! enums here only dispatch; they hold no logic.

use sqlx::postgres::{PgPool, PgRow};
use sqlx::sqlite::{SqlitePool, SqliteRow};
use sqlx::{AssertSqlSafe, Row, SqlSafeStr};

use crate::sql::lite_tx::{LiteDb, LiteRow, LiteTx};
use crate::sql::pg_statement::{
    Finish, as_ctes, bind_columns, fits_one_statement, lone_write, lone_write_then, pg_groups,
    pg_row_source,
};
use crate::sql::pg_tx::PgTx;
use crate::sql::sqlite_tx::SqliteTx;
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
/// the row source filters out (see [`DbTx::row_source`]). The writer's connection keeps its
/// statements prepared by text; with exact row counts nearly every batch under load had a text
/// of its own and was parsed and planned again, where powers of two leave a few texts per
/// kind, each prepared once.
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

/// Where the writer lanes write: the SQLite file they each open a connection to, or the
/// PostgreSQL pool.
#[derive(Debug, Clone)]
pub(crate) enum WriteDb {
    Sqlite(LiteDb),
    Postgres(PgPool),
}

/// An open transaction: the writer's on SQLite, a read snapshot on SQLite, or PostgreSQL's.
#[derive(Debug)]
pub(crate) enum DbTx {
    Sqlite(LiteTx),
    SqliteRead(SqliteTx),
    Postgres(PgTx),
}

/// A fetched row of either backend, read by column name.
pub(crate) enum DbRow {
    /// Read on the writer's SQLite connection.
    Lite(LiteRow),
    Sqlite(SqliteRow),
    Postgres(PgRow),
}

impl DbRow {
    pub(crate) fn text(&self, col: &str) -> Result<Option<String>, sqlx::Error> {
        match self {
            Self::Lite(r) => r.text(col),
            Self::Sqlite(r) => r.try_get(col),
            Self::Postgres(r) => r.try_get(col),
        }
    }

    pub(crate) fn int(&self, col: &str) -> Result<Option<i64>, sqlx::Error> {
        match self {
            Self::Lite(r) => r.int(col),
            Self::Sqlite(r) => r.try_get(col),
            Self::Postgres(r) => r.try_get(col),
        }
    }

    /// The integer in the first column.
    pub(crate) fn first_int(&self) -> Result<Option<i64>, sqlx::Error> {
        match self {
            Self::Lite(r) => r.first_int(),
            Self::Sqlite(r) => r.try_get(0),
            Self::Postgres(r) => r.try_get(0),
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

    /// Opens a read-only transaction: every read in it sees one snapshot, so a reader that
    /// checks rows against each other (the audit) never sees half of a concurrent commit.
    pub(crate) async fn begin_read(&self) -> Result<DbTx, sqlx::Error> {
        match self {
            Self::Sqlite(p) => Ok(DbTx::SqliteRead(SqliteTx::new(p.acquire().await?))),
            Self::Postgres(p) => Ok(DbTx::Postgres(PgTx::new(
                p.acquire().await?,
                "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY".to_owned(),
            ))),
        }
    }
}

impl WriteDb {
    /// Opens a write transaction that owns `lane` of the audit chain.
    ///
    /// SQLite: a connection of the lane's own, whose `BEGIN IMMEDIATE` takes the database
    /// write lock before anything is read, so reading the chain head and appending to it
    /// cannot interleave with another process (a deferred `BEGIN` would fail with SQLITE_BUSY
    /// when upgrading). PostgreSQL: a transaction-scoped advisory lock per (schema, lane)
    /// serializes the lane across processes; other lanes proceed.
    pub(crate) async fn begin_write(&self, lane: i64) -> Result<DbTx, sqlx::Error> {
        match self {
            Self::Sqlite(db) => Ok(DbTx::Sqlite(db.begin_write()?)),
            Self::Postgres(p) => {
                // BEGIN and the lock in one simple-query message: one round trip, not two,
                // and sent only if the batch reads (LEDGER-53).
                let sql = format!("BEGIN; SELECT {}", pg_lane_lock(lane));
                Ok(DbTx::Postgres(PgTx::new(p.acquire().await?, sql)))
            }
        }
    }
}

/// PostgreSQL's lock on `lane` of the audit chain, held until the transaction ends: whoever
/// appends to the lane holds it, a batch from its `BEGIN` and a lone write from its events'
/// insert (LEDGER-53). `lane` is an integer we own, so formatting it into the SQL is safe.
fn pg_lane_lock(lane: i64) -> String {
    format!("pg_advisory_xact_lock(hashtext(current_schema()), {lane}::int)")
}

/// What a read transaction refuses: SQLite's writes go through the writer's connection.
fn read_only() -> sqlx::Error {
    sqlx::Error::Protocol("a read transaction does not write".to_owned())
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
                    Self::Sqlite(_) | Self::SqliteRead(_) => sql.push('?'),
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

    /// What an insert of `lane`'s audit events appends to its row source so that no event is
    /// inserted before the lane's lock is held (LEDGER-53): on PostgreSQL a one-time filter,
    /// evaluated before the first row; a lock the transaction already holds is taken again at
    /// no cost. SQLite's writer holds the database's write lock from its `BEGIN IMMEDIATE`.
    pub(crate) fn lane_locked(&self, lane: i64) -> String {
        match self {
            Self::Sqlite(_) | Self::SqliteRead(_) => String::new(),
            Self::Postgres(_) => format!(" WHERE (SELECT {} IS NOT NULL)", pg_lane_lock(lane)),
        }
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
            Self::Sqlite(_) | Self::SqliteRead(_) => format!(
                "SELECT * FROM (VALUES {}) WHERE column1 IS NOT NULL",
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
    /// On SQLite each write is a call on the writer's own connection, its count checked as it
    /// returns. PostgreSQL cannot prepare several statements as one, so there the writes become
    /// data-modifying CTEs of one statement (one round trip), which all see the snapshot from
    /// before it; a write that must see an earlier one's rows starts a new statement.
    pub(crate) async fn execute_counted(
        &mut self,
        writes: Vec<CountedWrite>,
    ) -> Result<bool, sqlx::Error> {
        let tx = match self {
            Self::Sqlite(tx) => return tx.execute_counted(&writes),
            Self::SqliteRead(_) => return Err(read_only()),
            Self::Postgres(tx) => tx,
        };
        for group in pg_groups(writes) {
            let expected: u64 = group.iter().map(|w| w.rows).sum();
            let (sql, columns) = as_ctes(group, Finish::Count)?;
            let q = bind_columns(sqlx::query(AssertSqlSafe(sql)), columns);
            let n: Option<i64> = q.fetch_one(tx.conn().await?).await?.try_get("n")?;
            if n.map_or(0, |n| u64::try_from(n).unwrap_or(0)) != expected {
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
        match self {
            Self::Sqlite(tx) => tx.execute(sql.into_sql_str().as_str(), binds),
            Self::SqliteRead(_) => Err(read_only()),
            Self::Postgres(tx) => Ok(bound!(sqlx::query(sql), binds)
                .execute(tx.conn().await?)
                .await?
                .rows_affected()),
        }
    }

    pub(crate) async fn fetch_optional(
        &mut self,
        sql: impl SqlSafeStr,
        binds: &[SqlValue],
    ) -> Result<Option<DbRow>, sqlx::Error> {
        Ok(match self {
            Self::Sqlite(tx) => tx
                .fetch_optional(sql.into_sql_str().as_str(), binds)?
                .map(DbRow::Lite),
            Self::SqliteRead(tx) => bound!(sqlx::query(tx.statement(sql)), binds)
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
            Self::Sqlite(tx) => tx
                .fetch_all(sql.into_sql_str().as_str(), binds)?
                .into_iter()
                .map(DbRow::Lite)
                .collect(),
            Self::SqliteRead(tx) => bound!(sqlx::query(tx.statement(sql)), binds)
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
    /// one was short or a check false, and then the transaction is rolled back.
    pub(crate) async fn commit_writes(
        &mut self,
        writes: Vec<CountedWrite>,
        checks: Vec<CommitCheck>,
    ) -> Result<bool, sqlx::Error> {
        match self {
            Self::Sqlite(tx) => return tx.commit_writes(&writes, checks),
            Self::SqliteRead(_) => return Err(read_only()),
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
            Self::Sqlite(tx) => tx.idle(),
            Self::SqliteRead(tx) => !tx.open,
            Self::Postgres(tx) => tx.idle(),
        }
    }

    /// Readies an idle transaction for the lane's next batch, on the same connection.
    pub(crate) fn next_batch(&mut self) {
        if let Self::Postgres(tx) = self {
            tx.next_batch();
        }
    }

    /// Marks the transaction as a batch of one job (AGENT-62; PostgreSQL only: on SQLite every
    /// statement is a call on the writer's own connection).
    pub(crate) fn set_sole(&mut self, sole: bool) {
        if let Self::Postgres(tx) = self {
            tx.set_sole(sole);
        }
    }

    pub(crate) async fn rollback(&mut self) -> Result<(), sqlx::Error> {
        match self {
            Self::Sqlite(tx) => {
                tx.rollback();
                Ok(())
            }
            Self::SqliteRead(tx) => {
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
    use crate::sql::lite_tx::scratch;

    const TABLE: &str = "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)";

    /// A scratch database holding `table`, and the writer's connection to it.
    async fn writer_with(table: &str) -> (tempfile::TempDir, WriteDb) {
        let (dir, db) = scratch();
        let db = WriteDb::Sqlite(db);
        let mut tx = db.begin_write(0).await.unwrap();
        tx.execute(AssertSqlSafe(table.to_owned()), &[])
            .await
            .unwrap();
        assert!(tx.commit_writes(Vec::new(), Vec::new()).await.unwrap());
        (dir, db)
    }

    /// `sql`'s one integer, read on a connection of `db`'s.
    async fn count(db: &WriteDb, sql: &'static str) -> i64 {
        let mut tx = db.begin_write(0).await.unwrap();
        let row = tx.fetch_optional(sql, &[]).await.unwrap().unwrap();
        tx.rollback().await.unwrap();
        row.first_int().unwrap().unwrap()
    }

    fn insert(tx: &DbTx, first: i64, rows: i64) -> CountedWrite {
        let binds = (first..first + rows).flat_map(|i| [i.into(), format!("v{i}").into()]);
        CountedWrite::rows(tx, 2, binds.collect(), false, |rows| {
            format!("INSERT INTO t (id, v) {rows} ON CONFLICT (id) DO NOTHING")
        })
    }

    /// LEDGER-70: row counts within one power of two share a statement text (so a connection
    /// prepares it once), the padding writes nothing, and the count still checks real rows.
    #[tokio::test]
    async fn sqlite_row_counts_share_a_padded_statement_text() {
        let (_dir, db) = writer_with(TABLE).await;
        let mut tx = db.begin_write(0).await.unwrap();
        let texts: Vec<String> = (1..=9).map(|n| insert(&tx, 0, n).sql).collect();
        assert_eq!(texts[2], texts[3], "3 and 4 rows");
        assert_eq!(texts[4], texts[7], "5 and 8 rows");
        assert_ne!(texts[7], texts[8], "8 and 9 rows");
        let write = insert(&tx, 0, 3);
        assert_eq!(
            (write.rows, write.binds.len()),
            (3, 8),
            "3 real rows, 4 bound"
        );
        assert!(tx.commit_writes(vec![write], Vec::new()).await.unwrap());
        drop(tx);
        let n = count(&db, "SELECT count(*) FROM t WHERE v IS NOT NULL").await;
        let all = count(&db, "SELECT count(*) FROM t").await;
        assert_eq!((n, all), (3, 3));
        // The same rows again conflict: the write is short and nothing commits.
        let mut tx = db.begin_write(0).await.unwrap();
        let again = insert(&tx, 0, 4);
        assert!(!tx.commit_writes(vec![again], Vec::new()).await.unwrap());
        assert!(tx.idle(), "the short batch was rolled back");
    }

    /// A short write anywhere in a SQLite batch, first, in the middle or last, keeps the whole
    /// commit from landing; a batch with none lands whole.
    #[tokio::test]
    async fn a_short_write_anywhere_in_a_sqlite_batch_keeps_it_from_landing() {
        let (_dir, db) = writer_with(TABLE).await;
        let mut tx = db.begin_write(0).await.unwrap();
        assert!(
            tx.commit_writes(vec![insert(&tx, 0, 2)], Vec::new())
                .await
                .unwrap()
        );
        // Rows 0 and 1 exist: a write of them again is short, wherever it stands.
        for short_at in 0..3 {
            let writes = (0..3)
                .map(|i| match i == short_at {
                    true => insert(&tx, 0, 2),
                    false => insert(&tx, 10 * (i + 1) + 10 * short_at, 3),
                })
                .collect();
            assert!(
                !tx.commit_writes(writes, Vec::new()).await.unwrap(),
                "short at {short_at}"
            );
        }
        let all = tx.commit_writes(vec![insert(&tx, 100, 1), insert(&tx, 200, 2)], Vec::new());
        assert!(all.await.unwrap(), "no write short: the batch lands");
        drop(tx);
        let n = count(&db, "SELECT count(*) FROM t").await;
        assert_eq!(
            n, 5,
            "the first two rows and the last batch's three, nothing of the short ones"
        );
    }

    /// LEDGER-74: a commit's checks hold it back when false, after writes or with none.
    #[tokio::test]
    async fn a_false_check_keeps_a_sqlite_commit_from_landing() {
        let (_dir, db) = writer_with(TABLE).await;
        let check = |ok: i64| CommitCheck {
            sql: "? = 1".to_owned(),
            binds: vec![SqlValue::Int(ok)],
        };
        for (writes, ok, landed) in [(1, 0, false), (0, 0, false), (1, 1, true), (0, 1, true)] {
            let mut tx = db.begin_write(0).await.unwrap();
            let write = (writes > 0).then(|| insert(&tx, 0, 1));
            let committed = tx
                .commit_writes(write.into_iter().collect(), vec![check(ok)])
                .await
                .unwrap();
            assert_eq!(committed, landed, "{writes} writes, check {ok}");
        }
        let n = count(&db, "SELECT count(*) FROM t").await;
        assert_eq!(n, 1, "only the write whose check held landed");
    }

    /// AGENT-33: the affected-row count a SQLite statement reports is its own, the first of a
    /// transaction too (it begins the transaction), and a read's is 0 whatever was written
    /// before it: `Batch::save`'s compare-and-swap reads a count of 0 as "another writer got
    /// there first".
    #[tokio::test]
    async fn a_statements_count_is_its_own_on_sqlite() {
        let (_dir, db) = writer_with("CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER)").await;
        let mut tx = db.begin_write(0).await.unwrap();
        tx.execute("INSERT INTO t VALUES (1, 0), (2, 0)", &[])
            .await
            .unwrap();
        assert!(tx.commit_writes(Vec::new(), Vec::new()).await.unwrap());
        let counts = [
            ("UPDATE t SET v = 1 WHERE id = 1", 1),
            ("UPDATE t SET v = 1", 2),
            ("UPDATE t SET v = 1 WHERE id = 3", 0),
        ];
        for (sql, expected) in counts {
            let mut tx = db.begin_write(0).await.unwrap();
            let n = tx.execute(sql, &[]).await.unwrap();
            assert_eq!(n, expected, "{sql}");
            let later = tx.execute(sql, &[]).await.unwrap();
            assert_eq!(later, expected, "{sql} (not first)");
            let read = tx.execute("SELECT v FROM t", &[]).await.unwrap();
            assert_eq!(read, 0, "a read after {sql}");
            tx.rollback().await.unwrap();
        }
    }

    /// The ledger's statements number their parameters (`$1`, …) and may use them out of order
    /// or twice; anonymous `?` bind in order. A missing value is an error, not a NULL.
    #[tokio::test]
    async fn sqlite_parameters_bind_by_their_number() {
        let (_dir, db) = writer_with(TABLE).await;
        let mut tx = db.begin_write(0).await.unwrap();
        let binds = [SqlValue::Int(7), SqlValue::Text("x".into())];
        let row = tx
            .fetch_optional("SELECT $2 AS a, $1 AS b, $2 || $2 AS c", &binds)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(row.text("a").unwrap().as_deref(), Some("x"));
        assert_eq!(row.int("b").unwrap(), Some(7));
        assert_eq!(row.text("c").unwrap().as_deref(), Some("xx"));
        assert!(row.int("a").is_err(), "text is not read as an integer");
        assert!(row.text("d").is_err(), "no such column");
        let row = tx.fetch_optional("SELECT ? AS a, ? AS b", &binds).await;
        assert_eq!(
            row.unwrap().unwrap().text("b").unwrap().as_deref(),
            Some("x")
        );
        assert!(tx.fetch_optional("SELECT $3", &binds).await.is_err());
        let nulls = [SqlValue::Null, SqlValue::NullInt];
        let row = tx.fetch_optional("SELECT $1 AS a, $2 AS b", &nulls).await;
        let row = row.unwrap().unwrap();
        assert_eq!(
            (row.text("a").unwrap(), row.int("b").unwrap()),
            (None, None)
        );
    }

    /// A constraint SQLite reports reads as the ledger's error kinds (the chain's collision
    /// retry waits for a unique violation), and the transaction can still be rolled back.
    #[tokio::test]
    async fn a_sqlite_unique_violation_reads_as_one() {
        let (_dir, db) = writer_with(TABLE).await;
        let mut tx = db.begin_write(0).await.unwrap();
        tx.execute("INSERT INTO t VALUES (1, 'a')", &[])
            .await
            .unwrap();
        let Err(sqlx::Error::Database(e)) = tx.execute("INSERT INTO t VALUES (1, 'b')", &[]).await
        else {
            panic!("a second row 1 went in");
        };
        assert!(e.is_unique_violation(), "{e}");
        assert_eq!(
            e.code().as_deref(),
            Some("1555"),
            "SQLITE_CONSTRAINT_PRIMARYKEY"
        );
        assert!(!tx.idle());
        tx.rollback().await.unwrap();
        assert!(tx.idle());
        assert_eq!(count(&db, "SELECT count(*) FROM t").await, 0);
    }
}
