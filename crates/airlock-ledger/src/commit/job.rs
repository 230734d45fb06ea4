//! What a writer lane runs: a [`Job`] applied to the batch's transaction, answered after the
//! commit, and the row it reads first ([`Prefetch`]).

use futures::future::BoxFuture;

use crate::sql::tx::LedgerTx;
use crate::transitions::batch::Batch;
use crate::vocabulary::ids::InvocationId;

/// A unit of work for a writer lane.
pub(crate) trait Job: Send {
    /// Runs alone in its own transaction (a transactional tool's body).
    fn exclusive(&self) -> bool {
        false
    }
    /// The invocation the job reads first, fetched for the whole batch in one query.
    fn prefetch(&self) -> Prefetch {
        Prefetch::Nothing
    }
    /// Applies the job. `Err` only for database errors, which abort the batch.
    fn run<'a>(
        &'a mut self,
        tx: &'a mut LedgerTx,
        batch: &'a mut Batch,
    ) -> BoxFuture<'a, Result<(), sqlx::Error>>;
    /// Sends the job's outcome (called after commit).
    fn reply(self: Box<Self>);
    /// Sends a database error (the job's transaction did not commit).
    fn fail(self: Box<Self>, e: sqlx::Error);
}

/// The row a job reads first, so the batch can read its jobs' rows in one query.
#[derive(Debug, Clone)]
pub(crate) enum Prefetch {
    Nothing,
    /// Read in the transaction: the job checks the row's content (a claim verifies the
    /// arguments before anything runs, a decision binds to them), which only the database
    /// holds as it is now.
    Fresh(InvocationId),
    /// A call this process runs under the lease of `owner` (renew, finish): the row as the
    /// last commit left it will do, if the writer still has it running under that lease
    /// (see `cache`).
    Running(InvocationId, String),
}
