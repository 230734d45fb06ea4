//! The confirmation gate's stored state (docs/rules.md POLICY-30..POLICY-35): per session at
//! most one call of a `confirm: true` action waiting for the person's consent.
//!
//! Guarantees:
//! - holding a call replaces whatever the session held (one per session, POLICY-31);
//! - only a waiting call can be granted, and only by the run a person's message started;
//!   any other answer removes it (POLICY-33);
//! - a grant lets exactly one call through: the first call of the granted run with the same
//!   tool and arguments fingerprint takes it in one compare-and-swap, and only that call (by
//!   its call id, so a resumed run finds it again) is ever let through by it (POLICY-34).
//!
//! The runtime owns the words and the fingerprint; this module stores and swaps.

use serde_json::Value;

use crate::sql::db::{DbPool, DbRow};
use crate::sql::tx::LedgerTx;
use crate::transitions::batch::Batch;
use crate::vocabulary::clock::to_micros;
use crate::vocabulary::error::LedgerError;
use crate::vocabulary::ids::{RunId, SessionId};

/// A call held for the person's consent.
#[derive(Debug, Clone, PartialEq)]
pub struct Confirmation {
    /// The session (of the root run) the person talks in.
    pub session_id: SessionId,
    /// The root run whose model made the call.
    pub run_id: RunId,
    /// The tool's final name.
    pub tool: String,
    /// The runtime's fingerprint of the arguments.
    pub fingerprint: String,
    /// The arguments, for the notice the person reads.
    pub arguments: Value,
    /// The run the person's consent started, once given.
    pub granted_run: Option<RunId>,
    /// The call the consent let through, once used.
    pub used_by_call: Option<String>,
}

/// What a person's message did to the session's held call.
#[derive(Debug, Clone, PartialEq)]
pub enum Answered {
    /// Nothing was held.
    Nothing,
    /// The held call is granted to the run the message started.
    Granted(Confirmation),
    /// The held call was removed (the message was not a consent, or the hold was stale).
    Cancelled(Confirmation),
}

fn json_text(value: &Value) -> Result<String, LedgerError> {
    serde_json::to_string(value).map_err(|e| LedgerError::Invalid(e.to_string()))
}

const COLUMNS: &str = "session_id, run_id, tool, fingerprint, arguments, granted_run, used_by_call";

pub(crate) async fn hold(
    tx: &mut LedgerTx,
    batch: &Batch,
    held: &Confirmation,
) -> Result<(), LedgerError> {
    tx.inner
        .execute(
            "INSERT INTO confirmations (session_id, run_id, tool, fingerprint, arguments, \
             granted_run, used_by_call, created_at) VALUES ($1, $2, $3, $4, $5, NULL, NULL, $6) \
             ON CONFLICT (session_id) DO UPDATE SET run_id = $2, tool = $3, fingerprint = $4, \
             arguments = $5, granted_run = NULL, used_by_call = NULL, created_at = $6",
            &[
                held.session_id.to_string().into(),
                held.run_id.to_string().into(),
                held.tool.clone().into(),
                held.fingerprint.clone().into(),
                json_text(&held.arguments)?.into(),
                to_micros(batch.now).into(),
            ],
        )
        .await?;
    Ok(())
}

/// The person's message in `session` started run `run`; `consent` says whether it is one.
pub(crate) async fn answer(
    tx: &mut LedgerTx,
    session: SessionId,
    run: RunId,
    consent: bool,
) -> Result<Answered, LedgerError> {
    let row = tx
        .inner
        .fetch_optional(
            sqlx::AssertSqlSafe(format!(
                "SELECT {COLUMNS} FROM confirmations WHERE session_id = $1"
            )),
            &[session.to_string().into()],
        )
        .await?;
    let Some(mut held) = row.as_ref().map(read).transpose()? else {
        return Ok(Answered::Nothing);
    };
    let waiting = held.granted_run.is_none() && held.used_by_call.is_none();
    if consent && waiting {
        tx.inner
            .execute(
                "UPDATE confirmations SET granted_run = $2 WHERE session_id = $1",
                &[session.to_string().into(), run.to_string().into()],
            )
            .await?;
        held.granted_run = Some(run);
        return Ok(Answered::Granted(held));
    }
    tx.inner
        .execute(
            "DELETE FROM confirmations WHERE session_id = $1",
            &[session.to_string().into()],
        )
        .await?;
    Ok(Answered::Cancelled(held))
}

/// Whether call `call_id` of run `run` may go through on the consent given in `session` for
/// `tool` with arguments `fingerprint`: it takes the unused grant, or is the call that took it.
pub(crate) async fn take(
    tx: &mut LedgerTx,
    session: SessionId,
    run: RunId,
    (tool, fingerprint): (&str, &str),
    call_id: &str,
) -> Result<bool, LedgerError> {
    // RETURNING, not a row count: on SQLite the count of a statement sent behind `BEGIN`
    // can include an earlier statement's changes.
    let taken = tx
        .inner
        .fetch_optional(
            "UPDATE confirmations SET used_by_call = $5 WHERE session_id = $1 \
             AND granted_run = $2 AND tool = $3 AND fingerprint = $4 \
             AND (used_by_call IS NULL OR used_by_call = $5) RETURNING session_id",
            &[
                session.to_string().into(),
                run.to_string().into(),
                tool.into(),
                fingerprint.into(),
                call_id.into(),
            ],
        )
        .await?;
    Ok(taken.is_some())
}

pub(crate) async fn held(
    pool: &DbPool,
    session: SessionId,
) -> Result<Option<Confirmation>, LedgerError> {
    let row = pool
        .fetch_optional(
            sqlx::AssertSqlSafe(format!(
                "SELECT {COLUMNS} FROM confirmations WHERE session_id = $1"
            )),
            &[session.to_string().into()],
        )
        .await?;
    row.as_ref().map(read).transpose()
}

fn read(row: &DbRow) -> Result<Confirmation, LedgerError> {
    let id = |text: String| -> Result<RunId, LedgerError> {
        text.parse()
            .map_err(|_| LedgerError::Invalid(format!("stored run id `{text}` is not an id")))
    };
    let session = row.req_text("session_id")?;
    Ok(Confirmation {
        session_id: session.parse().map_err(|_| {
            LedgerError::Invalid(format!("stored session id `{session}` is not an id"))
        })?,
        run_id: id(row.req_text("run_id")?)?,
        tool: row.req_text("tool")?,
        fingerprint: row.req_text("fingerprint")?,
        arguments: serde_json::from_str(&row.req_text("arguments")?)
            .map_err(|e| LedgerError::Invalid(format!("stored confirmation JSON: {e}")))?,
        granted_run: row.text("granted_run")?.map(id).transpose()?,
        used_by_call: row.text("used_by_call")?,
    })
}
