//! [`Ledger`]: the one store type. It implements [`Store`] by handing each write to the writer
//! lanes as a job that runs one transition (`record`, `lease`, `decide`, `sweep`, `runs`), and
//! each read to the read pool (`reads`), expiring overdue rows on the way. Backend differences
//! end at construction (see `sqlite`, `postgres`).

mod current;
mod start;
mod tx_job;

use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use serde_json::Value;
use time::OffsetDateTime;
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use crate::agent_runs::{self, RunDetail, RunStep};
use crate::clock::{Clock, to_micros, truncate};
use crate::confirmations::{self, Answered, Confirmation};
use crate::db::DbPool;
use crate::error::{LedgerError, ToolError};
use crate::ids::{InvocationId, RunId, SessionId};
use crate::model::RunLease;
use crate::model::{
    ApprovalFilter, AuditReport, Decision, Invocation, NewInvocation, NewRun, NewSession, Recorded,
    ResumeOutcome, Run, Session, SweepReport,
};
use crate::notify::Notifier;
use crate::pins::{self, ToolPin};
use crate::rate::{self, RateBudget, RateRefusal};
use crate::reads::{self, text};
use crate::request_states::{self, StateUse};
use crate::run_lease;
use crate::state::{InvocationState, RunStatus};
use crate::store::{LedgerFuture, Outbox, Store};
use crate::tx::TxTool;
use crate::writer::{Prefetch, Writer};
use crate::{chain, decide, lease, record, relayed, runs, sweep};

use tx_job::TxJob;

/// Aborts a background task when the store goes away.
pub(crate) struct AbortOnDrop(pub(crate) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The ledger on SQLite ([`Ledger::open`]) or PostgreSQL ([`Ledger::connect`]); use it as
/// `Arc<dyn Store>`. [`SqliteStore`](crate::SqliteStore) and [`PgStore`](crate::PgStore)
/// name this type.
pub struct Ledger {
    pub(crate) pool: DbPool,
    pub(crate) writer: Writer,
    pub(crate) notifier: Arc<Notifier>,
    clock: Arc<dyn Clock>,
    sweep_limit: i64,
    pub(crate) listener: Option<AbortOnDrop>,
    commits: Arc<AtomicU64>,
    commit_ns: Arc<AtomicU64>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let backend = match self.pool {
            DbPool::Sqlite(_) => "sqlite",
            DbPool::Postgres(_) => "postgres",
        };
        f.debug_struct("Ledger")
            .field("backend", &backend)
            .finish_non_exhaustive()
    }
}

/// How a store tells other processes about its commits, besides `NOTIFY` on PostgreSQL.
pub(crate) struct Announce {
    /// SQLite: the database's wake sockets.
    #[cfg(unix)]
    pub(crate) wake: Option<crate::wake::Announcer>,
}

impl Store for Ledger {
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
            Box::pin(async move { lease::finish(tx, b, id, &owner, outcome).await })
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
        Box::pin(self.writer.submit(id.0, Prefetch::Fresh(id), move |tx, b| {
            let (by, decision) = (by.clone(), decision.clone());
            Box::pin(async move { decide::decide(tx, b, id, &by, &decision).await })
        }))
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
            Box::pin(async move { relayed::relay(tx, b, id, &owner, &task, lease).await })
        }))
    }

    fn relayed_task(&self, id: InvocationId) -> LedgerFuture<'_, Option<String>> {
        Box::pin(relayed::upstream_task(&self.pool, id))
    }

    fn sweep(&self, now: OffsetDateTime) -> LedgerFuture<'_, SweepReport> {
        let (now, limit) = (truncate(now), self.sweep_limit);
        let key = uuid::Uuid::nil();
        Box::pin(self.writer.submit(key, Prefetch::Nothing, move |tx, b| {
            Box::pin(sweep::sweep(tx, b, now, limit))
        }))
    }

    fn take_rate(&self, budgets: Vec<RateBudget>) -> LedgerFuture<'_, Option<RateRefusal>> {
        let now = to_micros(self.clock.now());
        if let DbPool::Postgres(pool) = &self.pool {
            return Box::pin(async move { rate::take_shared(pool, &budgets, now).await });
        }
        let key = uuid::Uuid::nil();
        Box::pin(self.writer.submit(key, Prefetch::Nothing, move |tx, _| {
            let budgets = budgets.clone();
            Box::pin(async move { rate::take_in_lane(tx, &budgets, now).await })
        }))
    }

    fn get(&self, id: InvocationId) -> LedgerFuture<'_, Invocation> {
        Box::pin(async move { self.current(reads::invocation(&self.pool, id).await?).await })
    }

    /// Returns once the row's version differs from `seen` (default: the version at the time of
    /// the call), or at `deadline` with the row as it is. A parked row past its expiry counts
    /// as changed: the read expires it.
    fn wait_for_change(
        &self,
        id: InvocationId,
        seen: Option<i64>,
        deadline: Instant,
    ) -> LedgerFuture<'_, Invocation> {
        Box::pin(async move {
            let watch = self.notifier.watch(id);
            let mut notified = pin!(watch.notify.notified());
            // Registered before the read: a change committed after this line wakes us.
            notified.as_mut().enable();
            let current = self.get(id).await?;
            let seen = seen.unwrap_or(current.version);
            if current.version != seen {
                return Ok(current);
            }
            let mut wake_at = self.expiry_instant(&current, deadline);
            loop {
                tokio::select! {
                    () = &mut notified => {}
                    () = tokio::time::sleep_until(wake_at) => {}
                }
                notified.set(watch.notify.notified());
                notified.as_mut().enable();
                let current = self.get(id).await?;
                if current.version != seen || Instant::now() >= deadline {
                    return Ok(current);
                }
                wake_at = self.expiry_instant(&current, deadline);
            }
        })
    }

    fn approvals(&self) -> watch::Receiver<()> {
        self.notifier.approvals()
    }

    fn pending_approvals(&self, filter: ApprovalFilter) -> LedgerFuture<'_, Vec<Invocation>> {
        Box::pin(async move {
            let binds = [
                text(filter.tool.as_deref()),
                text(filter.principal.as_deref()),
                filter.recorded_before.map(to_micros).into(),
                i64::from(filter.limit.unwrap_or(500)).into(),
            ];
            let query = if filter.newest_first {
                reads::PENDING_APPROVALS_NEWEST
            } else {
                reads::PENDING_APPROVALS
            };
            self.parked(query, &binds).await
        })
    }

    fn in_doubt(&self) -> LedgerFuture<'_, Vec<Invocation>> {
        Box::pin(self.parked(reads::IN_DOUBT, &[]))
    }

    fn open_counts(&self) -> LedgerFuture<'_, Vec<(InvocationState, u64)>> {
        Box::pin(reads::open_counts(&self.pool))
    }

    fn approved_unclaimed(&self, limit: u32) -> LedgerFuture<'_, Vec<Invocation>> {
        let binds = [i64::from(limit).into()];
        Box::pin(async move { self.list(reads::APPROVED_UNCLAIMED, &binds).await })
    }

    fn session_invocations(&self, id: SessionId) -> LedgerFuture<'_, Vec<Invocation>> {
        let binds = [id.to_string().into()];
        Box::pin(async move { self.list(reads::SESSION_INVOCATIONS, &binds).await })
    }

    fn run_invocations(&self, id: RunId) -> LedgerFuture<'_, Vec<Invocation>> {
        let binds = [id.to_string().into()];
        Box::pin(async move { self.list(reads::RUN_INVOCATIONS, &binds).await })
    }

    fn verify(&self) -> LedgerFuture<'_, AuditReport> {
        Box::pin(chain::verify(&self.pool))
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

    fn open_run_in_session(&self, session: SessionId) -> LedgerFuture<'_, Option<RunId>> {
        Box::pin(agent_runs::open_in_session(&self.pool, session))
    }

    fn outbox(&self) -> Option<&dyn Outbox> {
        Some(self)
    }

    fn hold_confirmation(&self, held: Confirmation) -> LedgerFuture<'_, ()> {
        let key = held.session_id.0;
        Box::pin(self.writer.submit(key, Prefetch::Nothing, move |tx, b| {
            let held = held.clone();
            Box::pin(async move { confirmations::hold(tx, b, &held).await })
        }))
    }

    fn answer_confirmation(
        &self,
        session: SessionId,
        run: RunId,
        consent: bool,
    ) -> LedgerFuture<'_, Answered> {
        Box::pin(
            self.writer
                .submit(session.0, Prefetch::Nothing, move |tx, _| {
                    Box::pin(confirmations::answer(tx, session, run, consent))
                }),
        )
    }

    fn take_confirmation(
        &self,
        session: SessionId,
        run: RunId,
        held: (String, String),
        call_id: String,
    ) -> LedgerFuture<'_, bool> {
        Box::pin(
            self.writer
                .submit(session.0, Prefetch::Nothing, move |tx, _| {
                    let (held, call_id) = (held.clone(), call_id.clone());
                    Box::pin(async move {
                        confirmations::take(tx, session, run, (&held.0, &held.1), &call_id).await
                    })
                }),
        )
    }

    fn held_confirmation(&self, session: SessionId) -> LedgerFuture<'_, Option<Confirmation>> {
        Box::pin(confirmations::held(&self.pool, session))
    }

    fn tool_pins(&self) -> LedgerFuture<'_, Vec<ToolPin>> {
        Box::pin(pins::all(&self.pool))
    }

    fn pin_tool(&self, pin: ToolPin) -> LedgerFuture<'_, ()> {
        // Pins are rare (a boot, an operator's accept): one fixed lane serializes them.
        Box::pin(
            self.writer
                .submit(uuid::Uuid::nil(), Prefetch::Nothing, move |tx, b| {
                    let pin = pin.clone();
                    Box::pin(async move { pins::pin(tx, b, &pin).await })
                }),
        )
    }

    fn unpin_tool(&self, connection: String, tool: String) -> LedgerFuture<'_, ()> {
        Box::pin(
            self.writer
                .submit(uuid::Uuid::nil(), Prefetch::Nothing, move |tx, _| {
                    let (connection, tool) = (connection.clone(), tool.clone());
                    Box::pin(async move { pins::unpin(tx, &connection, &tool).await })
                }),
        )
    }
}
