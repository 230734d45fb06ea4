//! [`Sessions`] for [`Ledger`]: each session and run transition is a writer job, each read a
//! read-pool query.
//!
//! Guarantees: a run's transitions queue on the run's lane, one behind another; a run opens on
//! its session's lane, so one opened right behind its session lands in the same batch or a
//! later one, never racing it; a cancel cancels the run's nested runs in the same commit.

use super::Ledger;
use crate::commit::writer::Prefetch;
use crate::reads;
use crate::store::{LedgerFuture, Sessions};
use crate::transitions::agent_runs;
use crate::transitions::runs;
use crate::vocabulary::ids::{RunId, SessionId};
use crate::vocabulary::model::{NewRun, NewSession, ResumeOutcome, Run, Session};
use crate::vocabulary::state::RunStatus;

impl Sessions for Ledger {
    fn create_session(&self, id: SessionId, new: NewSession) -> LedgerFuture<'_, Session> {
        Box::pin(self.writer.submit(id.0, Prefetch::Nothing, move |tx, b| {
            Box::pin(runs::create_session(tx, b, id, new.clone()))
        }))
    }

    fn get_session(&self, id: SessionId) -> LedgerFuture<'_, Session> {
        Box::pin(reads::session(&self.pool, id))
    }

    fn create_run(&self, new: NewRun) -> LedgerFuture<'_, Run> {
        let id = RunId::new();
        // On its session's lane: a run opened right behind its session lands in the same
        // batch or a later one, never racing it on another lane.
        let lane = new.session_id.0;
        Box::pin(self.writer.submit(lane, Prefetch::Nothing, move |tx, b| {
            Box::pin(runs::create_run(tx, b, id, new.clone()))
        }))
    }

    fn get_run(&self, id: RunId) -> LedgerFuture<'_, Run> {
        Box::pin(reads::run(&self.pool, id))
    }

    fn park_run(&self, id: RunId) -> LedgerFuture<'_, Run> {
        Box::pin(self.writer.submit(id.0, Prefetch::Nothing, move |tx, b| {
            Box::pin(runs::park_run(tx, b, id))
        }))
    }

    fn resume_run(&self, id: RunId) -> LedgerFuture<'_, ResumeOutcome> {
        Box::pin(self.writer.submit(id.0, Prefetch::Nothing, move |tx, b| {
            Box::pin(runs::resume_run(tx, b, id, None))
        }))
    }

    fn end_run(
        &self,
        id: RunId,
        status: RunStatus,
        reason: Option<String>,
    ) -> LedgerFuture<'_, Run> {
        Box::pin(self.writer.submit(id.0, Prefetch::Nothing, move |tx, b| {
            Box::pin(runs::end_run(tx, b, id, status, reason.clone()))
        }))
    }

    fn cancel_run(&self, id: RunId) -> LedgerFuture<'_, Run> {
        Box::pin(self.writer.submit(id.0, Prefetch::Nothing, move |tx, b| {
            Box::pin(async move {
                let run = runs::cancel_run(tx, b, id).await?;
                agent_runs::cancel_nested(tx, b, id).await?;
                Ok(run)
            })
        }))
    }

    fn open_run_in_session(&self, session: SessionId) -> LedgerFuture<'_, Option<RunId>> {
        Box::pin(agent_runs::open_in_session(&self.pool, session))
    }
}
