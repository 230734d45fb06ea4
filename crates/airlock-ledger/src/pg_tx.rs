//! A PostgreSQL transaction whose `BEGIN` is sent only when a statement needs it (LEDGER-53).
//!
//! Why. A writer batch that reads nothing — every job's rows already in hand, the lane's chain
//! head cached — is a single statement of writes: sent alone it is its own transaction, which
//! commits (durably, `synchronous_commit = on`) when the statement ends. That is one round trip
//! where `BEGIN` with the lane's lock, the statement and `COMMIT` were three. The lane's lock
//! is not needed there: it serializes a lane's appends across processes for a batch that reads
//! the chain's head, and a batch on a cached head that another process moved past collides on
//! the chain's primary key and is run again on a head read under the lock.
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
        }
    }

    /// The connection inside the transaction, its `BEGIN` sent first if nothing sent it yet.
    pub(crate) async fn conn(&mut self) -> Result<&mut PgConnection, sqlx::Error> {
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
        (!self.open).then_some(&mut *self.conn)
    }

    pub(crate) async fn commit(self) -> Result<(), sqlx::Error> {
        self.end("COMMIT").await
    }

    pub(crate) async fn rollback(self) -> Result<(), sqlx::Error> {
        self.end("ROLLBACK").await
    }

    async fn end(mut self, how: &'static str) -> Result<(), sqlx::Error> {
        if self.open {
            sqlx::raw_sql(how).execute(&mut *self.conn).await?;
            self.open = false;
        }
        Ok(())
    }
}
