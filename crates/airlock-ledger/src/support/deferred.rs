//! Deferred row writes: the new rows and the compare-and-swaps of a batch, written in one
//! statement each.
//!
//! Why. One statement per write means one round trip per job to the PostgreSQL server, which is
//! most of a batch's time, and on SQLite a statement to prepare, bind and run per job. In every batch but a transactional
//! tool's, a save queues its update here instead (the batch's `rows` already show the new row to later jobs),
//! and the batch writes them all with `UPDATE … FROM (rows)` before its audit events; a
//! record queues its row for one multi-row `INSERT … ON CONFLICT DO NOTHING` the same way (the
//! rows: `VALUES` on SQLite, arrays through `unnest` on PostgreSQL, see `db`).
//!
//! A queued insert assumes its (session, call id) is new: the batch checks its own queue, and
//! if the database already holds the call (recorded before, or by another process) the insert
//! count falls short and the batch is retried job by job — a lone job once more with immediate
//! writes — where the conflict is answered with the existing row.
//!
//! Guarantees. Every entry keeps its compare-and-swap: a row is updated only if its state and
//! version are still the ones its job read, and two saves of one row collapse into one entry
//! that checks the first read. If any row lost its swap (another process or lane changed it
//! meanwhile), the updated count falls short, the flush fails, and the writer rolls the batch
//! back and retries each job alone, where saves are immediate and a lost swap is refused
//! exactly as before. Code that reads invocations from the database flushes first (see
//! `Batch::flush`), so no statement reads around a queued write.

use std::collections::{HashMap, HashSet};

use crate::sql::db::{CountedWrite, DbTx, SqlValue};
use crate::sql::row::{INVOCATION_COLUMNS, InvocationRow, SESSION_COLUMNS, SessionRow};
use crate::vocabulary::ids::{InvocationId, SessionId};
use crate::vocabulary::state::InvocationState;

/// The columns a transition may change, in bind order after (id, expected state, version).
const SET_COLUMNS: [&str; 20] = [
    "state",
    "version",
    "result",
    "error_kind",
    "error_message",
    "decided_by",
    "decision",
    "decision_reason",
    "decided_at",
    "resolved_by",
    "resolution",
    "resolution_note",
    "resolved_at",
    "expires_at",
    "lease_owner",
    "lease_deadline",
    "attempts",
    "updated_at",
    "approved_arguments",
    "credential_use",
];

/// Binds per compare-and-swap.
const BINDS: usize = 3 + SET_COLUMNS.len();

/// Rows per statement: far below both backends' parameter limits.
const ROWS_PER_UPDATE: usize = 200;

/// The binds of one compare-and-swap: id, expected state and version, then the new values.
pub(crate) fn cas_binds(
    prev_state: InvocationState,
    prev_version: i64,
    row: &InvocationRow,
) -> Vec<SqlValue> {
    vec![
        row.id.clone().into(),
        prev_state.as_str().into(),
        prev_version.into(),
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
        row.lease_owner.clone().into(),
        row.lease_deadline.into(),
        row.attempts.into(),
        row.updated_at.into(),
        row.approved_arguments.clone().into(),
        row.credential_use.clone().into(),
    ]
}

/// The single-row compare-and-swap (binds from [`cas_binds`]).
pub(crate) fn cas_sql() -> String {
    let set: Vec<String> = SET_COLUMNS
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{c} = ${}", i + 4))
        .collect();
    format!(
        "UPDATE invocations SET {} WHERE id = $1 AND state = $2 AND version = $3",
        set.join(", ")
    )
}

struct Update {
    prev_state: InvocationState,
    prev_version: i64,
    row: InvocationRow,
}

/// The inserts and updates a batch has queued (one update per row).
#[derive(Default)]
pub(crate) struct Deferred {
    /// New sessions, written before the invocations that may name them.
    sessions: Vec<SessionRow>,
    inserts: Vec<InvocationRow>,
    calls: HashSet<(String, String)>,
    updates: Vec<Update>,
    index: HashMap<InvocationId, usize>,
}

/// Columns of an invocation row.
const ROW_COLUMNS: usize = crate::sql::row::INVOCATION_COLUMN_COUNT;

/// Columns of a session row.
const SESSION_COLUMN_COUNT: usize = 5;

impl Deferred {
    /// Queues a new session (a duplicate id fails the batch, and its job alone then reports it).
    pub(crate) fn push_session(&mut self, row: SessionRow) {
        self.sessions.push(row);
    }

    /// The principal of a session this batch queued (not yet in the shared cache, which only
    /// holds committed or read sessions).
    pub(crate) fn queued_session(&self, id: SessionId) -> Option<Option<String>> {
        let id = id.to_string();
        self.sessions
            .iter()
            .find(|s| s.id == id)
            .map(|s| s.principal.clone())
    }

    /// Queues a new row; `false` (nothing queued) if the batch already queued its call.
    pub(crate) fn push_insert(&mut self, row: &InvocationRow) -> bool {
        if !self
            .calls
            .insert((row.session_id.clone(), row.call_id.clone()))
        {
            return false;
        }
        self.inserts.push(row.clone());
        true
    }

    /// Queues `row` over the row `id` read as (`prev_state`, `prev_version`). A second save of
    /// the same row replaces the new values but keeps checking the first read.
    pub(crate) fn push(
        &mut self,
        id: InvocationId,
        prev_state: InvocationState,
        prev_version: i64,
        row: InvocationRow,
    ) {
        if let Some(&i) = self.index.get(&id) {
            self.updates[i].row = row;
            return;
        }
        self.index.insert(id, self.updates.len());
        self.updates.push(Update {
            prev_state,
            prev_version,
            row,
        });
    }

    /// The queued rows as statements, new ones first (updates may be of them), and empties
    /// the queue.
    pub(crate) fn take(&mut self, tx: &DbTx) -> Vec<CountedWrite> {
        let mut writes = Vec::new();
        for chunk in self.sessions.chunks(ROWS_PER_UPDATE) {
            let binds = chunk.iter().flat_map(SessionRow::binds).collect();
            writes.push(CountedWrite::rows(
                tx,
                SESSION_COLUMN_COUNT,
                binds,
                false,
                |rows| format!("INSERT INTO sessions ({SESSION_COLUMNS}) {rows}"),
            ));
        }
        // An invocation's session must exist when its row is checked against the foreign key:
        // SQLite runs the statements in order; PostgreSQL checks the key when the statement
        // ends, after all of its writes, so a session written beside the call in the same
        // statement counts (and a batch of new sessions and their calls stays one statement).
        for chunk in self.inserts.chunks(ROWS_PER_UPDATE) {
            let binds = chunk.iter().flat_map(InvocationRow::binds).collect();
            writes.push(CountedWrite::rows(
                tx,
                ROW_COLUMNS,
                binds,
                false,
                insert_sql,
            ));
        }
        let inserted: HashSet<&str> = self.inserts.iter().map(|r| r.id.as_str()).collect();
        for chunk in self.updates.chunks(ROWS_PER_UPDATE) {
            let sees_earlier = chunk.iter().any(|u| inserted.contains(u.row.id.as_str()));
            writes.push(CountedWrite::rows(
                tx,
                BINDS,
                chunk_binds(chunk),
                sees_earlier,
                update_sql,
            ));
        }
        self.sessions.clear();
        self.inserts.clear();
        self.calls.clear();
        self.updates.clear();
        self.index.clear();
        writes
    }

    /// Writes the queued rows; fails if a call was already recorded or a row lost its
    /// compare-and-swap.
    pub(crate) async fn flush(&mut self, tx: &mut DbTx) -> Result<(), sqlx::Error> {
        let writes = self.take(tx);
        if tx.execute_counted(writes).await? {
            Ok(())
        } else {
            Err(lost_race())
        }
    }
}

/// What a lost race reports; see [`is_lost_race`].
const LOST_RACE: &str =
    "a batched write met a call recorded or changed meanwhile; retrying the jobs one by one";

/// Why a batch is retried job by job: one of its queued writes met a row that was not as its
/// job read it.
pub(crate) fn lost_race() -> sqlx::Error {
    sqlx::Error::Protocol(LOST_RACE.into())
}

/// Whether `e` is [`lost_race`]'s.
pub(crate) fn is_lost_race(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Protocol(m) if m == LOST_RACE)
}

fn chunk_binds(chunk: &[Update]) -> Vec<SqlValue> {
    let mut binds = Vec::with_capacity(chunk.len() * BINDS);
    for u in chunk {
        binds.extend(cas_binds(u.prev_state, u.prev_version, &u.row));
    }
    binds
}

fn insert_sql(rows: &str) -> String {
    format!(
        "INSERT INTO invocations ({INVOCATION_COLUMNS}) {rows} \
         ON CONFLICT (session_id, call_id) DO NOTHING"
    )
}

/// `UPDATE … FROM (rows) AS v`, the rows' columns named `column1, column2, …`.
fn update_sql(rows: &str) -> String {
    let set: Vec<String> = SET_COLUMNS
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{c} = v.column{}", i + 4))
        .collect();
    format!(
        "UPDATE invocations SET {} FROM ({rows}) AS v \
         WHERE invocations.id = v.column1 AND invocations.state = v.column2 \
         AND invocations.version = v.column3",
        set.join(", "),
    )
}
