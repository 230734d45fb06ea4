//! The read side: rows read from the pool, outside any write transaction, each query a
//! snapshot of committed state. Expiry on read is the caller's step (see `ledger`), since it
//! writes.

use sqlx::AssertSqlSafe;

use crate::sql::db::{DbPool, SqlValue};
use crate::sql::row::{
    INVOCATION_COLUMNS, InvocationRow, RUN_COLUMNS, RunRow, SESSION_COLUMNS, SessionRow, open_rows,
};
use crate::vocabulary::error::LedgerError;
use crate::vocabulary::ids::{InvocationId, RunId, SessionId};
use crate::vocabulary::model::{Invocation, Run, Session};
use crate::vocabulary::state::InvocationState;

/// Rows waiting for a person — an approval, an answer, a credential, a proposal's decision,
/// and with `$6 = 1` a word on a call in doubt — filtered by tool (`$1`), principal (`$2`),
/// recorded before (`$3`) and state (`$5`), each when not null; ordered by the given `ORDER BY`,
/// `$7` rows skipped, at most `$4`. The states are written exactly as the partial index
/// `invocations_waiting` (migration 0028) names them and nothing else narrows the state, so both
/// backends read a page from that index in order and skip in it without reading the rows
/// (LEDGER-86).
macro_rules! pending_approvals {
    ($order:literal) => {
        concat!(
            "state IN ('awaiting_approval', 'awaiting_answer', 'awaiting_credential', 'proposed', 'in_doubt')",
            " AND ($6 = 1 OR state <> 'in_doubt')",
            " AND ($1 IS NULL OR tool = $1) AND ($2 IS NULL OR principal = $2) \
             AND ($3 IS NULL OR created_at <= $3) AND ($5 IS NULL OR state = $5) ORDER BY ",
            $order,
            " LIMIT $4 OFFSET $7"
        )
    };
}

/// [`pending_approvals!`], oldest first.
pub(crate) const PENDING_APPROVALS: &str = pending_approvals!("created_at, id");

/// [`pending_approvals!`], newest first (the inbox's order).
pub(crate) const PENDING_APPROVALS_NEWEST: &str = pending_approvals!("created_at DESC, id DESC");

/// Approved rows of no agent run nobody has claimed yet, oldest first, at most `$1`. A run's
/// approved call is claimed by the run itself when it resumes, under the run's own connections
/// (docs/rules.md AGENT-12). An approved proposal is the exception: its run never claims it
/// (the run was told it was not executed), so the worker runs it (AGENT-31).
pub(crate) const APPROVED_UNCLAIMED: &str = concat!(
    "state = 'approved' AND ",
    open_rows!(),
    " AND (run_id IS NULL OR mode = 'propose') ORDER BY created_at, id LIMIT $1"
);

/// A session's calls (`$1`), in the order they were recorded.
pub(crate) const SESSION_INVOCATIONS: &str = "session_id = $1 ORDER BY created_at, id";

/// A run's calls (`$1`), in the order they were recorded.
pub(crate) const RUN_INVOCATIONS: &str = "run_id = $1 ORDER BY created_at, id";

/// Rows in doubt, oldest first.
pub(crate) const IN_DOUBT: &str = concat!(
    "state = 'in_doubt' AND ",
    open_rows!(),
    " ORDER BY created_at, id"
);

/// Open rows counted by state; the partial index of open rows answers it without the table.
const OPEN_COUNTS: &str = concat!(
    "SELECT state, COUNT(*) AS n FROM invocations WHERE ",
    open_rows!(),
    " GROUP BY state"
);

/// How many rows are open in each open state, zero included (docs/rules.md OPS-30), in the
/// states' declaration order.
pub(crate) async fn open_counts(pool: &DbPool) -> Result<Vec<(InvocationState, u64)>, LedgerError> {
    let rows = pool.fetch_all(OPEN_COUNTS, &[]).await?;
    let mut counts: Vec<(InvocationState, u64)> = InvocationState::ALL
        .iter()
        .filter(|s| !s.is_terminal())
        .map(|s| (*s, 0))
        .collect();
    for r in &rows {
        let state = r.text("state")?.unwrap_or_default();
        let n = u64::try_from(r.int("n")?.unwrap_or(0)).unwrap_or(0);
        if let Some(slot) = counts.iter_mut().find(|(s, _)| s.as_str() == state) {
            slot.1 = n;
        }
    }
    Ok(counts)
}

/// A text bind that is null when absent.
pub(crate) fn text(v: Option<&str>) -> SqlValue {
    v.map(str::to_owned).into()
}

pub(crate) async fn invocation(pool: &DbPool, id: InvocationId) -> Result<Invocation, LedgerError> {
    let row = pool
        .fetch_optional(
            AssertSqlSafe(format!(
                "SELECT {INVOCATION_COLUMNS} FROM invocations WHERE id = $1"
            )),
            &[id.to_string().into()],
        )
        .await?
        .ok_or(LedgerError::NotFound(id))?;
    Invocation::try_from(InvocationRow::read(&row)?)
}

/// The invocations matching `where_` (one of the queries above) with `binds`.
pub(crate) async fn invocations(
    pool: &DbPool,
    where_: &str,
    binds: &[SqlValue],
) -> Result<Vec<Invocation>, LedgerError> {
    let rows = pool
        .fetch_all(
            AssertSqlSafe(format!(
                "SELECT {INVOCATION_COLUMNS} FROM invocations WHERE {where_}"
            )),
            binds,
        )
        .await?;
    rows.iter()
        .map(|r| Invocation::try_from(InvocationRow::read(r)?))
        .collect()
}

pub(crate) async fn session(pool: &DbPool, id: SessionId) -> Result<Session, LedgerError> {
    let row = pool
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

pub(crate) async fn run(pool: &DbPool, id: RunId) -> Result<Run, LedgerError> {
    let row = pool
        .fetch_optional(
            AssertSqlSafe(format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = $1")),
            &[id.to_string().into()],
        )
        .await?
        .ok_or(LedgerError::RunNotFound(id))?;
    Run::try_from(RunRow::read(&row)?)
}
