//! The audit chain read for export (docs/rules.md LEDGER-80): every chained event in chain
//! order with the row it describes, every freeze and unfreeze, and every accepted tool pin —
//! all in one read snapshot, so a serving gateway's commits are wholly in it or wholly out.
//!
//! Guarantees: read-only; events come in the order of their commits' times (then lane and
//! position: on PostgreSQL each lane is a chain of its own, and a row's later version may sit
//! on a lower lane), and each keeps its chain position, which never changes once written — so
//! the same ledger read twice yields the same events, and an export made from them can name
//! each by its position. The rows are as they are now: what
//! an exporter shows of an older event must be what a row never changes once written.

use std::collections::HashMap;

use time::OffsetDateTime;

use crate::sql::db::{DbPool, DbTx};
use crate::sql::row::{
    INVOCATION_COLUMNS, InvocationRow, RUN_COLUMNS, RunRow, SESSION_COLUMNS, SessionRow,
};
use crate::transitions::freezes::FreezeTarget;
use crate::vocabulary::clock::from_micros;
use crate::vocabulary::error::LedgerError;
use crate::vocabulary::model::{Invocation, Run, Session};

/// One event of the audit chain: a row written (its version, its state).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainEvent {
    /// The writer lane whose chain holds it.
    pub lane: i64,
    /// Its position in the lane, from 1, gapless.
    pub seq: i64,
    /// When its commit was made.
    pub at: OffsetDateTime,
    /// `session`, `run` or `invocation`.
    pub entity: String,
    /// The row's id.
    pub entity_id: String,
    /// The row's version it records.
    pub version: i64,
    /// The row's state (a run's status) it records.
    pub state: String,
    /// The event's hash in its chain.
    pub hash: String,
}

/// A freeze or an unfreeze, as `freeze_events` keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FreezeEvent {
    /// What was frozen.
    pub target: FreezeTarget,
    /// `freeze` or `unfreeze`.
    pub action: String,
    /// The operator's reason.
    pub reason: String,
    /// Who.
    pub by: String,
    /// When.
    pub at: OffsetDateTime,
}

/// An accepted tool definition of a connection file, as `tool_pins` keeps it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinEvent {
    /// The connection.
    pub connection: String,
    /// The server's tool name.
    pub tool: String,
    /// SHA-256 of the accepted definition as stored.
    pub definition_hash: String,
    /// Who accepted it (`boot` for a connection's first pins).
    pub by: String,
    /// When.
    pub at: OffsetDateTime,
}

/// Everything an audit export is made of, read in one snapshot.
#[derive(Debug, Default)]
pub struct AuditTrail {
    /// The chain's events, by time, then lane and position.
    pub events: Vec<ChainEvent>,
    /// The rows the events describe, by id.
    pub sessions: HashMap<String, Session>,
    /// See [`AuditTrail::sessions`].
    pub runs: HashMap<String, Run>,
    /// See [`AuditTrail::sessions`].
    pub invocations: HashMap<String, Invocation>,
    /// Freezes and unfreezes, oldest first.
    pub freezes: Vec<FreezeEvent>,
    /// The pins in force, oldest first.
    pub pins: Vec<PinEvent>,
}

/// Reads the whole trail in one read snapshot.
pub(crate) async fn read(pool: &DbPool) -> Result<AuditTrail, LedgerError> {
    let mut tx = pool.begin_read().await?;
    let trail = read_in(&mut tx).await;
    // Read-only: ending it either way changes nothing.
    let _ = tx.rollback().await;
    trail
}

async fn read_in(tx: &mut DbTx) -> Result<AuditTrail, LedgerError> {
    let mut trail = AuditTrail {
        events: events(tx).await?,
        ..AuditTrail::default()
    };
    let sql =
        |columns: &str, table: &str| sqlx::AssertSqlSafe(format!("SELECT {columns} FROM {table}"));
    for r in tx.fetch_all(sql(SESSION_COLUMNS, "sessions"), &[]).await? {
        let row = Session::try_from(SessionRow::read(&r)?)?;
        trail.sessions.insert(row.id.to_string(), row);
    }
    for r in tx.fetch_all(sql(RUN_COLUMNS, "runs"), &[]).await? {
        let row = Run::try_from(RunRow::read(&r)?)?;
        trail.runs.insert(row.id.to_string(), row);
    }
    for r in tx
        .fetch_all(sql(INVOCATION_COLUMNS, "invocations"), &[])
        .await?
    {
        let row = Invocation::try_from(InvocationRow::read(&r)?)?;
        trail.invocations.insert(row.id.to_string(), row);
    }
    trail.freezes = freezes(tx).await?;
    trail.pins = pins(tx).await?;
    Ok(trail)
}

fn time(column: &str, micros: i64) -> Result<OffsetDateTime, LedgerError> {
    from_micros(micros).ok_or_else(|| LedgerError::Invalid(format!("stored {column} {micros}")))
}

async fn events(tx: &mut DbTx) -> Result<Vec<ChainEvent>, LedgerError> {
    let rows = tx
        .fetch_all(
            "SELECT lane, seq, entity, entity_id, version, state, hash, at \
             FROM ledger_events ORDER BY at, lane, seq",
            &[],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok(ChainEvent {
                lane: r.req_int("lane")?,
                seq: r.req_int("seq")?,
                at: time("at", r.req_int("at")?)?,
                entity: r.req_text("entity")?,
                entity_id: r.req_text("entity_id")?,
                version: r.req_int("version")?,
                state: r.req_text("state")?,
                hash: r.req_text("hash")?,
            })
        })
        .collect()
}

async fn freezes(tx: &mut DbTx) -> Result<Vec<FreezeEvent>, LedgerError> {
    let rows = tx
        .fetch_all(
            "SELECT kind, name, action, reason, by_whom, at FROM freeze_events \
             ORDER BY at, kind, name, action",
            &[],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok(FreezeEvent {
                target: FreezeTarget::parse(&r.req_text("kind")?, &r.req_text("name")?)?,
                action: r.req_text("action")?,
                reason: r.req_text("reason")?,
                by: r.req_text("by_whom")?,
                at: time("at", r.req_int("at")?)?,
            })
        })
        .collect()
}

async fn pins(tx: &mut DbTx) -> Result<Vec<PinEvent>, LedgerError> {
    let rows = tx
        .fetch_all(
            "SELECT connection, tool, definition, pinned_by, pinned_at FROM tool_pins \
             ORDER BY pinned_at, connection, tool",
            &[],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok(PinEvent {
                connection: r.req_text("connection")?,
                tool: r.req_text("tool")?,
                definition_hash: airlock_spec::sha256_hex(r.req_text("definition")?.as_bytes()),
                by: r.req_text("pinned_by")?,
                at: time("pinned_at", r.req_int("pinned_at")?)?,
            })
        })
        .collect()
}
