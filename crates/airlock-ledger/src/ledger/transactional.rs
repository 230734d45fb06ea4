//! The writer job of a transactional tool, which
//! [`Invocations::run_transactional`](crate::roles::Invocations::run_transactional) queues.
//!
//! Guarantees: the tool's body runs alone, in a transaction of its own, and at most once: a
//! rerun of the job (a lane retrying a lost race) finds the body spent and answers
//! [`LedgerError::Closed`] instead of running it again. A database error is the job's `Err`, so
//! the transaction does not commit; any other outcome, the tool's error included, is the
//! answer its caller gets after the commit.

use futures::future::BoxFuture;
use tokio::sync::oneshot;

use crate::commit::writer::Job;
use crate::sql::tx::{LedgerTx, TxTool};
use crate::transitions::batch::Batch;
use crate::transitions::decide;
use crate::vocabulary::error::LedgerError;
use crate::vocabulary::ids::InvocationId;
use crate::vocabulary::model::Invocation;

/// A transactional tool's job: runs alone, once (its body is `FnOnce`, so it cannot be one of
/// the writer's rerunnable closures).
pub(super) struct TxJob {
    pub(super) id: InvocationId,
    pub(super) owner: String,
    pub(super) tool: Option<TxTool>,
    pub(super) out: Option<Result<Invocation, LedgerError>>,
    pub(super) reply: oneshot::Sender<Result<Invocation, LedgerError>>,
}

impl Job for TxJob {
    fn exclusive(&self) -> bool {
        true
    }

    fn run<'a>(
        &'a mut self,
        tx: &'a mut LedgerTx,
        batch: &'a mut Batch,
    ) -> BoxFuture<'a, Result<(), sqlx::Error>> {
        Box::pin(async move {
            let Some(tool) = self.tool.take() else {
                // Never retried: an exclusive job runs in its own transaction.
                self.out = Some(Err(LedgerError::Closed));
                return Ok(());
            };
            match decide::run_transactional(tx, batch, self.id, &self.owner, tool).await {
                Err(LedgerError::Database(e)) => Err(e),
                other => {
                    self.out = Some(other);
                    Ok(())
                }
            }
        })
    }

    fn reply(self: Box<Self>) {
        let _ = self
            .reply
            .send(self.out.unwrap_or(Err(LedgerError::Closed)));
    }

    fn fail(self: Box<Self>, e: sqlx::Error) {
        let _ = self.reply.send(Err(LedgerError::Database(e)));
    }
}
