//! The engine behind both stores: writes go to the writer lanes, reads to the pool, and
//! waiters to the notifier. Backend differences end at construction (see `sqlite`, `postgres`).

use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;
use sqlx::AssertSqlSafe;
use time::OffsetDateTime;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::clock::{Clock, to_micros, truncate};
use crate::db::{DbPool, SqlValue};
use crate::error::{LedgerError, ToolError};
use crate::ids::{InvocationId, RunId, SessionId};
use crate::model::{
    ApprovalFilter, AuditReport, Decision, Invocation, NewInvocation, NewRun, NewSession, Recorded,
    ResumeOutcome, Run, Session, SweepReport,
};
use crate::notify::Notifier;
use crate::recent::RecentRows;
use crate::row::{
    INVOCATION_COLUMNS, InvocationRow, RUN_COLUMNS, RunRow, SESSION_COLUMNS, SessionRow, open_rows,
};
use crate::state::RunStatus;
use crate::tx::{LedgerTx, TxTool};
use crate::writer::{Batch, Job, LaneContext, Prefetch, Writer};
use crate::{decide, ops, record, runs};

/// Parked rows waiting for a person, filtered by tool (`$1`), principal (`$2`) and recorded
/// before (`$3`), each when not null; oldest first, at most `$4`.
pub(crate) const PENDING_APPROVALS: &str = concat!(
    "state IN ('awaiting_approval', 'awaiting_answer') AND ",
    open_rows!(),
    " AND ($1 IS NULL OR tool = $1) AND ($2 IS NULL OR principal = $2) \
     AND ($3 IS NULL OR created_at <= $3) ORDER BY created_at, id LIMIT $4"
);

/// Approved rows nobody has claimed yet, oldest first, at most `$1`.
pub(crate) const APPROVED_UNCLAIMED: &str = concat!(
    "state = 'approved' AND ",
    open_rows!(),
    " ORDER BY created_at, id LIMIT $1"
);

/// A run's calls (`$1`), in the order they were recorded.
pub(crate) const RUN_INVOCATIONS: &str = "run_id = $1 ORDER BY created_at, id";

/// Rows in doubt, oldest first.
pub(crate) const IN_DOUBT: &str = concat!(
    "state = 'in_doubt' AND ",
    open_rows!(),
    " ORDER BY created_at, id"
);

/// Settings shared by both backends.
#[derive(Clone)]
pub struct StoreConfig {
    /// How long a parked row waits for a person (default 7 days; a call may override it).
    pub approval_ttl: Duration,
    /// Writer lanes (PostgreSQL only; SQLite always has one). Default 2: fewer lanes make
    /// bigger batches (fewer commits, fewer fsyncs); on the benchmark machine 2 lanes beat 4
    /// and 8 at 16 callers (see the ledger README).
    pub lanes: usize,
    /// Most rows one sweep changes per kind (default 500).
    pub sweep_limit: i64,
    /// The clock (default: the system clock).
    pub clock: Arc<dyn Clock>,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            approval_ttl: Duration::from_secs(7 * 24 * 3600),
            lanes: 2,
            sweep_limit: 500,
            clock: Arc::new(crate::clock::SystemClock),
        }
    }
}

impl std::fmt::Debug for StoreConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreConfig")
            .field("approval_ttl", &self.approval_ttl)
            .field("lanes", &self.lanes)
            .field("sweep_limit", &self.sweep_limit)
            .finish_non_exhaustive()
    }
}

/// Aborts a background task when the store goes away.
pub(crate) struct AbortOnDrop(pub(crate) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

pub(crate) struct Engine {
    pool: DbPool,
    writer: Writer,
    notifier: Arc<Notifier>,
    clock: Arc<dyn Clock>,
    sweep_limit: i64,
    pub(crate) _listener: Option<AbortOnDrop>,
}

/// A transactional tool's job: runs alone, once.
struct TxJob {
    id: InvocationId,
    owner: String,
    tool: Option<TxTool>,
    out: Option<Result<Invocation, LedgerError>>,
    reply: oneshot::Sender<Result<Invocation, LedgerError>>,
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

impl Engine {
    /// Writes go through `write` (the writer lanes), reads through `read`.
    pub(crate) fn start_split(
        write: DbPool,
        read: DbPool,
        config: &StoreConfig,
        lanes: usize,
    ) -> Self {
        let notifier = Arc::new(Notifier::default());
        let ctx = Arc::new(LaneContext {
            pool: write,
            clock: Arc::clone(&config.clock),
            notifier: Arc::clone(&notifier),
            approval_ttl: config.approval_ttl,
            sessions: Arc::default(),
            recent: RecentRows::default(),
        });
        Self {
            writer: Writer::start(&ctx, lanes),
            pool: read,
            notifier,
            clock: Arc::clone(&config.clock),
            sweep_limit: config.sweep_limit,
            _listener: None,
        }
    }

    pub(crate) fn notifier(&self) -> Arc<Notifier> {
        Arc::clone(&self.notifier)
    }

    fn now(&self) -> OffsetDateTime {
        truncate(self.clock.now())
    }

    pub(crate) async fn create_session(
        &self,
        id: SessionId,
        new: NewSession,
    ) -> Result<Session, LedgerError> {
        self.writer
            .submit(&id.0, Prefetch::Nothing, move |tx, b| {
                let new = new.clone();
                Box::pin(runs::create_session(tx, b, id, new))
            })
            .await
    }

    pub(crate) async fn create_run(&self, new: NewRun) -> Result<Run, LedgerError> {
        let id = RunId::new();
        // On its session's lane: a run opened right behind its session lands in the same
        // batch or a later one, never racing it on another lane.
        let lane = new.session_id.0;
        self.writer
            .submit(&lane, Prefetch::Nothing, move |tx, b| {
                let new = new.clone();
                Box::pin(runs::create_run(tx, b, id, new))
            })
            .await
    }

    pub(crate) async fn park_run(&self, id: RunId) -> Result<Run, LedgerError> {
        self.writer
            .submit(&id.0, Prefetch::Nothing, move |tx, b| {
                Box::pin(runs::park_run(tx, b, id))
            })
            .await
    }

    pub(crate) async fn resume_run(&self, id: RunId) -> Result<ResumeOutcome, LedgerError> {
        self.writer
            .submit(&id.0, Prefetch::Nothing, move |tx, b| {
                Box::pin(runs::resume_run(tx, b, id))
            })
            .await
    }

    pub(crate) async fn end_run(
        &self,
        id: RunId,
        status: RunStatus,
        reason: Option<String>,
    ) -> Result<Run, LedgerError> {
        self.writer
            .submit(&id.0, Prefetch::Nothing, move |tx, b| {
                Box::pin(runs::end_run(tx, b, id, status, reason.clone()))
            })
            .await
    }

    pub(crate) async fn record(&self, new: NewInvocation) -> Result<Recorded, LedgerError> {
        // Keyed by session: records of one session serialize, so (session, call id) dedupes
        // inside the process without relying on the unique index alone, and a session's events
        // stay in one lane's chain in order.
        let key = new.session_id.0;
        self.writer
            .submit(&key, Prefetch::Nothing, move |tx, b| {
                Box::pin(record::record(tx, b, new.clone()))
            })
            .await
    }

    pub(crate) async fn record_and_claim(
        &self,
        new: NewInvocation,
        owner: &str,
        lease: Duration,
    ) -> Result<Recorded, LedgerError> {
        // Keyed by session, like `record`.
        let key = new.session_id.0;
        let owner = owner.to_owned();
        self.writer
            .submit(&key, Prefetch::Nothing, move |tx, b| {
                let (new, owner) = (new.clone(), owner.clone());
                Box::pin(async move { record::record_and_claim(tx, b, new, &owner, lease).await })
            })
            .await
    }

    pub(crate) async fn claim(
        &self,
        id: InvocationId,
        owner: &str,
        lease: Duration,
    ) -> Result<Invocation, LedgerError> {
        let owner = owner.to_owned();
        self.writer
            .submit(&id.0, Prefetch::Fresh(id), move |tx, b| {
                let owner = owner.clone();
                Box::pin(async move { ops::claim(tx, b, id, &owner, lease).await })
            })
            .await
    }

    pub(crate) async fn renew_lease(
        &self,
        id: InvocationId,
        owner: &str,
        lease: Duration,
    ) -> Result<Invocation, LedgerError> {
        let owner = owner.to_owned();
        self.writer
            .submit(&id.0, Prefetch::Running(id, owner.clone()), move |tx, b| {
                let owner = owner.clone();
                Box::pin(async move { ops::renew(tx, b, id, &owner, lease).await })
            })
            .await
    }

    pub(crate) async fn finish(
        &self,
        id: InvocationId,
        owner: &str,
        outcome: Result<Value, ToolError>,
    ) -> Result<Invocation, LedgerError> {
        let owner = owner.to_owned();
        self.writer
            .submit(&id.0, Prefetch::Running(id, owner.clone()), move |tx, b| {
                let (owner, outcome) = (owner.clone(), outcome.clone());
                Box::pin(async move { ops::finish(tx, b, id, &owner, outcome).await })
            })
            .await
    }

    pub(crate) async fn run_transactional(
        &self,
        id: InvocationId,
        owner: &str,
        tool: TxTool,
    ) -> Result<Invocation, LedgerError> {
        let (reply, rx) = oneshot::channel();
        let job = TxJob {
            id,
            owner: owner.to_owned(),
            tool: Some(tool),
            out: None,
            reply,
        };
        self.writer.submit_job(&id.0, Box::new(job))?;
        rx.await.map_err(|_| LedgerError::Closed)?
    }

    pub(crate) async fn decide(
        &self,
        id: InvocationId,
        by: &str,
        decision: Decision,
    ) -> Result<Invocation, LedgerError> {
        let by = by.to_owned();
        self.writer
            .submit(&id.0, Prefetch::Fresh(id), move |tx, b| {
                let (by, decision) = (by.clone(), decision.clone());
                Box::pin(async move { decide::decide(tx, b, id, &by, &decision).await })
            })
            .await
    }

    pub(crate) async fn sweep(&self, now: OffsetDateTime) -> Result<SweepReport, LedgerError> {
        let (now, limit) = (truncate(now), self.sweep_limit);
        self.writer
            .submit(&uuid::Uuid::nil(), Prefetch::Nothing, move |tx, b| {
                Box::pin(ops::sweep(tx, b, now, limit))
            })
            .await
    }

    async fn expire(&self, id: InvocationId) -> Result<Invocation, LedgerError> {
        self.writer
            .submit(&id.0, Prefetch::Fresh(id), move |tx, b| {
                Box::pin(ops::load_current(tx, b, id))
            })
            .await
    }

    /// A row read from the pool, expired first (persistently) if it is overdue.
    async fn current(&self, inv: Invocation) -> Result<Invocation, LedgerError> {
        let overdue = inv.state.is_parked() && inv.expires_at.is_some_and(|at| at <= self.now());
        if overdue {
            self.expire(inv.id).await
        } else {
            Ok(inv)
        }
    }

    pub(crate) async fn get(&self, id: InvocationId) -> Result<Invocation, LedgerError> {
        let row = self
            .pool
            .fetch_optional(
                AssertSqlSafe(format!(
                    "SELECT {INVOCATION_COLUMNS} FROM invocations WHERE id = $1"
                )),
                &[id.to_string().into()],
            )
            .await?
            .ok_or(LedgerError::NotFound(id))?;
        self.current(Invocation::try_from(InvocationRow::read(&row)?)?)
            .await
    }

    async fn list(&self, where_: &str, binds: &[SqlValue]) -> Result<Vec<Invocation>, LedgerError> {
        let rows = self
            .pool
            .fetch_all(
                AssertSqlSafe(format!(
                    "SELECT {INVOCATION_COLUMNS} FROM invocations WHERE {where_}"
                )),
                binds,
            )
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let inv = Invocation::try_from(InvocationRow::read(&r)?)?;
            out.push(self.current(inv).await?);
        }
        Ok(out)
    }

    pub(crate) async fn session_invocations(
        &self,
        id: SessionId,
    ) -> Result<Vec<Invocation>, LedgerError> {
        self.list(
            "session_id = $1 ORDER BY created_at, id",
            &[id.to_string().into()],
        )
        .await
    }

    pub(crate) async fn run_invocations(&self, id: RunId) -> Result<Vec<Invocation>, LedgerError> {
        self.list(RUN_INVOCATIONS, &[id.to_string().into()]).await
    }

    pub(crate) async fn pending_approvals(
        &self,
        filter: &ApprovalFilter,
    ) -> Result<Vec<Invocation>, LedgerError> {
        let rows = self
            .list(
                PENDING_APPROVALS,
                &[
                    ops::text(filter.tool.as_deref()),
                    ops::text(filter.principal.as_deref()),
                    filter.recorded_before.map(to_micros).into(),
                    i64::from(filter.limit.unwrap_or(500)).into(),
                ],
            )
            .await?;
        // Rows that expired on this read are no longer pending.
        Ok(rows.into_iter().filter(|i| i.state.is_parked()).collect())
    }

    pub(crate) async fn approved_unclaimed(
        &self,
        limit: u32,
    ) -> Result<Vec<Invocation>, LedgerError> {
        self.list(APPROVED_UNCLAIMED, &[i64::from(limit).into()])
            .await
    }

    pub(crate) async fn in_doubt(&self) -> Result<Vec<Invocation>, LedgerError> {
        let rows = self.list(IN_DOUBT, &[]).await?;
        Ok(rows.into_iter().filter(|i| i.state.is_parked()).collect())
    }

    pub(crate) async fn get_session(&self, id: SessionId) -> Result<Session, LedgerError> {
        let row = self
            .pool
            .fetch_optional(
                AssertSqlSafe(format!(
                    "SELECT {SESSION_COLUMNS} FROM sessions WHERE id = $1"
                )),
                &[id.to_string().into()],
            )
            .await?
            .ok_or(LedgerError::SessionNotFound(id))?;
        Session::try_from(SessionRow::read(&row)?)
    }

    pub(crate) async fn get_run(&self, id: RunId) -> Result<Run, LedgerError> {
        let row = self
            .pool
            .fetch_optional(
                AssertSqlSafe(format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = $1")),
                &[id.to_string().into()],
            )
            .await?
            .ok_or(LedgerError::RunNotFound(id))?;
        Run::try_from(RunRow::read(&row)?)
    }

    pub(crate) async fn verify(&self) -> Result<AuditReport, LedgerError> {
        crate::chain::verify(&self.pool).await
    }

    /// Returns once the row's version differs from `seen` (default: the version at the time of
    /// the call), or at `deadline` with the row as it is. A parked row past its expiry counts
    /// as changed: the read expires it.
    pub(crate) async fn wait_for_change(
        &self,
        id: InvocationId,
        seen: Option<i64>,
        deadline: Instant,
    ) -> Result<Invocation, LedgerError> {
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
    }

    /// The earlier of `deadline` and the row's expiry (so a waiter sees it expire).
    fn expiry_instant(&self, inv: &Invocation, deadline: Instant) -> Instant {
        let Some(at) = inv.expires_at.filter(|_| inv.state.is_parked()) else {
            return deadline;
        };
        let left = (at - self.now()).max(time::Duration::ZERO);
        let left = Duration::try_from(left).unwrap_or(Duration::ZERO);
        deadline.min(Instant::now() + left)
    }
}
