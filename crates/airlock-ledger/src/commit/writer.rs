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
//! compare-and-swap decides.
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
use crate::sql::db::{CountedWrite, DbPool, DbTx};
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
    pub(crate) pool: DbPool,
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
            DbPool::Postgres(pool) => {
                let (tx, rx) = mpsc::unbounded_channel();
                tokio::spawn(pg_announcer(pool.clone(), rx));
                Some(tx)
            }
            DbPool::Sqlite(_) => None,
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
                tokio::spawn(lane_loop(lane, rx));
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

async fn lane_loop(mut lane: Lane, mut rx: mpsc::UnboundedReceiver<Box<dyn Job>>) {
    while let Some(first) = rx.recv().await {
        let queued = gather(first, &mut rx).await;
        let mut group = Vec::with_capacity(queued.len());
        for job in queued {
            if job.exclusive() {
                lane.run_group(std::mem::take(&mut group)).await;
                lane.run_group(vec![job]).await;
            } else {
                group.push(job);
            }
        }
        lane.run_group(group).await;
    }
}

/// Group commit: takes what queued while the previous batch was committing, then yields to
/// let callers that batch just answered queue their next write, for as long as that brings
/// more. Without this the lane starts a batch with the first caller back and everyone else
/// waits a whole commit behind it. Yielding costs microseconds, not a timer's milliseconds.
async fn gather(
    first: Box<dyn Job>,
    rx: &mut mpsc::UnboundedReceiver<Box<dyn Job>>,
) -> Vec<Box<dyn Job>> {
    let mut queued = vec![first];
    for _ in 0..GATHER_YIELDS {
        let before = queued.len();
        while queued.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => queued.push(job),
                Err(_) => break,
            }
        }
        if queued.len() >= MAX_BATCH || (queued.len() == before && before > 1) {
            break;
        }
        tokio::task::yield_now().await;
    }
    queued
}

impl Lane {
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
        // A lost race for the lane's next `seq` is run again on a head read afresh. A head read
        // under the lane's lock can still lose to another process's lone write, which takes
        // no lock (LEDGER-53), so that is retried too — a bounded number of times. The lost
        // race of a queued write clears its own condition.
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
/// Handing it back to the pool would cost a round trip per batch: sqlx tests every returned
/// connection with a ping, a hand-off to SQLite's connection thread or a round trip to
/// PostgreSQL (docs/benchmarks.md, "Where the time goes"). Any other error (I/O, a closed
/// connection) drops it, and the next batch takes one from the pool.
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
    // guards) and a lost race runs the batch again (queued writes).
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
            // A stale row here fails the batch's guard and the batch reruns from the database.
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
    use sqlx::AssertSqlSafe;
    use sqlx::sqlite::SqlitePoolOptions;

    use super::*;
    use crate::sql::sqlite_tx::create_guard_table;
    use crate::vocabulary::clock::SystemClock;

    async fn write_pool() -> sqlx::SqlitePool {
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .after_connect(|conn, _| Box::pin(create_guard_table(conn)))
            .connect("sqlite::memory:")
            .await
            .unwrap();
        crate::sqlite::MIGRATOR.run(&pool).await.unwrap();
        pool
    }

    fn context(pool: &sqlx::SqlitePool) -> Arc<LaneContext> {
        Arc::new(LaneContext {
            pool: DbPool::Sqlite(pool.clone()),
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

    /// A lane commits batch after batch on the connection it keeps: the pool never gets it
    /// back, so sqlx never pings it on its return (a hand-off to SQLite's thread per batch).
    #[tokio::test]
    async fn a_lane_keeps_its_connection_between_batches() {
        let pool = write_pool().await;
        let writer = Writer::start(&context(&pool), 1);
        for n in 0..3_i64 {
            let written = writer
                .submit(Uuid::now_v7(), Prefetch::Nothing, move |tx, _| {
                    Box::pin(async move {
                        let sql = "INSERT OR REPLACE INTO temp.airlock_guard (ok) VALUES (1)";
                        tx.inner.execute(AssertSqlSafe(sql), &[]).await?;
                        Ok(n)
                    })
                })
                .await;
            assert_eq!(written.unwrap(), n);
            // A connection given back lands in the pool once its ping is answered.
            let returned = tokio::time::timeout(Duration::from_millis(300), async {
                while pool.num_idle() == 0 {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
            .await;
            assert!(
                returned.is_err(),
                "batch {n}: the lane gave its connection back"
            );
            assert_eq!(pool.size(), 1);
        }
    }

    /// The lane keeps a connection only while the database answers on it and no transaction
    /// is left open; after an I/O or protocol error the next batch takes a fresh one.
    #[tokio::test]
    async fn a_connection_that_failed_is_not_kept() {
        let pool = write_pool().await;
        let db = DbPool::Sqlite(pool.clone());
        let ok: Result<(), sqlx::Error> = Ok(());
        assert!(keep(db.begin_write(0).await.unwrap(), &ok).is_some());
        let refused: Result<(), _> = Err(deferred::lost_race());
        assert!(keep(db.begin_write(0).await.unwrap(), &refused).is_some());
        let broken: Result<(), _> = Err(sqlx::Error::Io(std::io::ErrorKind::BrokenPipe.into()));
        assert!(keep(db.begin_write(0).await.unwrap(), &broken).is_none());
        let mut open = db.begin_write(0).await.unwrap();
        open.execute(AssertSqlSafe("SELECT 1"), &[]).await.unwrap();
        assert!(!open.idle(), "the statement opened the transaction");
        assert!(keep(open, &ok).is_none());
    }
}
