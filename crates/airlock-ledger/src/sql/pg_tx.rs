//! A PostgreSQL transaction whose `BEGIN` is sent only when a statement needs it (LEDGER-53).
//!
//! Why. A writer batch that reads nothing — every job's rows already in hand, the lane's chain
//! head cached — is a single statement of writes: sent alone it is its own transaction, which
//! commits (durably, `synchronous_commit = on`) when the statement ends. That is one round trip
//! where `BEGIN` with the lane's lock, the statement and `COMMIT` were three. The statement
//! still takes the lane's lock, in its events' insert, which comes before its other writes
//! (`DbTx::lane_locked`, `Batch::take_writes`), so a batch that read the chain's head under the
//! lock appends before anyone else; a lone write on a cached head that another process moved
//! past collides on the chain's primary key and is run again on a head read under the lock.
//!
//! Guarantees. Any statement other than that lone write opens the transaction first (the
//! `BEGIN` message given at creation, with the lane's lock for a write transaction). A lone
//! write whose counts fall short fails inside the statement, so nothing of it commits. A
//! transaction left open (a panic mid-batch, a failed `COMMIT`) never goes back to the pool:
//! its connection is closed, which rolls it back.

use sqlx::pool::PoolConnection;
use sqlx::{AssertSqlSafe, PgConnection, Postgres};

/// See the module documentation.
#[derive(Debug)]
pub(crate) struct PgTx {
    conn: PoolConnection<Postgres>,
    /// The simple-query message that opens the transaction.
    begin: String,
    /// `BEGIN` was sent and neither `COMMIT` nor `ROLLBACK` has ended it.
    open: bool,
    /// The batch is one job, so that job's last write may be sent alone (AGENT-62).
    sole: bool,
    /// A job's last write was sent alone and committed: nothing may follow it.
    spent: bool,
}

impl Drop for PgTx {
    fn drop(&mut self) {
        if self.open {
            self.conn.close_on_drop();
        }
    }
}

impl PgTx {
    pub(crate) fn new(conn: PoolConnection<Postgres>, begin: String) -> Self {
        Self {
            conn,
            begin,
            open: false,
            sole: false,
            spent: false,
        }
    }

    /// Marks the transaction as a batch of one job (see [`PgTx::last_alone`]).
    pub(crate) fn set_sole(&mut self, sole: bool) {
        self.sole = sole;
    }

    /// The connection for a job's last write sent alone, its own transaction (AGENT-62): only
    /// when the batch is that one job and nothing was sent before it. Anything sent after it
    /// fails (see [`PgTx::conn`]), so the job's writes are never split over two transactions.
    pub(crate) fn last_alone(&mut self) -> Option<&mut PgConnection> {
        if !self.sole || self.open || self.spent {
            return None;
        }
        self.spent = true;
        Some(&mut self.conn)
    }

    /// The connection inside the transaction, its `BEGIN` sent first if nothing sent it yet.
    pub(crate) async fn conn(&mut self) -> Result<&mut PgConnection, sqlx::Error> {
        if self.spent {
            return Err(after_last());
        }
        if !self.open {
            sqlx::raw_sql(AssertSqlSafe(self.begin.clone()))
                .execute(&mut *self.conn)
                .await?;
            self.open = true;
        }
        Ok(&mut self.conn)
    }

    /// The connection with no transaction open, for a statement that is its own transaction;
    /// `None` once the transaction was opened.
    pub(crate) fn unopened(&mut self) -> Option<&mut PgConnection> {
        (!self.open && !self.spent).then_some(&mut *self.conn)
    }

    pub(crate) async fn commit(&mut self) -> Result<(), sqlx::Error> {
        self.end("COMMIT").await
    }

    pub(crate) async fn rollback(&mut self) -> Result<(), sqlx::Error> {
        self.end("ROLLBACK").await
    }

    /// No transaction is open: the connection can carry the lane's next batch.
    pub(crate) fn idle(&self) -> bool {
        !self.open
    }

    /// Readies an idle transaction's connection for the lane's next batch.
    pub(crate) fn next_batch(&mut self) {
        self.sole = false;
        self.spent = false;
    }

    async fn end(&mut self, how: &'static str) -> Result<(), sqlx::Error> {
        if self.open {
            sqlx::raw_sql(how).execute(&mut *self.conn).await?;
            self.open = false;
        }
        Ok(())
    }
}

/// A statement after a job's last write was sent alone: a bug in the job, refused rather than
/// committed apart from the writes before it.
fn after_last() -> sqlx::Error {
    sqlx::Error::Protocol("a ledger write followed the job's last write, sent alone".into())
}

#[cfg(test)]
mod tests {
    use sqlx::postgres::{PgPool, PgPoolOptions};

    use crate::sql::db::{CountedWrite, DbTx, SqlValue, WriteDb};

    /// A pool on a fresh schema of the test database; `None` (skipped) without one, except in
    /// CI, where the PostgreSQL half must run.
    async fn pool() -> Option<PgPool> {
        let url = airlock_testkit::postgres_url()?;
        let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
        let admin = PgPool::connect(&url).await.unwrap();
        let create = format!(
            "CREATE SCHEMA {schema}; CREATE TABLE {schema}.t (id bigint PRIMARY KEY, v text)"
        );
        sqlx::raw_sql(sqlx::AssertSqlSafe(create))
            .execute(&admin)
            .await
            .unwrap();
        let options: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
        let options = options.options([("search_path", schema.as_str())]);
        Some(PgPoolOptions::new().connect_with(options).await.unwrap())
    }

    fn insert(tx: &DbTx, ids: &[i64]) -> CountedWrite {
        let binds: Vec<SqlValue> = ids
            .iter()
            .flat_map(|&i| [i.into(), format!("v{i}").into()])
            .collect();
        CountedWrite::rows(tx, 2, binds, false, |rows| {
            format!("INSERT INTO t (id, v) {rows} ON CONFLICT (id) DO NOTHING")
        })
    }

    async fn count(pool: &PgPool) -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM t")
            .fetch_one(pool)
            .await
            .unwrap()
    }

    /// AGENT-62: in a batch of one job, the job's last write with its query is one statement
    /// sent alone — committed before the batch ends, visible to every other connection — and
    /// a statement after it is refused, never committed apart from it.
    #[tokio::test]
    async fn a_sole_jobs_last_write_commits_alone_and_nothing_may_follow() {
        let Some(raw) = pool().await else { return };
        let db = WriteDb::Postgres(raw.clone());
        let mut tx = db.begin_write(0).await.unwrap();
        tx.set_sole(true);
        let write = insert(&tx, &[1, 2]);
        let (stored, row) = tx
            .execute_counted_then(
                vec![write],
                "SELECT v FROM t WHERE id = $1",
                &[1_i64.into()],
                true,
            )
            .await
            .unwrap();
        assert!(stored);
        // The query read the snapshot from before the statement's own writes.
        assert!(row.is_none());
        assert_eq!(
            count(&raw).await,
            2,
            "committed without a COMMIT of the batch"
        );
        let after = insert(&tx, &[3]);
        assert!(tx.execute_counted(vec![after]).await.is_err());
        tx.rollback().await.unwrap();
        assert_eq!(count(&raw).await, 2);
    }

    /// A short write sent alone commits nothing; and with several jobs in the batch the last
    /// write stays inside the batch's transaction.
    #[tokio::test]
    async fn a_short_lone_write_commits_nothing_and_a_shared_batch_keeps_its_transaction() {
        let Some(raw) = pool().await else { return };
        let db = WriteDb::Postgres(raw.clone());
        let mut tx = db.begin_write(0).await.unwrap();
        tx.set_sole(true);
        let first = insert(&tx, &[1]);
        assert!(tx.commit_writes(vec![first], Vec::new()).await.unwrap());
        let mut tx = db.begin_write(0).await.unwrap();
        tx.set_sole(true);
        let short = insert(&tx, &[1, 2]);
        let (stored, _) = tx
            .execute_counted_then(vec![short], "SELECT 1", &[], true)
            .await
            .unwrap();
        assert!(!stored);
        assert_eq!(count(&raw).await, 1, "the short write committed nothing");
        let mut tx = db.begin_write(0).await.unwrap();
        tx.set_sole(false);
        let write = insert(&tx, &[5]);
        let (stored, _) = tx
            .execute_counted_then(vec![write], "SELECT 1", &[], true)
            .await
            .unwrap();
        assert!(stored);
        assert_eq!(
            count(&raw).await,
            1,
            "inside the batch's transaction until it commits"
        );
        assert!(tx.commit_writes(Vec::new(), Vec::new()).await.unwrap());
        assert_eq!(count(&raw).await, 2);
    }
}
