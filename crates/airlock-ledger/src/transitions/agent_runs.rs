//! What an agent run keeps beside its status (docs/rules.md AGENT-5, AGENT-8): its steps (the
//! model's turn and, once settled, the results it was shown) and its details (request, totals,
//! answer, and the sub-agent link). The runtime owns their JSON; the ledger stores and returns
//! it whole, so a resumed run rebuilds its conversation without asking the model again.
//!
//! Only the process that holds a run (its starter, or the one caller `resume_run` let resume
//! it) writes these rows, so each write is a plain upsert.
//!
//! A run's records share commits (docs/rules.md LEDGER-35): its start is the run row, its
//! details and the person's answer to what the session held; a step's commit carries the
//! results of the step before it; its ending carries its last steps and details.

use serde_json::Value;
use sqlx::AssertSqlSafe;

use crate::sql::db::{CountedWrite, DbPool, DbRow, SqlValue};
use crate::sql::row::{RUN_COLUMNS, RunRow};
use crate::sql::tx::LedgerTx;
use crate::transitions::batch::Batch;
use crate::transitions::confirmations::{self, Answered};
use crate::transitions::runs;
use crate::vocabulary::clock::to_micros;
use crate::vocabulary::error::LedgerError;
use crate::vocabulary::ids::{RunId, SessionId};
use crate::vocabulary::model::{NewRun, Run};
use crate::vocabulary::state::RunStatus;

/// One step of an agent run as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct RunStep {
    /// Its number, from 1.
    pub step: u32,
    /// The model's turn (the runtime's JSON).
    pub turn: Value,
    /// The results the model was shown, once every call of the step settled.
    pub results: Option<Value>,
}

/// What an agent run keeps besides its status.
#[derive(Debug, Clone, PartialEq)]
pub struct RunDetail {
    /// The run.
    pub run_id: RunId,
    /// For a sub-agent's run: the run and the call that started it.
    pub parent: Option<(RunId, String)>,
    /// The runtime's JSON (request, totals, answer); never a credential.
    pub detail: Value,
}

fn json_text(value: &Value) -> Result<String, LedgerError> {
    serde_json::to_string(value).map_err(|e| LedgerError::Invalid(e.to_string()))
}

fn json_value(text: &str) -> Result<Value, LedgerError> {
    serde_json::from_str(text).map_err(|e| LedgerError::Invalid(format!("stored run JSON: {e}")))
}

/// Starts run `id` with its details; `consent` (a person's message started it) answers what
/// its session held, in the same commit.
pub(crate) async fn start(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    new: NewRun,
    detail: &RunDetail,
    consent: Option<bool>,
) -> Result<(Run, Answered), LedgerError> {
    let session = new.session_id;
    let run = runs::create_run(tx, batch, detail.run_id, new).await?;
    save_detail(tx, batch, detail).await?;
    let answered = match consent {
        Some(consent) => confirmations::answer(tx, session, run.id, consent).await?,
        None => Answered::Nothing,
    };
    Ok((run, answered))
}

/// Stores `steps` and `detail`; returns the run's status as this commit sees it, so the loop
/// learns of a cancel by another process without a read of its own.
pub(crate) async fn save_steps(
    tx: &mut LedgerTx,
    batch: &Batch,
    steps: &[RunStep],
    detail: &RunDetail,
) -> Result<RunStatus, LedgerError> {
    let run = detail.run_id;
    let writes = steps_and_detail(tx, batch, steps, detail)?;
    let query = format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = $1");
    let (stored, row) = tx
        .inner
        .execute_counted_then(writes, &query, &[run.to_string().into()], true)
        .await?;
    if !stored {
        return Err(not_stored());
    }
    let row = row.ok_or(LedgerError::RunNotFound(run))?;
    Ok(Run::try_from(RunRow::read(&row)?)?.status)
}

/// Stores `steps` and `detail` and moves the run to `status`: parked, or ended (a cancel
/// cancels its nested runs too).
pub(crate) async fn finish(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    steps: &[RunStep],
    detail: &RunDetail,
    status: RunStatus,
    reason: Option<String>,
) -> Result<Run, LedgerError> {
    let id = detail.run_id;
    write_steps_and_detail(tx, batch, steps, detail).await?;
    match status {
        RunStatus::Parked => runs::park_run(tx, batch, id).await,
        RunStatus::Cancelled => {
            let run = runs::cancel_run(tx, batch, id).await?;
            cancel_nested(tx, batch, id).await?;
            Ok(run)
        }
        _ => runs::end_run(tx, batch, id, status, reason).await,
    }
}

pub(crate) async fn save_detail(
    tx: &mut LedgerTx,
    batch: &Batch,
    detail: &RunDetail,
) -> Result<(), LedgerError> {
    write_steps_and_detail(tx, batch, &[], detail).await
}

/// Upserts `steps` and `detail` (see [`steps_and_detail`]).
async fn write_steps_and_detail(
    tx: &mut LedgerTx,
    batch: &Batch,
    steps: &[RunStep],
    detail: &RunDetail,
) -> Result<(), LedgerError> {
    let writes = steps_and_detail(tx, batch, steps, detail)?;
    if tx.inner.execute_counted(writes).await? {
        Ok(())
    } else {
        Err(not_stored())
    }
}

/// Every row is inserted or updated: a short count would be a bug, reported as one.
fn not_stored() -> LedgerError {
    LedgerError::Invalid("an agent run's steps or details were not all stored".into())
}

/// The upserts of `steps` and `detail`: one statement on PostgreSQL (AGENT-55), however many
/// steps a commit carries — a step's commit was a round trip per table.
fn steps_and_detail(
    tx: &LedgerTx,
    batch: &Batch,
    steps: &[RunStep],
    detail: &RunDetail,
) -> Result<Vec<CountedWrite>, LedgerError> {
    let mut writes = Vec::with_capacity(2);
    if !steps.is_empty() {
        let mut binds: Vec<SqlValue> = Vec::with_capacity(steps.len() * 5);
        for step in steps {
            let results = step.results.as_ref().map(json_text).transpose()?;
            binds.extend([
                detail.run_id.to_string().into(),
                i64::from(step.step).into(),
                json_text(&step.turn)?.into(),
                results.into(),
                to_micros(batch.now).into(),
            ]);
        }
        writes.push(CountedWrite::rows(&tx.inner, 5, binds, false, |rows| {
            format!(
                "INSERT INTO run_steps (run_id, step, turn, results, created_at) {rows} \
                 ON CONFLICT (run_id, step) DO UPDATE SET turn = excluded.turn, \
                 results = excluded.results"
            )
        }));
    }
    let (parent, call) = match &detail.parent {
        Some((run, call)) => (Some(run.to_string()), Some(call.clone())),
        None => (None, None),
    };
    let binds = vec![
        detail.run_id.to_string().into(),
        parent.into(),
        call.into(),
        json_text(&detail.detail)?.into(),
        to_micros(batch.now).into(),
    ];
    writes.push(CountedWrite::rows(&tx.inner, 5, binds, false, |rows| {
        format!(
            "INSERT INTO run_details (run_id, parent_run_id, parent_call_id, detail, \
             updated_at) {rows} \
             ON CONFLICT (run_id) DO UPDATE SET detail = excluded.detail, \
             updated_at = excluded.updated_at"
        )
    }));
    Ok(writes)
}

pub(crate) async fn steps(pool: &DbPool, run: RunId) -> Result<Vec<RunStep>, LedgerError> {
    let rows = pool
        .fetch_all(
            "SELECT step, turn, results FROM run_steps WHERE run_id = $1 ORDER BY step",
            &[run.to_string().into()],
        )
        .await?;
    rows.iter().map(read_step).collect()
}

fn read_step(row: &DbRow) -> Result<RunStep, LedgerError> {
    let step = u32::try_from(row.req_int("step")?)
        .map_err(|_| LedgerError::Invalid("stored run step out of range".into()))?;
    Ok(RunStep {
        step,
        turn: json_value(&row.req_text("turn")?)?,
        results: row
            .text("results")?
            .as_deref()
            .map(json_value)
            .transpose()?,
    })
}

const DETAIL_COLUMNS: &str = "run_id, parent_run_id, parent_call_id, detail";

pub(crate) async fn detail(pool: &DbPool, run: RunId) -> Result<Option<RunDetail>, LedgerError> {
    let row = pool
        .fetch_optional(
            AssertSqlSafe(format!(
                "SELECT {DETAIL_COLUMNS} FROM run_details WHERE run_id = $1"
            )),
            &[run.to_string().into()],
        )
        .await?;
    row.as_ref().map(read_detail).transpose()
}

pub(crate) async fn child(
    pool: &DbPool,
    parent: RunId,
    call_id: &str,
) -> Result<Option<RunId>, LedgerError> {
    let row = pool
        .fetch_optional(
            "SELECT run_id FROM run_details WHERE parent_run_id = $1 AND parent_call_id = $2",
            &[parent.to_string().into(), call_id.into()],
        )
        .await?;
    row.map(|r| parse_run_id(&r.req_text("run_id")?))
        .transpose()
}

/// Runs of no parent in `status`s (a fixed list of words), oldest first, at most `limit`.
const ROOT_RUNS: &str =
    "id NOT IN (SELECT run_id FROM run_details WHERE parent_run_id IS NOT NULL)";

/// Only runs none of whose calls still waits for a person are listed: runs parked on a call
/// nobody decided (or in doubt) would otherwise fill every page and hide the resumable ones.
pub(crate) async fn parked_roots(pool: &DbPool, limit: u32) -> Result<Vec<RunId>, LedgerError> {
    let waiting = runs::WAITING_IN_RUN.replace("$1", "runs.id");
    let rows = pool
        .fetch_all(
            AssertSqlSafe(format!(
                "SELECT id FROM runs WHERE status = 'parked' AND {ROOT_RUNS} \
                 AND NOT EXISTS (SELECT 1 FROM invocations WHERE {waiting}) \
                 ORDER BY updated_at, id LIMIT $1"
            )),
            &[i64::from(limit).into()],
        )
        .await?;
    rows.iter()
        .map(|r| parse_run_id(&r.req_text("id")?))
        .collect()
}

pub(crate) async fn open_in_session(
    pool: &DbPool,
    session: SessionId,
) -> Result<Option<RunId>, LedgerError> {
    let row = pool
        .fetch_optional(
            AssertSqlSafe(format!(
                "SELECT id FROM runs WHERE session_id = $1 AND status IN ('running', 'parked') \
                 AND {ROOT_RUNS} ORDER BY created_at LIMIT 1"
            )),
            &[session.to_string().into()],
        )
        .await?;
    row.map(|r| parse_run_id(&r.req_text("id")?)).transpose()
}

/// Cancels every nested run under `root` that has not ended (docs/rules.md AGENT-34), in the
/// caller's transaction: the root's cancel and its tree's are one commit. Their waiting calls
/// carry the root's id (AGENT-21), so the root's cancel already expired them. The tree is walked
/// level by level; a run appears once (its parent link is unique), so the walk ends.
pub(crate) async fn cancel_nested(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    root: RunId,
) -> Result<(), LedgerError> {
    let mut level = vec![root];
    while !level.is_empty() {
        let mut next = Vec::new();
        for parent in level {
            let rows = tx
                .inner
                .fetch_all(
                    "SELECT run_id FROM run_details WHERE parent_run_id = $1",
                    &[parent.to_string().into()],
                )
                .await?;
            for row in rows {
                let child = parse_run_id(&row.req_text("run_id")?)?;
                end_if_open(tx, batch, child).await?;
                next.push(child);
            }
        }
        level = next;
    }
    Ok(())
}

async fn end_if_open(tx: &mut LedgerTx, batch: &mut Batch, id: RunId) -> Result<(), LedgerError> {
    let reason = Some("cancelled".to_owned());
    match runs::end_run(tx, batch, id, RunStatus::Cancelled, reason).await {
        // Already ended (completed or failed before the cancel): it keeps its outcome.
        Ok(_) | Err(LedgerError::RunWrongState { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

fn read_detail(row: &DbRow) -> Result<RunDetail, LedgerError> {
    let parent = match (row.text("parent_run_id")?, row.text("parent_call_id")?) {
        (Some(run), Some(call)) => Some((parse_run_id(&run)?, call)),
        _ => None,
    };
    Ok(RunDetail {
        run_id: parse_run_id(&row.req_text("run_id")?)?,
        parent,
        detail: json_value(&row.req_text("detail")?)?,
    })
}

fn parse_run_id(text: &str) -> Result<RunId, LedgerError> {
    text.parse()
        .map_err(|_| LedgerError::Invalid(format!("stored run id `{text}` is not an id")))
}
