//! Group commit: every write goes through a writer lane that batches whatever is queued into
//! one transaction, so one fsync covers many callers' writes.
//!
//! Guarantees. A caller's write is acknowledged only after the transaction containing it has
//! committed (durably: see the store's `synchronous` / `synchronous_commit` settings). Jobs in
//! a batch run one after another in arrival order, so they see each other's writes exactly as
//! if each had committed alone. A job's own refusal (wrong state, taken, …) writes nothing and
//! does not disturb its batch; a database error rolls the whole batch back, and each job is
//! then retried alone, so one bad job never fails its neighbours.
//!
//! A store has one lane on SQLite (one writer at a time is all SQLite allows) and several on
//! PostgreSQL (each its own connection and audit chain). Jobs for one row always go to the same
//! lane, so they never race each other inside the process; across processes the row-level
//! compare-and-swap decides. SQLite's lane is a thread of its own that owns its connection, so
//! a batch's statements are calls, not hand-offs to a driver's thread; PostgreSQL's lanes are
//! tasks, each awaiting its connection's round trips.
//!
//! This is the seam between the state machine and the database: the writer runs [`Job`]s on a
//! [`Batch`] and commits them, and knows nothing of the transitions the jobs run (the store in
//! `ledger` builds the jobs). A reader of the state machine can leave this module for last.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use crate::commit::announcer::{Notice, pg_announcer};
pub(crate) use crate::commit::job::{Job, Prefetch};
use crate::commit::telemetry::{self, CommitSpan};
use crate::sql::db::{CountedWrite, DbTx, WriteDb};
use crate::sql::tx::LedgerTx;
use crate::support::budget_memo::KnownUses;
use crate::support::cache::{RecentRows, SessionCache};
use crate::support::chain::{self, Chain};
use crate::support::deferred;
use crate::support::notice::Routes;
#[cfg(unix)]
use crate::support::wake::Announcer;
use crate::support::wakeups::{self, Wakeups};
use crate::transitions::batch::Batch;
use crate::vocabulary::clock::{Clock, truncate};
use crate::vocabulary::error::LedgerError;
use crate::vocabulary::ids::InvocationId;
use crate::vocabulary::state::InvocationState;

/// The most jobs one transaction takes.
const MAX_BATCH: usize = 256;

/// Most times a lane yields to let callers queue more before it starts a batch.
const GATHER_YIELDS: usize = 4;

/// A retryable job built from a closure.
struct FnJob<T, F> {
    f: F,
    hint: Prefetch,
    out: Option<Result<T, LedgerError>>,
    reply: oneshot::Sender<Result<T, LedgerError>>,
}

impl<T, F> Job for FnJob<T, F>
where
    T: Send + 'static,
    F: for<'a> Fn(&'a mut LedgerTx, &'a mut Batch) -> BoxFuture<'a, Result<T, LedgerError>>
        + Send
        + 'static,
{
    fn prefetch(&self) -> Prefetch {
        self.hint.clone()
    }

    fn run<'a>(
        &'a mut self,
        tx: &'a mut LedgerTx,
        batch: &'a mut Batch,
    ) -> BoxFuture<'a, Result<(), sqlx::Error>> {
        Box::pin(async move {
            match (self.f)(tx, batch).await {
                Err(LedgerError::Database(e)) => Err(e),
                other => {
                    self.out = Some(other);
                    Ok(())
                }
            }
        })
    }

    fn reply(self: Box<Self>) {
        let out = self.out.unwrap_or(Err(LedgerError::Closed));
        // The caller may have gone away (cancelled); the write stands regardless.
        let _ = self.reply.send(out);
    }

    fn fail(self: Box<Self>, e: sqlx::Error) {
        let _ = self.reply.send(Err(LedgerError::Database(e)));
    }
}

/// Shared by the lanes.
pub(crate) struct LaneContext {
    pub(crate) pool: WriteDb,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) wakeups: Arc<Wakeups>,
    pub(crate) approval_ttl: Duration,
    pub(crate) sessions: Arc<SessionCache>,
    pub(crate) recent: RecentRows,
    /// What the lanes' commits left each limit holding (LEDGER-74, `budget_memo`).
    pub(crate) budgets: Arc<KnownUses>,
    /// The outbox's routes (LEDGER-30); empty: no outbox rows.
    pub(crate) routes: Routes,
    /// SQLite: tells the database's listening stores in other processes (see `wake`).
    #[cfg(unix)]
    pub(crate) wake: Option<Announcer>,
    /// Transactions the lanes committed (see `Ledger::commits`).
    pub(crate) commits: Arc<AtomicU64>,
    /// Their time in nanoseconds, from `BEGIN` to the commit's acknowledgement (see
    /// `Ledger::commit_time`).
    pub(crate) commit_ns: Arc<AtomicU64>,
    /// PostgreSQL: acknowledge a batch's callers at its commit, not once its `NOTIFY` is sent
    /// (OPS-57): a process that listens serves on, so its announcements leave anyway.
    pub(crate) ack_at_commit: bool,
}

/// What a committed transaction changed, for the wake-ups.
struct Committed {
    changed: Vec<InvocationId>,
    /// Some changed row is now approved (a worker should look).
    approved: bool,
    /// The commit wrote outbox rows (the delivery worker should look).
    noticed: bool,
}

/// Handles to the writer lanes; dropping it stops them once their queues drain.
pub(crate) struct Writer {
    lanes: Vec<mpsc::UnboundedSender<Box<dyn Job>>>,
}

impl Writer {
    pub(crate) fn start(ctx: &Arc<LaneContext>, lanes: usize) -> Self {
        let notices = match &ctx.pool {
            WriteDb::Postgres(pool) => {
                let (tx, rx) = mpsc::unbounded_channel();
                tokio::spawn(pg_announcer(pool.clone(), rx));
                Some(tx)
            }
            WriteDb::Sqlite(_) => None,
        };
        let lanes = (0..lanes.max(1))
            .map(|lane| {
                let (tx, rx) = mpsc::unbounded_channel();
                let lane = Lane {
                    ctx: Arc::clone(ctx),
                    lane: i64::try_from(lane).unwrap_or(0),
                    head: None,
                    kept: None,
                    notices: notices.clone(),
                };
                match &ctx.pool {
                    WriteDb::Sqlite(_) => lane_thread(lane, rx),
                    WriteDb::Postgres(_) => drop(tokio::spawn(lane_loop(lane, rx))),
                }
                tx
            })
            .collect();
        Self { lanes }
    }

    fn lane_for(&self, key: Uuid) -> &mpsc::UnboundedSender<Box<dyn Job>> {
        &self.lanes[self.lane_index(key)]
    }

    fn lane_index(&self, key: Uuid) -> usize {
        let n = self.lanes.len() as u128;
        // UUIDv7's low bits are random: an even spread, and one row always maps to one lane.
        usize::try_from(key.as_u128() % n).unwrap_or(0)
    }

    /// Queues `f` on the lane of `key` and waits for the commit that contains it. `hint` names
    /// the invocation `f` reads first, so the batch can fetch it with its neighbours'.
    pub(crate) async fn submit<T, F>(
        &self,
        key: Uuid,
        hint: Prefetch,
        f: F,
    ) -> Result<T, LedgerError>
    where
        T: Send + 'static,
        F: for<'a> Fn(&'a mut LedgerTx, &'a mut Batch) -> BoxFuture<'a, Result<T, LedgerError>>
            + Send
            + 'static,
    {
        let (reply, rx) = oneshot::channel();
        let job = FnJob {
            f,
            hint,
            out: None,
            reply,
        };
        // LEDGER-38: a traced call's write is a span, queueing included.
        let traced = CommitSpan::start(self.lane_index(key));
        let result = match self.submit_job(key, Box::new(job)) {
            Ok(()) => rx.await.unwrap_or(Err(LedgerError::Closed)),
            Err(e) => Err(e),
        };
        if let Some(traced) = traced {
            traced.finish(&result);
        }
        result
    }

    /// Queues a prepared job on the lane of `key`.
    pub(crate) fn submit_job(&self, key: Uuid, job: Box<dyn Job>) -> Result<(), LedgerError> {
        self.lane_for(key)
            .send(job)
            .map_err(|_| LedgerError::Closed)
    }
}

/// One writer lane: its number, and the head of its audit chain as its last commit left it.
///
/// The cached head saves a read per batch. Another process writing the same lane (a CLI
/// decision, a second replica) makes it stale; then the batch's first event collides with that
/// process's on the chain's primary key `(lane, seq)`, and the batch is run again on a head
/// read afresh — a stale head can cost a retry, never a fork of the chain.
struct Lane {
    ctx: Arc<LaneContext>,
    lane: i64,
    head: Option<(i64, String)>,
    /// The lane's connection between batches, its transaction ended (see [`keep`]).
    kept: Option<DbTx>,
    /// PostgreSQL: the store's announcer, which sends the NOTIFYs (see [`pg_announcer`]).
    notices: Option<mpsc::UnboundedSender<Notice>>,
}

type Queue = mpsc::UnboundedReceiver<Box<dyn Job>>;

/// A PostgreSQL lane: a task.
async fn lane_loop(mut lane: Lane, mut rx: Queue) {
    while let Some(first) = rx.recv().await {
        let mut queued = vec![first];
        for _ in 0..GATHER_YIELDS {
            if gathered(&mut queued, &mut rx) {
                break;
            }
            tokio::task::yield_now().await;
        }
        lane.run_queued(queued).await;
    }
}

/// SQLite's lane: a thread of its own, on which the batch's statements run as calls on the
/// lane's connection (`lite_tx`) and its commit waits for the fsync, so neither holds up the
/// runtime's workers. A job's future is polled here; its database calls never wait on the
/// runtime, and anything else it awaits (a transactional tool's own work) is driven by the
/// runtime it was submitted from.
fn lane_thread(mut lane: Lane, mut rx: Queue) {
    let runtime = tokio::runtime::Handle::current();
    let name = format!("airlock-writer-{}", lane.lane);
    let run = move || {
        // Yielding is a system call on a thread: it is worth one only when the last batch
        // carried several callers, so at one client a batch starts at once.
        let mut several = false;
        while let Some(first) = rx.blocking_recv() {
            let mut queued = vec![first];
            for _ in 0..GATHER_YIELDS {
                if gathered(&mut queued, &mut rx) || !several {
                    break;
                }
                std::thread::yield_now();
            }
            several = queued.len() > 1;
            runtime.block_on(lane.run_queued(queued));
        }
    };
    if let Err(error) = std::thread::Builder::new().name(name).spawn(run) {
        // Without its thread the lane's queue is dropped, so every write answers `Closed`.
        tracing::error!(%error, "cannot start the ledger's writer thread");
    }
}

/// Group commit: takes what queued while the previous batch was committing; the lane then
/// yields to let callers that batch just answered queue their next write, for as long as that
/// brings more. Without this the lane starts a batch with the first caller back and everyone
/// else waits a whole commit behind it. Yielding costs microseconds, not a timer's
/// milliseconds. True when the batch is complete: full, or a yield brought nothing more.
fn gathered(queued: &mut Vec<Box<dyn Job>>, rx: &mut Queue) -> bool {
    let before = queued.len();
    while queued.len() < MAX_BATCH {
        match rx.try_recv() {
            Ok(job) => queued.push(job),
            Err(_) => break,
        }
    }
    queued.len() >= MAX_BATCH || (queued.len() == before && before > 1)
}

impl Lane {
    /// Runs what was gathered in arrival order, each exclusive job alone between groups.
    async fn run_queued(&mut self, queued: Vec<Box<dyn Job>>) {
        let mut group = Vec::with_capacity(queued.len());
        for job in queued {
            if job.exclusive() {
                self.run_group(std::mem::take(&mut group)).await;
                self.run_group(vec![job]).await;
            } else {
                group.push(job);
            }
        }
        self.run_group(group).await;
    }

    async fn run_group(&mut self, mut jobs: Vec<Box<dyn Job>>) {
        if jobs.is_empty() {
            return;
        }
        match self.attempt(&mut jobs).await {
            Ok(committed) => {
                self.settle(&committed, jobs);
            }
            Err(e) if jobs.len() == 1 => {
                tracing::warn!(error = %e, "ledger write failed");
                if let Some(job) = jobs.pop() {
                    job.fail(e);
                }
            }
            Err(e) => {
                // A queued write or an assumed limit losing to another process is expected.
                if !deferred::is_lost_race(&e) {
                    tracing::warn!(error = %e, jobs = jobs.len(), "ledger batch failed; retrying jobs one by one");
                }
                for job in jobs {
                    let mut one = vec![job];
                    match self.attempt(&mut one).await {
                        Ok(committed) => {
                            self.settle(&committed, one);
                        }
                        Err(e) => one.into_iter().for_each(|j| j.fail(clone_error(&e))),
                    }
                }
            }
        }
    }

    /// One transaction for `jobs`, from the cached chain head and with queued writes; run
    /// again from a head read afresh if the cached one was stale, and a lone job again with
    /// immediate writes if a queued write lost its race, so its refusal names exactly what it
    /// met (taken, wrong state, already recorded).
    async fn attempt(&mut self, jobs: &mut [Box<dyn Job>]) -> Result<Committed, sqlx::Error> {
        // A transactional tool's body runs once: its job cannot be rerun, so it reads the
        // head fresh (under the lane's write lock, where it cannot be stale) and writes at once.
        let rerunnable = !jobs.iter().any(|j| j.exclusive());
        let mut head = self.head.take().filter(|_| rerunnable);
        let mut queued = rerunnable;
        // A lost race for the lane's next `seq` is run again on a head read afresh, under the
        // lane's lock, which every appender holds while it appends (LEDGER-53): that head
        // stays the head until the batch commits. Only a replica of the previous release,
        // whose lone writes took no lock, can still win against it during a rolling upgrade;
        // hence a bound rather than one retry. The lost race of a queued write clears its own
        // condition.
        let mut collisions = 0;
        let result = loop {
            let kept = &mut self.kept;
            match attempt(&self.ctx, self.lane, jobs, head.take(), queued, kept).await {
                Err(e) if is_unique_violation(&e) && collisions < MAX_COLLISIONS => {
                    collisions += 1;
                }
                // PostgreSQL broke a lock cycle by aborting this batch: nothing of it stands,
                // so a batch that may run again does.
                Err(e) if rerunnable && is_deadlock(&e) && collisions < MAX_COLLISIONS => {
                    collisions += 1;
                }
                Err(e) if queued && jobs.len() == 1 && deferred::is_lost_race(&e) => {
                    queued = false;
                }
                other => break other,
            }
        };
        result.map(|(changed, head)| {
            self.head = Some(head);
            changed
        })
    }
}

/// Whether a committed row is news for a background worker: it became approved (the decisions
/// worker runs it), or it is an agent run's call a person settled — decided, answered, expired,
/// resolved — or that finished after being decided, so the run may resume (docs/rules.md
/// AGENT-7).
fn wakes_workers(row: &crate::vocabulary::model::Invocation) -> bool {
    let decided = row.decision.is_some() || row.resolution.is_some();
    row.state == InvocationState::Approved
        || (row.run_id.is_some()
            && (decided || row.state == InvocationState::Expired)
            && row.state.is_terminal())
}

/// How often one batch is run again after colliding on its lane's chain key.
const MAX_COLLISIONS: u32 = 8;

fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.is_unique_violation())
}

/// PostgreSQL's `deadlock_detected` (SQLSTATE 40P01).
fn is_deadlock(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.code().as_deref() == Some("40P01"))
}

/// Not inside the write transaction: a transaction that notifies holds PostgreSQL's
/// database-wide notify lock from before its commit record until after the commit is flushed,
/// so every lane's commits (and their fsyncs) would queue one behind another. The notification
/// is only a hint — a waiter re-reads the row, and one that misses it still wakes at its
/// deadline — so it goes in a transaction of its own that skips the flush wait. Nor is it on
/// the lane's path: the lane hands it, with the batch's jobs, to the store's announcer and
/// starts its next batch at once; the announcer acknowledges the jobs once the notification is
/// sent, so a caller that exits as soon as its write is acknowledged (a CLI decision) has still
/// told every other process (docs/rules.md OPS-43). A store that listens serves on (OPS-57):
/// its callers are answered at the commit, two round trips sooner on a call's path, and the
/// announcement still leaves, in commit order, right behind.
impl Lane {
    fn settle(&self, committed: &Committed, jobs: Vec<Box<dyn Job>>) {
        let ctx = &self.ctx;
        ctx.wakeups.wake_many(&committed.changed);
        if committed.approved {
            ctx.wakeups.approved();
        }
        if committed.noticed {
            ctx.wakeups.noticed();
        }
        let messages = wakeups::messages(&committed.changed, committed.approved);
        #[cfg(unix)]
        if let Some(wake) = &ctx.wake {
            wake.send(&messages);
        }
        let Some(notices) = &self.notices else {
            jobs.into_iter().for_each(Job::reply);
            return;
        };
        // OPS-57: a serving process answers its callers now; only the announcement is left.
        let (jobs, held) = if ctx.ack_at_commit {
            (Vec::new(), jobs)
        } else {
            (jobs, Vec::new())
        };
        held.into_iter().for_each(Job::reply);
        if messages.is_empty() && jobs.is_empty() {
            return;
        }
        if let Err(mpsc::error::SendError(notice)) = notices.send(Notice { messages, jobs }) {
            // The announcer ends only after the lanes; acknowledge here all the same.
            notice.jobs.into_iter().for_each(Job::reply);
        }
    }
}

/// `sqlx::Error` is not `Clone`; keep the message for the one job it belongs to.
fn clone_error(e: &sqlx::Error) -> sqlx::Error {
    sqlx::Error::Protocol(e.to_string())
}

/// One transaction: the jobs, their writes and events, the commit. Returns what changed and
/// the lane's chain head after the commit. It runs on the lane's kept connection if there is
/// one, and leaves it there for the next batch (see [`keep`]).
async fn attempt(
    ctx: &LaneContext,
    lane: i64,
    jobs: &mut [Box<dyn Job>],
    head: Option<(i64, String)>,
    queued: bool,
    kept: &mut Option<DbTx>,
) -> Result<(Committed, (i64, String)), sqlx::Error> {
    let begun = std::time::Instant::now();
    let mut inner = match kept.take() {
        Some(mut tx) => {
            tx.next_batch();
            tx
        }
        None => ctx.pool.begin_write(lane).await?,
    };
    inner.set_sole(jobs.len() == 1);
    let mut tx = LedgerTx { inner };
    let result = match fill(ctx, lane, &mut tx, jobs, head, queued).await {
        Ok((writes, batch)) => match tx.inner.commit_writes(writes, batch.checks()).await {
            Ok(true) => {
                ctx.commits.fetch_add(1, Ordering::Relaxed);
                let spent = u64::try_from(begun.elapsed().as_nanos()).unwrap_or(u64::MAX);
                ctx.commit_ns.fetch_add(spent, Ordering::Relaxed);
                telemetry::committed(begun, jobs.len());
                ctx.recent.keep(batch.rows.values());
                ctx.budgets.learn(&batch.budgets);
                let approved = batch
                    .changed
                    .iter()
                    .filter_map(|id| batch.rows.get(id))
                    .any(wakes_workers);
                let committed = Committed {
                    changed: batch.changed,
                    approved,
                    noticed: batch.noticed,
                };
                Ok((committed, batch.chain.into_head()))
            }
            Ok(false) => Err(deferred::lost_race()),
            Err(e) => Err(e),
        },
        Err(e) => {
            let _ = tx.inner.rollback().await;
            Err(e)
        }
    };
    *kept = keep(tx.inner, &result);
    if result.is_err() {
        // A session this batch created may have been cached, and a cached row it started from
        // may have moved on; neither is known after all.
        ctx.sessions.clear();
        ctx.recent.clear();
        ctx.budgets.forget();
    }
    result
}

/// The connection a batch ran on, kept by its lane for the next batch when no transaction is
/// left open on it and the database answered (a commit, or a refusal such as a lost race).
/// On PostgreSQL handing it back to the pool would cost a round trip per batch (sqlx tests
/// every returned connection with a ping, docs/benchmarks.md, "Where the time goes"); on SQLite
/// the lane's connection is its own (LEDGER-88). Any other error (I/O, a closed connection)
/// drops it, and the next batch takes a fresh one.
fn keep<T>(tx: DbTx, result: &Result<T, sqlx::Error>) -> Option<DbTx> {
    let answered = match result {
        Ok(_) => true,
        Err(e) => matches!(e, sqlx::Error::Database(_)) || deferred::is_lost_race(e),
    };
    (answered && tx.idle()).then_some(tx)
}

/// Runs the jobs in the open transaction; returns the writes still to make (queued rows, then
/// audit events) and the batch as the jobs left it.
async fn fill(
    ctx: &LaneContext,
    lane: i64,
    tx: &mut LedgerTx,
    jobs: &mut [Box<dyn Job>],
    head: Option<(i64, String)>,
    queued: bool,
) -> Result<(Vec<CountedWrite>, Batch), sqlx::Error> {
    let head = match head {
        Some(head) => head,
        None => chain::head(&mut tx.inner, lane).await?,
    };
    // Limits are judged on what this process knew only where the commit can check it (SQLite's
    // commit checks) and a lost race runs the batch again (queued writes).
    let known = (queued && matches!(tx.inner, DbTx::Sqlite(_))).then(|| Arc::clone(&ctx.budgets));
    let mut batch = Batch::new(
        truncate(ctx.clock.now()),
        ctx.approval_ttl,
        Chain::new(lane, head),
        Arc::clone(&ctx.sessions),
        (queued, known),
        Arc::clone(&ctx.routes),
    );
    let (mut fresh, mut running) = (Vec::new(), Vec::new());
    for job in jobs.iter() {
        match job.prefetch() {
            Prefetch::Nothing => {}
            Prefetch::Fresh(id) => fresh.push(id),
            // A stale row here makes the batch's write short and the batch reruns from the database.
            Prefetch::Running(id, owner) if queued => running.push((id, owner)),
            Prefetch::Running(id, _) => fresh.push(id),
        }
    }
    fresh.extend(ctx.recent.lend(running, &mut batch.rows));
    // A row both fresh and lent is read again: the fresh read wins.
    fresh.sort_unstable();
    fresh.dedup();
    batch.prefetch(tx, &fresh).await?;
    for job in jobs.iter_mut() {
        job.run(tx, &mut batch).await?;
    }
    let writes = batch.take_writes(&tx.inner);
    Ok((writes, batch))
}

#[cfg(test)]
mod tests {
    use sqlx::Connection as _;

    use super::*;
    use crate::sql::lite_tx::{LiteDb, scratch};
    use crate::vocabulary::clock::SystemClock;

    /// A migrated ledger file in a temporary directory.
    async fn migrated() -> (tempfile::TempDir, LiteDb) {
        let (dir, db) = scratch();
        let opts = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(&db.path)
            .create_if_missing(true);
        let mut conn = sqlx::SqliteConnection::connect_with(&opts).await.unwrap();
        crate::sqlite::MIGRATOR.run(&mut conn).await.unwrap();
        (dir, db)
    }

    fn context(db: &LiteDb) -> Arc<LaneContext> {
        Arc::new(LaneContext {
            pool: WriteDb::Sqlite(db.clone()),
            clock: Arc::new(SystemClock),
            wakeups: Arc::default(),
            approval_ttl: Duration::from_secs(60),
            sessions: Arc::default(),
            recent: RecentRows::default(),
            budgets: Arc::default(),
            routes: Arc::new([]),
            #[cfg(unix)]
            wake: None,
            commits: Arc::default(),
            commit_ns: Arc::default(),
            ack_at_commit: false,
        })
    }

    /// A lane commits batch after batch on the connection it keeps: a temporary table (which
    /// only its connection sees) fills across batches instead of starting over.
    #[tokio::test]
    async fn a_lane_keeps_its_connection_between_batches() {
        let (_dir, db) = migrated().await;
        let writer = Writer::start(&context(&db), 1);
        for n in 1..=3_i64 {
            let seen = writer
                .submit(Uuid::now_v7(), Prefetch::Nothing, move |tx, _| {
                    Box::pin(async move {
                        let create = "CREATE TEMP TABLE IF NOT EXISTS kept (n INTEGER)";
                        tx.inner.execute(create, &[]).await?;
                        tx.inner
                            .execute("INSERT INTO temp.kept VALUES ($1)", &[n.into()])
                            .await?;
                        tx.fetch_i64("SELECT count(*) FROM temp.kept", &[]).await
                    })
                })
                .await;
            assert_eq!(seen.unwrap(), Some(n), "batch {n} ran on a new connection");
        }
    }

    /// SQLite's lane runs its jobs on a thread of its own, where a job can still use the
    /// runtime it was submitted from: spawn onto it and await what it spawned.
    #[tokio::test]
    async fn a_sqlite_lane_runs_its_jobs_on_its_own_thread_within_the_runtime() {
        let (_dir, db) = migrated().await;
        let writer = Writer::start(&context(&db), 1);
        let caller = std::thread::current().id();
        let (name, thread, spawned) = writer
            .submit(Uuid::now_v7(), Prefetch::Nothing, move |_, _| {
                Box::pin(async move {
                    let here = std::thread::current();
                    let spawned = tokio::spawn(async { 7 }).await.unwrap_or(0);
                    Ok((here.name().map(str::to_owned), here.id(), spawned))
                })
            })
            .await
            .unwrap();
        assert_eq!(name.as_deref(), Some("airlock-writer-0"));
        assert_ne!(thread, caller);
        assert_eq!(spawned, 7);
    }

    /// The lane keeps a connection only while the database answers on it and no transaction
    /// is left open; after an I/O or protocol error the next batch takes a fresh one.
    #[tokio::test]
    async fn a_connection_that_failed_is_not_kept() {
        let (_dir, db) = migrated().await;
        let db = WriteDb::Sqlite(db);
        let ok: Result<(), sqlx::Error> = Ok(());
        assert!(keep(db.begin_write(0).await.unwrap(), &ok).is_some());
        let refused: Result<(), _> = Err(deferred::lost_race());
        assert!(keep(db.begin_write(0).await.unwrap(), &refused).is_some());
        let broken: Result<(), _> = Err(sqlx::Error::Io(std::io::ErrorKind::BrokenPipe.into()));
        assert!(keep(db.begin_write(0).await.unwrap(), &broken).is_none());
        let mut open = db.begin_write(0).await.unwrap();
        open.execute("SELECT 1", &[]).await.unwrap();
        assert!(!open.idle(), "the statement opened the transaction");
        assert!(keep(open, &ok).is_none());
    }
}
