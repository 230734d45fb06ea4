//! The invocation state machine, written once for both backends.
//!
//! Every function here runs inside a writer batch (one transaction). Each transition reads the
//! row, checks the transition in Rust (so refusals name the states involved), and writes with a
//! compare-and-swap `UPDATE … WHERE id = $1 AND state = $2 AND version = $3`; a lost swap is
//! re-read and reported as what it is (taken, already decided, …). Refusals write nothing,
//! except that a row found past its `expires_at` is expired first — that write is the point.

use std::time::Duration;

use airlock_spec::{Approval, Effect, Mode, SourceKind, canonical_json, sha256_hex};
use serde_json::Value;
use sqlx::AssertSqlSafe;
use time::OffsetDateTime;

use crate::db::SqlValue;
use crate::error::{LedgerError, ToolError};
use crate::ids::InvocationId;
use crate::model::{Invocation, Lease, NewInvocation, Recorded, SweepReport};
use crate::row::{INVOCATION_COLUMNS, InvocationRow, content_hash};
use crate::runs;
use crate::state::{CallKind, InvocationState as S, RunStatus};
use crate::tx::LedgerTx;
use crate::writer::Batch;

pub(crate) const CLAIM_FROM: &[S] = &[S::Pending, S::Approved];
pub(crate) const FINISH_FROM: &[S] = &[S::Running];

/// SHA-256 of the canonical JSON of `arguments`.
pub(crate) fn arguments_hash(arguments: &Value) -> String {
    sha256_hex(canonical_json(arguments).as_bytes())
}

pub(crate) async fn load(
    tx: &mut LedgerTx,
    id: InvocationId,
) -> Result<Option<Invocation>, LedgerError> {
    let row = tx
        .inner
        .fetch_optional(
            AssertSqlSafe(format!(
                "SELECT {INVOCATION_COLUMNS} FROM invocations WHERE id = $1"
            )),
            &[id.to_string().into()],
        )
        .await?;
    row.map(|r| Invocation::try_from(InvocationRow::read(&r)?))
        .transpose()
}

pub(crate) async fn load_required(
    tx: &mut LedgerTx,
    id: InvocationId,
) -> Result<Invocation, LedgerError> {
    load(tx, id).await?.ok_or(LedgerError::NotFound(id))
}

async fn load_by_call(
    tx: &mut LedgerTx,
    new: &NewInvocation,
) -> Result<Option<Invocation>, LedgerError> {
    let row = tx
        .inner
        .fetch_optional(
            AssertSqlSafe(format!(
                "SELECT {INVOCATION_COLUMNS} FROM invocations WHERE session_id = $1 AND call_id = $2"
            )),
            &[new.session_id.to_string().into(), new.call_id.clone().into()],
        )
        .await?;
    row.map(|r| Invocation::try_from(InvocationRow::read(&r)?))
        .transpose()
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
    let mut binds = vec![
        row.id.clone().into(),
        prev.state.as_str().into(),
        prev.version.into(),
        row.state.clone().into(),
        row.version.into(),
        row.result.clone().into(),
        row.error_kind.clone().into(),
        row.error_message.clone().into(),
        row.decided_by.clone().into(),
        row.decision.clone().into(),
        row.decision_reason.clone().into(),
        row.decided_at.into(),
        row.resolved_by.clone().into(),
        row.resolution.clone().into(),
        row.resolution_note.clone().into(),
        row.resolved_at.into(),
        row.expires_at.into(),
    ];
    binds.extend([
        row.lease_owner.clone().into(),
        row.lease_deadline.into(),
        row.attempts.into(),
        row.updated_at.into(),
    ]);
    let n = tx
        .inner
        .execute(
            "UPDATE invocations SET state = $4, version = $5, result = $6, error_kind = $7, \
             error_message = $8, decided_by = $9, decision = $10, decision_reason = $11, \
             decided_at = $12, resolved_by = $13, resolution = $14, resolution_note = $15, \
             resolved_at = $16, expires_at = $17, lease_owner = $18, lease_deadline = $19, \
             attempts = $20, updated_at = $21 \
             WHERE id = $1 AND state = $2 AND version = $3",
            &binds,
        )
        .await?;
    if n == 0 {
        return Ok(None);
    }
    let hash = content_hash(&row);
    crate::chain::append(
        &mut tx.inner,
        batch,
        "invocation",
        &row.id,
        row.version,
        &row.state,
        &hash,
    )
    .await?;
    batch.changed.push(next.id);
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
        None => Err(refuse(&load_required(tx, prev.id).await?)),
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
        return load_required(tx, inv.id).await;
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
    let inv = load_required(tx, id).await?;
    let now = batch.now;
    settle_expiry(tx, batch, inv, now).await
}

/// Record step: dedupe on (session, call id), then the policy decides the first state.
pub(crate) async fn record(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    new: NewInvocation,
) -> Result<Recorded, LedgerError> {
    if new.effect == Effect::Transactional && new.source_kind != SourceKind::Local {
        return Err(LedgerError::Invalid(format!(
            "tool {} is {}: only local tools can be transactional",
            new.tool, new.source_kind
        )));
    }
    if let Some(existing) = load_by_call(tx, &new).await? {
        let now = batch.now;
        let invocation = settle_expiry(tx, batch, existing, now).await?;
        return Ok(Recorded {
            invocation,
            created: false,
        });
    }
    let session = runs::load_session(tx, new.session_id)
        .await?
        .ok_or(LedgerError::SessionNotFound(new.session_id))?;
    if let Some(run_id) = new.run_id {
        runs::load_run(tx, run_id)
            .await?
            .ok_or(LedgerError::RunNotFound(run_id))?;
    }
    let id = InvocationId::new();
    let principal = new.principal.clone().or(session.principal);
    let args_hash = arguments_hash(&new.arguments);
    let ttl = new.approval_ttl.unwrap_or(batch.approval_ttl);
    let (state, approval_ref) = initial_state(tx, &new, &args_hash, principal.as_deref()).await?;
    let expires_at = state.is_parked().then(|| batch.now + ttl);
    let inv = Invocation {
        id,
        session_id: new.session_id,
        run_id: new.run_id,
        call_id: new.call_id.clone(),
        tool: new.tool.clone(),
        arguments: new.arguments.clone(),
        arguments_hash: args_hash,
        source_kind: new.source_kind,
        effect: new.effect,
        approval: new.approval,
        mode: new.mode,
        kind: new.kind,
        state,
        version: 1,
        result: None,
        error: None,
        idempotency_key: new
            .idempotency_key
            .clone()
            .unwrap_or_else(|| id.to_string()),
        principal,
        definitions_digest: new.definitions_digest.clone(),
        approval_ref,
        decision: None,
        resolution: None,
        expires_at,
        lease: None,
        attempts: 0,
        created_at: batch.now,
        updated_at: batch.now,
    };
    if insert(tx, batch, &inv).await? {
        return Ok(Recorded {
            invocation: inv,
            created: true,
        });
    }
    // Another process recorded the same call between our read and our insert.
    let existing = load_by_call(tx, &new)
        .await?
        .ok_or(LedgerError::NotFound(id))?;
    Ok(Recorded {
        invocation: existing,
        created: false,
    })
}

/// The first state of a new row: the whole approval policy, atomic with the insert.
async fn initial_state(
    tx: &mut LedgerTx,
    new: &NewInvocation,
    args_hash: &str,
    principal: Option<&str>,
) -> Result<(S, Option<InvocationId>), LedgerError> {
    if new.mode == Mode::Propose {
        return Ok((S::Proposed, None));
    }
    if new.kind == CallKind::Question {
        return Ok((S::AwaitingAnswer, None));
    }
    match new.approval {
        Approval::Never => Ok((S::Pending, None)),
        Approval::Always => Ok((S::AwaitingApproval, None)),
        Approval::Once => {
            // Only calls a person approved count; bound to tool, canonical arguments and the
            // definitions digest, in the same session or for the same principal.
            let row = tx
                .inner
                .fetch_optional(
                    "SELECT id FROM invocations WHERE tool = $1 AND arguments_hash = $2 \
                     AND definitions_digest = $3 AND decision = 'approved' \
                     AND (session_id = $4 OR principal = $5) ORDER BY created_at LIMIT 1",
                    &[
                        new.tool.clone().into(),
                        args_hash.into(),
                        new.definitions_digest.clone().into(),
                        new.session_id.to_string().into(),
                        principal.map(str::to_owned).into(),
                    ],
                )
                .await?;
            match row {
                Some(r) => {
                    let id = r.req_text("id")?;
                    let id = id.parse().map_err(|e| LedgerError::Corrupt {
                        entity: "invocation",
                        id: id.clone(),
                        reason: format!("column id: {e}"),
                    })?;
                    Ok((S::Pending, Some(id)))
                }
                None => Ok((S::AwaitingApproval, None)),
            }
        }
    }
}

async fn insert(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    inv: &Invocation,
) -> Result<bool, LedgerError> {
    let row = InvocationRow::from(inv);
    let placeholders: Vec<String> = (1..=35).map(|i| format!("${i}")).collect();
    let n = tx
        .inner
        .execute(
            AssertSqlSafe(format!(
                "INSERT INTO invocations ({INVOCATION_COLUMNS}) VALUES ({}) \
                 ON CONFLICT (session_id, call_id) DO NOTHING",
                placeholders.join(", ")
            )),
            &row.binds(),
        )
        .await?;
    if n == 0 {
        return Ok(false);
    }
    let hash = content_hash(&row);
    crate::chain::append(
        &mut tx.inner,
        batch,
        "invocation",
        &row.id,
        row.version,
        &row.state,
        &hash,
    )
    .await?;
    batch.changed.push(inv.id);
    Ok(true)
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
    let inv = load_required(tx, id).await?;
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
    let inv = load_required(tx, id).await?;
    let mine = matches!(inv.state, S::Running | S::InDoubt) && holds(&inv, owner);
    if !mine {
        return Err(refuse_finish(&inv, owner));
    }
    let next = finished(&inv, outcome);
    save_or(tx, batch, &inv, next, |now| refuse_finish(now, owner)).await
}

/// Leases past their deadline, then parked rows past their expiry.
pub(crate) async fn sweep(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    now: OffsetDateTime,
    limit: i64,
) -> Result<SweepReport, LedgerError> {
    let mut report = SweepReport::default();
    let now_us = crate::clock::to_micros(now);
    let rows = tx
        .inner
        .fetch_all(
            AssertSqlSafe(format!(
                "SELECT {INVOCATION_COLUMNS} FROM invocations WHERE state = 'running' \
                 AND lease_deadline < $1 ORDER BY lease_deadline LIMIT $2"
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
                "SELECT {INVOCATION_COLUMNS} FROM invocations \
                 WHERE state IN ('awaiting_approval', 'awaiting_answer', 'in_doubt') \
                 AND expires_at <= $1 ORDER BY expires_at LIMIT $2"
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
