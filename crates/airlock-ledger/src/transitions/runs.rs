//! Sessions and runs: creation, and the run transitions that decide who resumes a parked run.
//! Below the invocation transitions, which consult a call's run (expiry fails it, a decision
//! needs it open).
//!
//! A run moves `running → parked → running → … → succeeded | failed | cancelled`, each a
//! compare-and-swap on its version, so when several approvals land at once exactly one caller
//! gets [`ResumeOutcome::Resumed`].

use sqlx::AssertSqlSafe;

use crate::sql::row::{RUN_COLUMNS, RunRow, SESSION_COLUMNS, SessionRow, content_hash};
use crate::sql::tx::LedgerTx;
use crate::transitions::batch::Batch;
use crate::transitions::run_lease;
use crate::vocabulary::error::LedgerError;
use crate::vocabulary::ids::{RunId, SessionId};
use crate::vocabulary::model::RunLease;
use crate::vocabulary::model::{Invocation, NewRun, NewSession, ResumeOutcome, Run, Session};
use crate::vocabulary::state::RunStatus;

/// The principal of session `id` (`None` when the session does not exist).
pub(crate) async fn session_principal(
    tx: &mut LedgerTx,
    batch: &Batch,
    id: SessionId,
) -> Result<Option<Option<String>>, LedgerError> {
    if let Some(principal) = batch.sessions.get(id) {
        return Ok(Some(principal));
    }
    let queued = batch.deferred.as_ref().and_then(|d| d.queued_session(id));
    if let Some(principal) = queued {
        return Ok(Some(principal));
    }
    let Some(session) = load_session(tx, id).await? else {
        return Ok(None);
    };
    batch.sessions.put(id, session.principal.clone());
    Ok(Some(session.principal))
}

pub(crate) async fn load_session(
    tx: &mut LedgerTx,
    id: SessionId,
) -> Result<Option<Session>, LedgerError> {
    let row = tx
        .inner
        .fetch_optional(
            AssertSqlSafe(format!(
                "SELECT {SESSION_COLUMNS} FROM sessions WHERE id = $1"
            )),
            &[id.to_string().into()],
        )
        .await?;
    row.map(|r| Session::try_from(SessionRow::read(&r)?))
        .transpose()
}

/// Refuses a call recorded in a run the database does not hold; a run seen before is not read
/// again (AGENT-54: runs are never deleted, and existence is all this checks).
pub(crate) async fn require_run(
    tx: &mut LedgerTx,
    batch: &Batch,
    id: RunId,
) -> Result<(), LedgerError> {
    if batch.sessions.has_run(id) {
        return Ok(());
    }
    load_run(tx, id)
        .await?
        .ok_or(LedgerError::RunNotFound(id))?;
    batch.sessions.put_run(id);
    Ok(())
}

pub(crate) async fn load_run(tx: &mut LedgerTx, id: RunId) -> Result<Option<Run>, LedgerError> {
    let row = tx
        .inner
        .fetch_optional(
            AssertSqlSafe(format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = $1")),
            &[id.to_string().into()],
        )
        .await?;
    row.map(|r| Run::try_from(RunRow::read(&r)?)).transpose()
}

pub(crate) async fn create_session(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    id: SessionId,
    new: NewSession,
) -> Result<Session, LedgerError> {
    let session = Session {
        id,
        channel: new.channel,
        principal: new.principal,
        metadata: new.metadata,
        created_at: batch.now,
    };
    let row = SessionRow::from(&session);
    let hash = content_hash(&row);
    batch.audit("session", &row.id, 1, "open", &hash);
    match batch.deferred.as_mut() {
        // Written with the batch's other rows; calls recorded beside it find it in the queue.
        Some(deferred) => deferred.push_session(row),
        None => {
            tx.inner
                .execute(
                    AssertSqlSafe(format!(
                        "INSERT INTO sessions ({SESSION_COLUMNS}) VALUES ($1, $2, $3, $4, $5)"
                    )),
                    &row.binds(),
                )
                .await?;
        }
    }
    Ok(session)
}

pub(crate) async fn create_run(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    id: RunId,
    new: NewRun,
) -> Result<Run, LedgerError> {
    session_principal(tx, batch, new.session_id)
        .await?
        .ok_or(LedgerError::SessionNotFound(new.session_id))?;
    // The session may still be queued in this batch; the run's foreign key needs it written.
    batch.flush(tx).await?;
    let run = Run {
        id,
        session_id: new.session_id,
        agent: new.agent,
        status: RunStatus::Running,
        status_reason: None,
        definitions_digest: new.definitions_digest,
        definitions_snapshot: new.definitions_snapshot,
        version: 1,
        created_at: batch.now,
        updated_at: batch.now,
    };
    let row = RunRow::from(&run);
    let mut binds = row.binds();
    binds.extend(run_lease::columns(
        new.lease.as_ref(),
        run.status,
        batch.now,
    ));
    // AGENT-32: the unique index on a session's open run decides between racing starters (two
    // processes); the loser inserts nothing and learns which run holds the session. `RETURNING`
    // names the outcome without reading an affected-row count (AGENT-33).
    let inserted = tx
        .inner
        .fetch_optional(
            AssertSqlSafe(format!(
                "INSERT INTO runs ({RUN_COLUMNS}, lease_owner, lease_deadline) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
                 ON CONFLICT DO NOTHING RETURNING id"
            )),
            &binds,
        )
        .await?;
    if inserted.is_none() {
        return Err(session_busy(tx, new.session_id).await);
    }
    let hash = content_hash(&row);
    batch.audit("run", &row.id, 1, &row.status, &hash);
    // Forgotten with the other caches if this batch rolls back (see `writer`).
    batch.sessions.put_run(id);
    Ok(run)
}

/// The refusal of a second open run in `session`, naming the open one.
async fn session_busy(tx: &mut LedgerTx, session: SessionId) -> LedgerError {
    let open = tx
        .inner
        .fetch_optional(
            "SELECT id FROM runs WHERE session_id = $1 AND status IN ('running', 'parked')",
            &[session.to_string().into()],
        )
        .await;
    let run = match open {
        Ok(Some(row)) => row.req_text("id").ok().and_then(|id| id.parse().ok()),
        Ok(None) => None,
        Err(e) => return e.into(),
    };
    LedgerError::SessionBusy { session, run }
}

/// Compare-and-swap of a run's status; `None` when another writer changed it first. The run
/// holds `lease` if it moves to `running`, and no lease otherwise (LEDGER-56).
async fn save_run(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    prev: &Run,
    status: RunStatus,
    lease: Option<&RunLease>,
    reason: Option<String>,
) -> Result<Option<Run>, LedgerError> {
    let mut next = prev.clone();
    next.status = status;
    next.status_reason = reason;
    next.version = prev.version + 1;
    next.updated_at = batch.now;
    let row = RunRow::from(&next);
    let [owner, deadline] = run_lease::columns(lease, status, batch.now);
    let n = tx
        .inner
        .execute(
            "UPDATE runs SET status = $3, status_reason = $4, version = $5, updated_at = $6, \
             lease_owner = $7, lease_deadline = $8 WHERE id = $1 AND version = $2",
            &[
                row.id.clone().into(),
                prev.version.into(),
                row.status.clone().into(),
                row.status_reason.clone().into(),
                row.version.into(),
                row.updated_at.into(),
                owner,
                deadline,
            ],
        )
        .await?;
    if n == 0 {
        return Ok(None);
    }
    let hash = content_hash(&row);
    batch.audit("run", &row.id, row.version, &row.status, &hash);
    Ok(Some(next))
}

async fn load_run_required(tx: &mut LedgerTx, id: RunId) -> Result<Run, LedgerError> {
    load_run(tx, id).await?.ok_or(LedgerError::RunNotFound(id))
}

/// Does the run of `inv` still accept decisions?
pub(crate) async fn check_run_open(tx: &mut LedgerTx, inv: &Invocation) -> Result<(), LedgerError> {
    let Some(run_id) = inv.run_id else {
        return Ok(());
    };
    let run = load_run_required(tx, run_id).await?;
    if matches!(run.status, RunStatus::Cancelled | RunStatus::Failed) {
        return Err(LedgerError::RunClosed {
            id: inv.id,
            run: run_id,
            status: run.status,
        });
    }
    Ok(())
}

/// Fails a run that has not ended (used when one of its parked calls expires).
pub(crate) async fn fail_open_run(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    id: RunId,
    reason: &str,
) -> Result<(), LedgerError> {
    let run = load_run_required(tx, id).await?;
    if !run.status.is_terminal() {
        save_run(
            tx,
            batch,
            &run,
            RunStatus::Failed,
            None,
            Some(reason.to_owned()),
        )
        .await?;
    }
    Ok(())
}

/// `running → parked`.
pub(crate) async fn park_run(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    id: RunId,
) -> Result<Run, LedgerError> {
    let run = load_run_required(tx, id).await?;
    let wrong = |actual| LedgerError::RunWrongState {
        id,
        expected: RunStatus::Running,
        actual,
    };
    if run.status != RunStatus::Running {
        return Err(wrong(run.status));
    }
    match save_run(tx, batch, &run, RunStatus::Parked, None, None).await? {
        Some(run) => Ok(run),
        None => Err(wrong(load_run_required(tx, id).await?.status)),
    }
}

/// A run's (`$1`) calls still waiting for a person.
pub(crate) const WAITING_IN_RUN: &str = "run_id = $1 AND state IN ('awaiting_approval', 'awaiting_answer', 'awaiting_credential', 'in_doubt')";

/// `parked → running`, only when none of the run's calls still waits for a person; the run is
/// then held under `lease`, if given, in the same swap (LEDGER-56).
pub(crate) async fn resume_run(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    id: RunId,
    lease: Option<&RunLease>,
) -> Result<ResumeOutcome, LedgerError> {
    let run = load_run_required(tx, id).await?;
    if run.status != RunStatus::Parked {
        return Ok(ResumeOutcome::NotParked(run.status));
    }
    batch.flush(tx).await?;
    let waiting = tx
        .inner
        .fetch_optional(
            AssertSqlSafe(format!(
                "SELECT COUNT(*) AS n FROM invocations WHERE {WAITING_IN_RUN}"
            )),
            &[id.to_string().into()],
        )
        .await?
        .map(|r| r.req_int("n"))
        .transpose()?
        .unwrap_or(0);
    if waiting > 0 {
        return Ok(ResumeOutcome::StillWaiting);
    }
    match save_run(tx, batch, &run, RunStatus::Running, lease, None).await? {
        Some(_) => Ok(ResumeOutcome::Resumed),
        None => Ok(ResumeOutcome::NotParked(
            load_run_required(tx, id).await?.status,
        )),
    }
}

/// Ends a run: `succeeded`, `failed` or `cancelled`, with a reason.
pub(crate) async fn end_run(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    id: RunId,
    status: RunStatus,
    reason: Option<String>,
) -> Result<Run, LedgerError> {
    let run = load_run_required(tx, id).await?;
    if run.status.is_terminal() || !status.is_terminal() {
        return Err(LedgerError::RunWrongState {
            id,
            expected: RunStatus::Running,
            actual: run.status,
        });
    }
    match save_run(tx, batch, &run, status, None, reason).await? {
        Some(run) => Ok(run),
        None => Err(LedgerError::RunWrongState {
            id,
            expected: RunStatus::Running,
            actual: load_run_required(tx, id).await?.status,
        }),
    }
}

/// Cancels a run that has not ended (docs/rules.md AGENT-9): `cancelled`, and every call of it
/// still waiting for a person expires in the same commit, so no later decision runs anything
/// for it and no resumer finds it parked.
pub(crate) async fn cancel_run(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    id: RunId,
) -> Result<Run, LedgerError> {
    let run = end_run(
        tx,
        batch,
        id,
        RunStatus::Cancelled,
        Some("cancelled".into()),
    )
    .await?;
    batch.flush(tx).await?;
    let rows = tx
        .inner
        .fetch_all(
            AssertSqlSafe(format!("SELECT id FROM invocations WHERE {WAITING_IN_RUN}")),
            &[id.to_string().into()],
        )
        .await?;
    for row in rows {
        let text = row.req_text("id")?;
        let inv_id = text
            .parse()
            .map_err(|_| LedgerError::Invalid(format!("stored invocation id `{text}`")))?;
        let prev = batch.load_required(tx, inv_id).await?;
        if prev.state.is_parked() {
            let mut next = prev.clone();
            next.state = crate::vocabulary::state::InvocationState::Expired;
            batch.save(tx, &prev, next).await?;
        }
    }
    Ok(run)
}
