//! [`AgentRuns`] for [`Ledger`]: an agent run's steps, details and lease, written as writer
//! jobs and read from the read pool.
//!
//! Guarantees: an agent run's writes queue on the run's lane (its start on its session's, as
//! any run's), so its steps, details and status change in the order its driver sent them;
//! taking over runs queues on one fixed lane, so this store's takers go one after another.

use std::time::Duration;

use super::Ledger;
use crate::commit::writer::Prefetch;
use crate::store::{AgentRuns, LedgerFuture};
use crate::transitions::agent_runs::{self, RunDetail, RunStep};
use crate::transitions::confirmations::Answered;
use crate::transitions::run_lease;
use crate::transitions::runs;
use crate::vocabulary::ids::RunId;
use crate::vocabulary::model::{NewRun, ResumeOutcome, Run, RunLease};
use crate::vocabulary::state::RunStatus;

impl AgentRuns for Ledger {
    fn start_run(
        &self,
        new: NewRun,
        detail: RunDetail,
        consent: Option<bool>,
    ) -> LedgerFuture<'_, (Run, Answered)> {
        // On its session's lane, as `create_run`.
        let lane = new.session_id.0;
        Box::pin(self.writer.submit(lane, Prefetch::Nothing, move |tx, b| {
            let (new, detail) = (new.clone(), detail.clone());
            Box::pin(async move { agent_runs::start(tx, b, new, &detail, consent).await })
        }))
    }

    fn save_run_steps(
        &self,
        steps: Vec<RunStep>,
        detail: RunDetail,
    ) -> LedgerFuture<'_, RunStatus> {
        let run = detail.run_id;
        Box::pin(self.writer.submit(run.0, Prefetch::Nothing, move |tx, b| {
            let (steps, detail) = (steps.clone(), detail.clone());
            Box::pin(async move { agent_runs::save_steps(tx, b, &steps, &detail).await })
        }))
    }

    fn finish_run(
        &self,
        steps: Vec<RunStep>,
        detail: RunDetail,
        status: RunStatus,
        reason: Option<String>,
    ) -> LedgerFuture<'_, Run> {
        let run = detail.run_id;
        Box::pin(self.writer.submit(run.0, Prefetch::Nothing, move |tx, b| {
            let (steps, detail, reason) = (steps.clone(), detail.clone(), reason.clone());
            Box::pin(
                async move { agent_runs::finish(tx, b, &steps, &detail, status, reason).await },
            )
        }))
    }

    fn run_steps(&self, run: RunId) -> LedgerFuture<'_, Vec<RunStep>> {
        Box::pin(agent_runs::steps(&self.pool, run))
    }

    fn run_detail(&self, run: RunId) -> LedgerFuture<'_, Option<RunDetail>> {
        Box::pin(agent_runs::detail(&self.pool, run))
    }

    fn child_run(&self, parent: RunId, call_id: String) -> LedgerFuture<'_, Option<RunId>> {
        Box::pin(async move { agent_runs::child(&self.pool, parent, &call_id).await })
    }

    fn parked_root_runs(&self, limit: u32) -> LedgerFuture<'_, Vec<RunId>> {
        Box::pin(agent_runs::parked_roots(&self.pool, limit))
    }

    fn resume_run_leased(&self, id: RunId, lease: RunLease) -> LedgerFuture<'_, ResumeOutcome> {
        Box::pin(self.writer.submit(id.0, Prefetch::Nothing, move |tx, b| {
            let lease = lease.clone();
            Box::pin(async move { runs::resume_run(tx, b, id, Some(&lease)).await })
        }))
    }

    fn renew_run_lease(&self, id: RunId, owner: &str, ttl: Duration) -> LedgerFuture<'_, bool> {
        let owner = owner.to_owned();
        Box::pin(self.writer.submit(id.0, Prefetch::Nothing, move |tx, b| {
            let owner = owner.clone();
            Box::pin(async move { run_lease::renew(tx, b, id, &owner, ttl).await })
        }))
    }

    fn take_over_runs(&self, lease: RunLease, limit: u32) -> LedgerFuture<'_, Vec<RunId>> {
        Box::pin(
            self.writer
                .submit(uuid::Uuid::nil(), Prefetch::Nothing, move |tx, b| {
                    let lease = lease.clone();
                    Box::pin(async move { run_lease::take_over(tx, b, &lease, limit).await })
                }),
        )
    }
}
