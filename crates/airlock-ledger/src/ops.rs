//! The invocation state machine, written once for both backends.
//!
//! Every function here runs inside a writer batch (one transaction). Each transition reads the
//! row, checks the transition in Rust (so refusals name the states involved), and writes with a
//! compare-and-swap `UPDATE … WHERE id = $1 AND state = $2 AND version = $3`; a lost swap is
//! re-read and reported as what it is (taken, already decided, …). Refusals write nothing,
//! except that a row found past its `expires_at` is expired first — that write is the point.
//!
//! Rows are read through the batch (`Batch::rows`: prefetched for all of its jobs in one query,
//! and updated by every write), and in a batch of several jobs the swaps are queued and written
//! together (see `deferred`), so a job costs no round trip of its own.

use std::time::Duration;

use airlock_spec::{Effect, canonical_json, sha256_hex};
use serde_json::Value;
use sqlx::AssertSqlSafe;
use time::OffsetDateTime;

use crate::db::SqlValue;
use crate::deferred;
use crate::error::{LedgerError, ToolError};
use crate::ids::InvocationId;
use crate::model::{Invocation, Lease, SweepReport};
use crate::row::{INVOCATION_COLUMNS, InvocationRow, content_hash, open_rows};
use crate::runs;
use crate::state::{InvocationState as S, RunStatus};
use crate::tx::LedgerTx;
use crate::writer::Batch;

pub(crate) const CLAIM_FROM: &[S] = &[S::Pending, S::Approved];
pub(crate) const FINISH_FROM: &[S] = &[S::Running];

/// SHA-256 of the canonical JSON of `arguments`.
pub(crate) fn arguments_hash(arguments: &Value) -> String {
    sha256_hex(canonical_json(arguments).as_bytes())
}

/// Writes the batch's queued updates, so a statement that reads invocations sees them.
pub(crate) async fn flush_rows(tx: &mut LedgerTx, batch: &mut Batch) -> Result<(), LedgerError> {
    if let Some(deferred) = batch.deferred.as_mut() {
        deferred.flush(&mut tx.inner).await?;
    }
    Ok(())
}

/// The row as it stands in this transaction: from the batch's rows if it has been read or
/// written already, else from the database (and then kept).
pub(crate) async fn load(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    id: InvocationId,
) -> Result<Option<Invocation>, LedgerError> {
    if let Some(inv) = batch.rows.get(&id) {
        return Ok(Some(inv.clone()));
    }
    flush_rows(tx, batch).await?;
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
        batch.rows.insert(id, inv.clone());
    }
    Ok(inv)
}

pub(crate) async fn load_required(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    id: InvocationId,
) -> Result<Invocation, LedgerError> {
    load(tx, batch, id).await?.ok_or(LedgerError::NotFound(id))
}

/// Reads the rows a batch's jobs will transition, in one query instead of one per job. Runs
/// inside the batch's transaction, after its lock, so the rows are as current as a per-job
/// read (and the compare-and-swap still guards every write). A row that fails to decode is
/// left for its job's own read to report.
pub(crate) async fn prefetch(
    tx: &mut LedgerTx,
    batch: &mut Batch,
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
            batch.rows.insert(inv.id, inv);
        }
    }
    Ok(())
}

/// Writes `next` over `prev` with a compare-and-swap; `None` when another writer got there
/// first. Appends the audit event and marks the row changed.
pub(crate) async fn save(
    tx: &mut LedgerTx,
    batch: &mut Batch,
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
    next.updated_at = batch.now;
    let row = InvocationRow::from(&next);
    if let Some(deferred) = batch.deferred.as_mut() {
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
            batch.rows.remove(&prev.id);
            return Ok(None);
        }
    }
    let hash = content_hash(&row);
    crate::chain::append(batch, "invocation", &row.id, row.version, &row.state, &hash);
    batch.changed.push(next.id);
    batch.rows.insert(next.id, next.clone());
    Ok(Some(next))
}

/// Saves, or re-reads the row when the swap was lost and lets `refuse` explain why.
pub(crate) async fn save_or<F>(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    prev: &Invocation,
    next: Invocation,
    refuse: F,
) -> Result<Invocation, LedgerError>
where
    F: FnOnce(&Invocation) -> LedgerError,
{
    match save(tx, batch, prev, next).await? {
        Some(saved) => Ok(saved),
        None => Err(refuse(&load_required(tx, batch, prev.id).await?)),
    }
}

/// Expires `inv` if it is parked past its `expires_at` (and fails its run with
/// `approval_expired`); returns the row as it now stands.
pub(crate) async fn settle_expiry(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    inv: Invocation,
    now: OffsetDateTime,
) -> Result<Invocation, LedgerError> {
    let overdue = inv.state.is_parked() && inv.expires_at.is_some_and(|at| at <= now);
    if !overdue {
        return Ok(inv);
    }
    let mut next = inv.clone();
    next.state = S::Expired;
    let Some(saved) = save(tx, batch, &inv, next).await? else {
        return load_required(tx, batch, inv.id).await;
    };
    if let Some(run_id) = saved.run_id {
        runs::fail_open_run(tx, batch, run_id, "approval_expired").await?;
    }
    Ok(saved)
}

/// Loads a row and applies expiry (the "enforced on every read and decision" rule).
pub(crate) async fn load_current(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    id: InvocationId,
) -> Result<Invocation, LedgerError> {
    let inv = load_required(tx, batch, id).await?;
    let now = batch.now;
    settle_expiry(tx, batch, inv, now).await
}

fn taken(inv: &Invocation) -> LedgerError {
    match inv.state {
        S::Running | S::Succeeded | S::Failed | S::InDoubt | S::Resolved => LedgerError::Taken {
            id: inv.id,
            state: inv.state,
            holder: inv.lease.as_ref().map(|l| l.owner.clone()),
        },
        _ => LedgerError::WrongState {
            id: inv.id,
            expected: CLAIM_FROM,
            actual: inv.state,
        },
    }
}

/// The claimable row moved to `running` under `owner`'s lease (not yet saved).
pub(crate) fn claimed(
    inv: &Invocation,
    owner: &str,
    lease: Duration,
    now: OffsetDateTime,
) -> Result<Invocation, LedgerError> {
    if !CLAIM_FROM.contains(&inv.state) {
        return Err(taken(inv));
    }
    // An approval is bound to the exact arguments: refuse a row whose arguments no longer
    // match the hash that was recorded (and approved).
    if arguments_hash(&inv.arguments) != inv.arguments_hash {
        return Err(LedgerError::Corrupt {
            entity: "invocation",
            id: inv.id.to_string(),
            reason: "arguments do not match the recorded arguments hash".into(),
        });
    }
    let mut next = inv.clone();
    next.state = S::Running;
    next.lease = Some(Lease {
        owner: owner.to_owned(),
        deadline: now + lease,
    });
    next.attempts += 1;
    Ok(next)
}

pub(crate) async fn claim(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    id: InvocationId,
    owner: &str,
    lease: Duration,
) -> Result<Invocation, LedgerError> {
    let inv = load_current(tx, batch, id).await?;
    let next = claimed(&inv, owner, lease, batch.now)?;
    save_or(tx, batch, &inv, next, taken).await
}

fn lease_lost(inv: &Invocation, owner: &str) -> LedgerError {
    LedgerError::LeaseLost {
        id: inv.id,
        owner: owner.to_owned(),
        state: inv.state,
        holder: inv.lease.as_ref().map(|l| l.owner.clone()),
    }
}

fn holds(inv: &Invocation, owner: &str) -> bool {
    inv.lease.as_ref().is_some_and(|l| l.owner == owner)
}

pub(crate) async fn renew(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    id: InvocationId,
    owner: &str,
    lease: Duration,
) -> Result<Invocation, LedgerError> {
    let inv = load_required(tx, batch, id).await?;
    if inv.state != S::Running || !holds(&inv, owner) {
        return Err(lease_lost(&inv, owner));
    }
    let mut next = inv.clone();
    next.lease = Some(Lease {
        owner: owner.to_owned(),
        deadline: batch.now + lease,
    });
    save_or(tx, batch, &inv, next, |now| lease_lost(now, owner)).await
}

fn refuse_finish(inv: &Invocation, owner: &str) -> LedgerError {
    match inv.state {
        S::Succeeded | S::Failed | S::Resolved | S::Denied | S::Expired | S::Proposed => {
            LedgerError::AlreadyFinished {
                id: inv.id,
                state: inv.state,
            }
        }
        S::Running | S::InDoubt | S::Approved => lease_lost(inv, owner),
        S::Pending | S::AwaitingApproval | S::AwaitingAnswer => LedgerError::WrongState {
            id: inv.id,
            expected: FINISH_FROM,
            actual: inv.state,
        },
    }
}

/// The row settled with `outcome` (not yet saved).
pub(crate) fn finished(inv: &Invocation, outcome: Result<Value, ToolError>) -> Invocation {
    let mut next = inv.clone();
    next.expires_at = None;
    match outcome {
        Ok(value) => {
            next.state = S::Succeeded;
            next.result = Some(value);
        }
        Err(error) => {
            next.state = S::Failed;
            next.error = Some(error);
        }
    }
    next
}

/// Stores the result. The lease owner may also settle its own row after the sweeper marked
/// it in doubt: the call did finish, so nobody needs to guess.
pub(crate) async fn finish(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    id: InvocationId,
    owner: &str,
    outcome: Result<Value, ToolError>,
) -> Result<Invocation, LedgerError> {
    let inv = load_required(tx, batch, id).await?;
    let mine = matches!(inv.state, S::Running | S::InDoubt) && holds(&inv, owner);
    if !mine {
        return Err(refuse_finish(&inv, owner));
    }
    let next = finished(&inv, outcome);
    save_or(tx, batch, &inv, next, |now| refuse_finish(now, owner)).await
}

/// Running rows whose lease ended before `$1`, oldest first, at most `$2`.
pub(crate) const EXPIRED_LEASES: &str = concat!(
    "state = 'running' AND lease_deadline < $1 AND ",
    open_rows!(),
    " ORDER BY lease_deadline LIMIT $2"
);

/// Parked rows whose wait ended at or before `$1`, oldest first, at most `$2`.
pub(crate) const EXPIRED_WAITS: &str = concat!(
    "state IN ('awaiting_approval', 'awaiting_answer', 'in_doubt') AND expires_at <= $1 AND ",
    open_rows!(),
    " ORDER BY expires_at LIMIT $2"
);

/// Leases past their deadline, then parked rows past their expiry.
pub(crate) async fn sweep(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    now: OffsetDateTime,
    limit: i64,
) -> Result<SweepReport, LedgerError> {
    let mut report = SweepReport::default();
    flush_rows(tx, batch).await?;
    let now_us = crate::clock::to_micros(now);
    let rows = tx
        .inner
        .fetch_all(
            AssertSqlSafe(format!(
                "SELECT {INVOCATION_COLUMNS} FROM invocations WHERE {EXPIRED_LEASES}"
            )),
            &[now_us.into(), limit.into()],
        )
        .await?;
    for r in rows {
        let inv = Invocation::try_from(InvocationRow::read(&r)?)?;
        let mut next = inv.clone();
        if inv.effect == Effect::Idempotent {
            // Safe to repeat: back to approved, re-run with the same idempotency key.
            next.state = S::Approved;
            next.lease = None;
        } else {
            // It may have run: never re-run automatically; park it for a person.
            next.state = S::InDoubt;
            next.expires_at = Some(now + batch.approval_ttl);
        }
        if let Some(saved) = save(tx, batch, &inv, next).await? {
            match saved.state {
                S::Approved => report.retried.push(saved.id),
                _ => report.in_doubt.push(saved.id),
            }
        }
    }
    let rows = tx
        .inner
        .fetch_all(
            AssertSqlSafe(format!(
                "SELECT {INVOCATION_COLUMNS} FROM invocations WHERE {EXPIRED_WAITS}"
            )),
            &[now_us.into(), limit.into()],
        )
        .await?;
    for r in rows {
        let inv = Invocation::try_from(InvocationRow::read(&r)?)?;
        let settled = settle_expiry(tx, batch, inv, now).await?;
        if settled.state == S::Expired {
            report.expired.push(settled.id);
        }
    }
    Ok(report)
}

/// Does the run of `inv` still accept decisions?
pub(crate) async fn check_run_open(tx: &mut LedgerTx, inv: &Invocation) -> Result<(), LedgerError> {
    let Some(run_id) = inv.run_id else {
        return Ok(());
    };
    let run = runs::load_run(tx, run_id)
        .await?
        .ok_or(LedgerError::RunNotFound(run_id))?;
    if matches!(run.status, RunStatus::Cancelled | RunStatus::Failed) {
        return Err(LedgerError::RunClosed {
            id: inv.id,
            run: run_id,
            status: run.status,
        });
    }
    Ok(())
}

/// Binds for the read-side listing queries.
pub(crate) fn text(v: Option<&str>) -> SqlValue {
    v.map(str::to_owned).into()
}
