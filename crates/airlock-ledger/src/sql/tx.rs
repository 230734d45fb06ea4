//! The ledger's own transaction, lent to a transactional local tool.
//!
//! Inside [`crate::roles::Invocations::run_transactional`] the tool's statements run in the
//! same database transaction that claims the row and stores its result, behind a savepoint:
//! the tool's writes and `succeeded` commit together, and a failing tool rolls back to the
//! savepoint so its writes vanish while the row still commits as `failed`. The tool sees only
//! this narrow API, never the ledger's tables by design (though SQL can reach them: tools are
//! trusted code compiled into the process).

use futures::future::BoxFuture;
use serde_json::Value;
use sqlx::AssertSqlSafe;

use crate::sql::db::{DbTx, SqlValue};
use crate::vocabulary::error::{LedgerError, ToolError};

/// An open ledger transaction. Statements use `$1, $2, …` placeholders on both backends, each
/// of which must be bound; a call runs one statement (several in one string are refused on
/// SQLite), and a statement that ends the transaction (`COMMIT`, `ROLLBACK`) fails the batch.
/// On SQLite a tool's body runs on the writer's thread (docs/rules.md LEDGER-88): it may await
/// the runtime's work, never another ledger write, which would wait behind its own batch.
#[derive(Debug)]
pub struct LedgerTx {
    pub(crate) inner: DbTx,
}

/// A transactional tool body: it gets the ledger's transaction and returns the tool's result.
pub type TxTool =
    Box<dyn for<'a> FnOnce(&'a mut LedgerTx) -> BoxFuture<'a, Result<Value, ToolError>> + Send>;

/// Boxes a closure as a [`TxTool`] (helps type inference for the higher-ranked signature).
pub fn tx_tool<F>(f: F) -> TxTool
where
    F: for<'a> FnOnce(&'a mut LedgerTx) -> BoxFuture<'a, Result<Value, ToolError>> + Send + 'static,
{
    Box::new(f)
}

impl LedgerTx {
    /// Runs one statement of the tool's own; returns the number of rows it changed.
    pub async fn execute(&mut self, sql: &str, args: &[SqlValue]) -> Result<u64, LedgerError> {
        // The tool's SQL is compiled into the process (trusted code); values go through binds.
        Ok(self
            .inner
            .execute(AssertSqlSafe(sql.to_owned()), args)
            .await?)
    }

    /// Runs a query and returns the first column of the first row as an integer, if any.
    pub async fn fetch_i64(
        &mut self,
        sql: &str,
        args: &[SqlValue],
    ) -> Result<Option<i64>, LedgerError> {
        let row = self
            .inner
            .fetch_optional(AssertSqlSafe(sql.to_owned()), args)
            .await?;
        Ok(row.map(|r| r.first_int()).transpose()?.flatten())
    }
}
