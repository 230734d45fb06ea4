//! [`Invocations`] for [`Ledger`]: every write to an invocation is a writer job on a lane its
//! keys choose.
//!
//! Guarantees: a session's records queue on the session's lane (a later round of a relayed call
//! on the lane of the round it follows, LEDGER-62), so (session, call id) dedupes inside the
//! process and a session's events stay in one chain in order; every other write to a row queues
//! on the row's lane; a transactional tool runs as a job of its own (`transactional`); the sweep runs
//! on one fixed lane and changes at most `StoreConfig::sweep_limit` rows of each kind.

use std::time::Duration;

use serde_json::Value;
use time::OffsetDateTime;
use tokio::sync::oneshot;

use super::Ledger;
use super::transactional::TxJob;
use crate::commit::writer::Prefetch;
use crate::sql::tx::TxTool;
use crate::store::{Invocations, LedgerFuture};
use crate::transitions::decide::{self, Slots, Voted};
use crate::transitions::escalations;
use crate::transitions::grants::{self, Grant};
use crate::transitions::lease;
use crate::transitions::record;
use crate::transitions::request_states::{self, StateUse};
use crate::transitions::sweep;
use crate::transitions::upstream_task;
use crate::vocabulary::clock::truncate;
use crate::vocabulary::error::{LedgerError, ToolError};
use crate::vocabulary::ids::InvocationId;
use crate::vocabulary::model::{Decision, Invocation, NewInvocation, Recorded, SweepReport};

/// How many times a decision or a vote that lost its swap to another writer is taken again.
const RACE_TRIES: u32 = 16;

/// Runs `attempt`, and again — at most `tries` more times — while it fails as a lost race
/// (a compare-and-swap another writer won): each run reads the row as it then stands.
async fn again_after_lost_races<T, F, Fut>(attempt: F, tries: u32) -> Result<T, LedgerError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, LedgerError>>,
{
    let mut left = tries;
    loop {
        match attempt().await {
            Err(LedgerError::Database(e))
                if left > 0 && crate::support::deferred::is_lost_race(&e) =>
            {
                left -= 1;
            }
            other => return other,
        }
    }
}

impl Invocations for Ledger {
    fn record(&self, new: NewInvocation) -> LedgerFuture<'_, Recorded> {
        // Keyed by session: records of one session serialize, so (session, call id) dedupes
        // inside the process without relying on the unique index alone, and a session's events
        // stay in one lane's chain in order. A later round of a relayed call queues on the
        // lane of the round it follows (LEDGER-62).
        let key = new
            .follows
            .as_ref()
            .map_or(new.session_id.0, |r| r.previous.0);
        Box::pin(self.writer.submit(key, Prefetch::Nothing, move |tx, b| {
            Box::pin(record::record(tx, b, new.clone()))
        }))
    }

    fn record_and_claim(
        &self,
        new: NewInvocation,
        owner: &str,
        lease: Duration,
    ) -> LedgerFuture<'_, Recorded> {
        // Keyed by session, like `record`; a later round of a relayed call by the round it
        // follows, so concurrent uses of one state queue on one lane (LEDGER-62).
        let key = new
            .follows
            .as_ref()
            .map_or(new.session_id.0, |r| r.previous.0);
        let owner = owner.to_owned();
        Box::pin(self.writer.submit(key, Prefetch::Nothing, move |tx, b| {
            let (new, owner) = (new.clone(), owner.clone());
            Box::pin(async move { record::record_and_claim(tx, b, new, &owner, lease).await })
        }))
    }

    fn claim(
        &self,
        id: InvocationId,
        owner: &str,
        lease: Duration,
    ) -> LedgerFuture<'_, Invocation> {
        let owner = owner.to_owned();
        Box::pin(self.writer.submit(id.0, Prefetch::Fresh(id), move |tx, b| {
            let owner = owner.clone();
            Box::pin(async move { lease::claim(tx, b, id, &owner, lease).await })
        }))
    }

    fn renew_lease(
        &self,
        id: InvocationId,
        owner: &str,
        lease: Duration,
    ) -> LedgerFuture<'_, Invocation> {
        let owner = owner.to_owned();
        let hint = Prefetch::Running(id, owner.clone());
        Box::pin(self.writer.submit(id.0, hint, move |tx, b| {
            let owner = owner.clone();
            Box::pin(async move { lease::renew(tx, b, id, &owner, lease).await })
        }))
    }

    fn finish(
        &self,
        id: InvocationId,
        owner: &str,
        outcome: Result<Value, ToolError>,
    ) -> LedgerFuture<'_, Invocation> {
        let owner = owner.to_owned();
        let hint = Prefetch::Running(id, owner.clone());
        Box::pin(self.writer.submit(id.0, hint, move |tx, b| {
            let (owner, outcome) = (owner.clone(), outcome.clone());
            Box::pin(async move { lease::finish(tx, b, (id, &owner), outcome, None).await })
        }))
    }

    fn run_transactional(
        &self,
        id: InvocationId,
        owner: &str,
        tool: TxTool,
    ) -> LedgerFuture<'_, Invocation> {
        let owner = owner.to_owned();
        Box::pin(async move {
            let (reply, rx) = oneshot::channel();
            let job = TxJob {
                id,
                owner,
                tool: Some(tool),
                out: None,
                reply,
            };
            self.writer.submit_job(id.0, Box::new(job))?;
            rx.await.map_err(|_| LedgerError::Closed)?
        })
    }

    fn decide(
        &self,
        id: InvocationId,
        by: &str,
        decision: Decision,
    ) -> LedgerFuture<'_, Invocation> {
        let by = by.to_owned();
        let attempt = move || {
            let (by, decision) = (by.clone(), decision.clone());
            self.writer.submit(id.0, Prefetch::Fresh(id), move |tx, b| {
                let (by, decision) = (by.clone(), decision.clone());
                Box::pin(async move { decide::decide(tx, b, id, &by, &decision).await })
            })
        };
        // A vote or an escalation on another replica may move the waiting row on meanwhile.
        Box::pin(again_after_lost_races(attempt, RACE_TRIES))
    }

    fn decide_all(
        &self,
        ids: Vec<InvocationId>,
        by: &str,
        decision: Decision,
    ) -> LedgerFuture<'_, Vec<Invocation>> {
        let by = by.to_owned();
        let Some(&first) = ids.first() else {
            return Box::pin(async {
                Err(LedgerError::Invalid(
                    "a batch decision names no call".to_owned(),
                ))
            });
        };
        let attempt = move || {
            let (ids, by, decision) = (ids.clone(), by.clone(), decision.clone());
            self.writer
                .submit(first.0, Prefetch::Nothing, move |tx, b| {
                    let (ids, by, decision) = (ids.clone(), by.clone(), decision.clone());
                    Box::pin(async move { decide::decide_all(tx, b, &ids, &by, &decision).await })
                })
        };
        // A row another writer changed between the check and the write: checked once more, so
        // the refusal names what it met.
        Box::pin(again_after_lost_races(attempt, 1))
    }

    fn escalate(
        &self,
        id: InvocationId,
        after: Duration,
        to: Vec<String>,
    ) -> LedgerFuture<'_, bool> {
        Box::pin(self.writer.submit(id.0, Prefetch::Fresh(id), move |tx, b| {
            let to = to.clone();
            Box::pin(async move { escalations::escalate(tx, b, id, after, &to).await })
        }))
    }

    fn grant(&self, id: InvocationId, by: &str, grant: Grant) -> LedgerFuture<'_, Invocation> {
        let by = by.to_owned();
        Box::pin(self.writer.submit(id.0, Prefetch::Fresh(id), move |tx, b| {
            let (by, grant) = (by.clone(), grant.clone());
            Box::pin(async move { grants::grant(tx, b, id, &by, &grant).await })
        }))
    }

    fn vote(
        &self,
        id: InvocationId,
        by: &str,
        needed: u32,
        slots: Option<Slots>,
    ) -> LedgerFuture<'_, Voted> {
        let by = by.to_owned();
        let attempt = move || {
            let (by, slots) = (by.clone(), slots.clone());
            self.writer.submit(id.0, Prefetch::Fresh(id), move |tx, b| {
                let (by, slots) = (by.clone(), slots.clone());
                Box::pin(async move { decide::vote(tx, b, id, &by, needed, slots.as_ref()).await })
            })
        };
        // Votes racing on other replicas: each lost swap is counted again.
        Box::pin(again_after_lost_races(attempt, RACE_TRIES))
    }

    fn decide_once(
        &self,
        used: StateUse,
        claim_for: Option<(String, Duration)>,
    ) -> LedgerFuture<'_, Invocation> {
        let id = used.invocation;
        Box::pin(self.writer.submit(id.0, Prefetch::Fresh(id), move |tx, b| {
            let (used, claim_for) = (used.clone(), claim_for.clone());
            Box::pin(async move {
                let claim_for = claim_for.as_ref().map(|(o, l)| (o.as_str(), *l));
                request_states::decide_once(tx, b, &used, claim_for).await
            })
        }))
    }

    fn relay_task(
        &self,
        id: InvocationId,
        owner: &str,
        task: String,
        lease: Duration,
    ) -> LedgerFuture<'_, Invocation> {
        let owner = owner.to_owned();
        let hint = Prefetch::Running(id, owner.clone());
        Box::pin(self.writer.submit(id.0, hint, move |tx, b| {
            let (owner, task) = (owner.clone(), task.clone());
            Box::pin(async move { upstream_task::relay(tx, b, id, &owner, &task, lease).await })
        }))
    }

    fn relayed_task(&self, id: InvocationId) -> LedgerFuture<'_, Option<String>> {
        Box::pin(upstream_task::upstream_task(&self.pool, id))
    }

    fn sweep(&self, now: OffsetDateTime) -> LedgerFuture<'_, SweepReport> {
        let (now, limit) = (truncate(now), self.sweep_limit);
        let key = uuid::Uuid::nil();
        Box::pin(self.writer.submit(key, Prefetch::Nothing, move |tx, b| {
            Box::pin(sweep::sweep(tx, b, now, limit))
        }))
    }
}
