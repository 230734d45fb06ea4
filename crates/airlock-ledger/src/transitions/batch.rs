//! [`Batch`]: one write transaction as the state machine sees it, and the only way a transition
//! reads or writes an invocation row.
//!
//! Guarantees. A row is read through the batch (prefetched for all of its jobs in one query, or
//! read once and kept), and every save goes through it: a compare-and-swap on the (state,
//! version) that was read, an audit event on the lane's chain, and the row kept as saved — so
//! jobs later in the batch see earlier jobs' writes exactly as if each had committed alone. In
//! a batch of several jobs the swaps are queued and written together (see `deferred`); any
//! statement that reads invocations from the database flushes the queue first
//! ([`Batch::flush`]), so nothing reads around a queued write. Which jobs share a batch, and
//! when it commits, is the writer's business (see `writer`), not the transitions'.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use sqlx::AssertSqlSafe;
use time::OffsetDateTime;

use crate::sql::db::{CommitCheck, CountedWrite, DbTx, SqlValue};
use crate::sql::row::{INVOCATION_COLUMNS, InvocationRow, content_hash};
use crate::sql::tx::LedgerTx;
use crate::support::budget_memo::{BatchBudgets, KnownUses};
use crate::support::cache::SessionCache;
use crate::support::chain::Chain;
use crate::support::deferred::{self, Deferred};
use crate::support::notice::{self, NewNotice, Routes};
use crate::vocabulary::clock::to_micros;
use crate::vocabulary::error::LedgerError;
use crate::vocabulary::ids::InvocationId;
use crate::vocabulary::model::Invocation;

/// The state of one write transaction, shared by the jobs in it.
pub(crate) struct Batch {
    /// One timestamp for the whole batch (microsecond precision).
    pub(crate) now: OffsetDateTime,
    /// How long parked rows wait by default.
    pub(crate) approval_ttl: Duration,
    /// This lane's audit chain, continued by every write.
    pub(crate) chain: Chain,
    /// Invocations changed in this batch; their waiters are woken after commit.
    pub(crate) changed: Vec<InvocationId>,
    /// Invocation rows as they stand in this transaction, so no job re-reads a row.
    pub(crate) rows: HashMap<InvocationId, Invocation>,
    /// Sessions known to exist (they are immutable), shared by the store's lanes.
    pub(crate) sessions: Arc<SessionCache>,
    /// Row writes queued to be written together at the end (`None`: write each at once — a
    /// transactional tool's job, or a lone job rerun after a queued write lost its race, so
    /// the lost compare-and-swap is reported to it precisely).
    pub(crate) deferred: Option<Deferred>,
    /// The outbox's routes (LEDGER-30): empty when nobody is to be told, and then no row is
    /// made and nothing is written for it.
    routes: Routes,
    /// Outbox rows made by this batch's transitions, inserted at commit.
    pub(crate) notices: Vec<NewNotice>,
    /// Whether the writes taken at commit included outbox rows.
    pub(crate) noticed: bool,
    /// The limits the batch judged, as it counts them (LEDGER-74).
    pub(crate) budgets: BatchBudgets,
}

impl Batch {
    /// A batch at `now` on `chain`; `queued` defers row writes to the end (see `deferred`);
    /// `known` lets it judge limits on what this process knew (see `budget_memo`).
    pub(crate) fn new(
        now: OffsetDateTime,
        approval_ttl: Duration,
        chain: Chain,
        sessions: Arc<SessionCache>,
        (queued, known): (bool, Option<Arc<KnownUses>>),
        routes: Routes,
    ) -> Self {
        Self {
            now,
            approval_ttl,
            chain,
            changed: Vec::new(),
            rows: HashMap::new(),
            sessions,
            deferred: queued.then(Deferred::default),
            routes,
            notices: Vec::new(),
            noticed: false,
            budgets: BatchBudgets::new(known),
        }
    }

    /// Makes the outbox rows of a saved transition from `prev` (`None`: a new row) to `next`,
    /// so they commit with it or not at all (LEDGER-30).
    pub(crate) fn notice(&mut self, prev: Option<&Invocation>, next: &Invocation) {
        if self.routes.is_empty() {
            return;
        }
        let made = notice::notices_for(&self.routes, prev, next, self.now);
        self.notices.extend(made);
    }

    /// Makes the outbox rows of `row`'s escalation to `to` (LEDGER-78).
    pub(crate) fn notice_escalation(&mut self, row: &Invocation, to: &[String]) {
        if self.routes.is_empty() {
            return;
        }
        let made = notice::escalation(&self.routes, row, to, self.now);
        self.notices.extend(made);
    }

    /// Chains the audit event of a row this batch just wrote.
    pub(crate) fn audit(
        &mut self,
        entity: &'static str,
        id: &str,
        version: i64,
        state: &str,
        row_hash: &str,
    ) {
        self.chain
            .append(self.now, entity, id, version, state, row_hash);
    }

    /// Writes the queued rows, so a statement that reads invocations sees them.
    pub(crate) async fn flush(&mut self, tx: &mut LedgerTx) -> Result<(), LedgerError> {
        if let Some(deferred) = self.deferred.as_mut() {
            deferred.flush(&mut tx.inner).await?;
        }
        Ok(())
    }

    /// What the commit must also find true (see `budget_memo`).
    pub(crate) fn checks(&self) -> Vec<CommitCheck> {
        self.budgets.checks(to_micros(self.now))
    }

    /// The writes still to make at commit: audit events, then queued rows. The events go first
    /// because a PostgreSQL batch sent as one statement takes the lane's lock in their insert
    /// (LEDGER-53): before any row its other writes lock, in the order a batch that opened
    /// its transaction with the lock takes them, so the two cannot wait on each other.
    pub(crate) fn take_writes(&mut self, tx: &DbTx) -> Vec<CountedWrite> {
        let mut writes = self.chain.take(tx);
        if let Some(deferred) = self.deferred.as_mut() {
            writes.extend(deferred.take(tx));
        }
        writes.extend(notice::inserts(&self.notices, tx));
        self.noticed |= !self.notices.is_empty();
        self.notices.clear();
        writes
    }

    /// Reads the rows the batch's jobs will transition, in one query instead of one per job.
    /// Runs inside the batch's transaction, after its lock, so the rows are as current as a
    /// per-job read (and the compare-and-swap still guards every write). A row that fails to
    /// decode is left for its job's own read to report.
    pub(crate) async fn prefetch(
        &mut self,
        tx: &mut LedgerTx,
        ids: &[InvocationId],
    ) -> Result<(), sqlx::Error> {
        if ids.is_empty() {
            return Ok(());
        }
        let binds: Vec<SqlValue> = ids.iter().map(|id| id.to_string().into()).collect();
        let rows = tx
            .inner
            .fetch_all(
                AssertSqlSafe(format!(
                    "SELECT {INVOCATION_COLUMNS} FROM invocations WHERE id IN {}",
                    tx.inner.tuples(1, ids.len())
                )),
                &binds,
            )
            .await?;
        for r in rows {
            if let Ok(inv) = InvocationRow::read(&r)
                .map_err(LedgerError::from)
                .and_then(Invocation::try_from)
            {
                self.rows.insert(inv.id, inv);
            }
        }
        Ok(())
    }

    /// The row as it stands in this transaction: from the batch's rows if it has been read or
    /// written already, else from the database (and then kept).
    pub(crate) async fn load(
        &mut self,
        tx: &mut LedgerTx,
        id: InvocationId,
    ) -> Result<Option<Invocation>, LedgerError> {
        if let Some(inv) = self.rows.get(&id) {
            return Ok(Some(inv.clone()));
        }
        self.flush(tx).await?;
        let row = tx
            .inner
            .fetch_optional(
                AssertSqlSafe(format!(
                    "SELECT {INVOCATION_COLUMNS} FROM invocations WHERE id = $1"
                )),
                &[id.to_string().into()],
            )
            .await?;
        let inv = row
            .map(|r| Invocation::try_from(InvocationRow::read(&r)?))
            .transpose()?;
        if let Some(inv) = &inv {
            self.rows.insert(id, inv.clone());
        }
        Ok(inv)
    }

    pub(crate) async fn load_required(
        &mut self,
        tx: &mut LedgerTx,
        id: InvocationId,
    ) -> Result<Invocation, LedgerError> {
        self.load(tx, id).await?.ok_or(LedgerError::NotFound(id))
    }

    /// Writes `next` over `prev` with a compare-and-swap; `None` when another writer got there
    /// first. Appends the audit event and marks the row changed.
    pub(crate) async fn save(
        &mut self,
        tx: &mut LedgerTx,
        prev: &Invocation,
        mut next: Invocation,
    ) -> Result<Option<Invocation>, LedgerError> {
        if !prev.state.can_become(next.state) {
            // A bug in the caller's checks; refuse rather than write an illegal state.
            return Err(LedgerError::WrongState {
                id: prev.id,
                expected: &[],
                actual: prev.state,
            });
        }
        next.version = prev.version + 1;
        next.updated_at = self.now;
        let row = InvocationRow::from(&next);
        if let Some(deferred) = self.deferred.as_mut() {
            // Written with the batch's other updates; the swap is checked then (see `deferred`).
            deferred.push(prev.id, prev.state, prev.version, row.clone());
        } else {
            let binds = deferred::cas_binds(prev.state, prev.version, &row);
            let n = tx
                .inner
                .execute(AssertSqlSafe(deferred::cas_sql()), &binds)
                .await?;
            if n == 0 {
                // Someone else changed the row: forget our copy so the caller's re-read is fresh.
                self.rows.remove(&prev.id);
                return Ok(None);
            }
        }
        self.audit(
            "invocation",
            &row.id,
            row.version,
            &row.state,
            &content_hash(&row),
        );
        self.notice(Some(prev), &next);
        self.changed.push(next.id);
        self.rows.insert(next.id, next.clone());
        Ok(Some(next))
    }

    /// Saves, or re-reads the row when the swap was lost and lets `refuse` explain why.
    pub(crate) async fn save_or<F>(
        &mut self,
        tx: &mut LedgerTx,
        prev: &Invocation,
        next: Invocation,
        refuse: F,
    ) -> Result<Invocation, LedgerError>
    where
        F: FnOnce(&Invocation) -> LedgerError,
    {
        match self.save(tx, prev, next).await? {
            Some(saved) => Ok(saved),
            None => Err(refuse(&self.load_required(tx, prev.id).await?)),
        }
    }
}
