//! The audit chain: every write to a ledger row appends an event to an append-only, hash-chained
//! table, and [`verify`] checks rows against it.
//!
//! Design. Each writer lane (see `writer`) owns one gapless chain `(lane, seq)`: event *n*
//! stores the previous event's hash and its own hash over (previous hash, lane, seq, entity,
//! id, version, state, row hash, time). The row hash is SHA-256 over the row's canonical content
//! as stored. So:
//! - editing a row's columns makes its content differ from the row hash of its latest event;
//! - deleting a row leaves events that name a row that is missing;
//! - editing or deleting an event breaks its lane's chain (hash or gap).
//!
//! Lanes exist so PostgreSQL can commit several batches at once: one global chain would need
//! one lock held across every commit's fsync, capping throughput at one fsync per write. Like any
//! hash chain without an external anchor, removing the newest events of a lane together with the
//! rows they describe is not detectable; anchoring lane heads elsewhere closes that.

use std::collections::HashMap;

use airlock_spec::sha256_hex;
use time::OffsetDateTime;

use crate::sql::db::{CountedWrite, DbPool, DbTx, SqlValue};
use crate::sql::row::{
    INVOCATION_COLUMNS, InvocationRow, RUN_COLUMNS, RunRow, SESSION_COLUMNS, SessionRow,
    content_hash,
};
use crate::vocabulary::clock::to_micros;
use crate::vocabulary::error::LedgerError;
use crate::vocabulary::model::{AuditReport, ChainBreak};

/// The hash that starts every lane.
pub(crate) const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The last event of `lane`, or the genesis position.
pub(crate) async fn head(tx: &mut DbTx, lane: i64) -> Result<(i64, String), sqlx::Error> {
    let row = tx
        .fetch_optional(
            "SELECT seq, hash FROM ledger_events WHERE lane = $1 ORDER BY seq DESC LIMIT 1",
            &[SqlValue::Int(lane)],
        )
        .await?;
    Ok(match row {
        Some(r) => (r.req_int("seq")?, r.req_text("hash")?),
        None => (0, GENESIS.to_owned()),
    })
}

struct EventFields<'a> {
    lane: i64,
    seq: i64,
    entity: &'a str,
    entity_id: &'a str,
    version: i64,
    state: &'a str,
    row_hash: &'a str,
    at: i64,
}

fn event_hash(prev: &str, e: &EventFields<'_>) -> String {
    let text = format!(
        "{prev}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}",
        e.lane, e.seq, e.entity, e.entity_id, e.version, e.state, e.row_hash, e.at
    );
    sha256_hex(text.as_bytes())
}

/// One audit event, computed when its row was written and inserted at the end of the batch.
struct Event {
    lane: i64,
    seq: i64,
    entity: &'static str,
    entity_id: String,
    version: i64,
    state: String,
    row_hash: String,
    prev_hash: String,
    hash: String,
    at: i64,
}

/// One lane's chain inside a write transaction: the head it continues from, and the events
/// chained since, which [`Chain::take`] inserts in one statement per chunk at the end of the
/// batch (events are never read inside the transaction, so queueing them saves a round trip
/// per write).
pub(crate) struct Chain {
    lane: i64,
    head: (i64, String),
    events: Vec<Event>,
}

impl Chain {
    /// Continues `lane` from `head`, its last event's (seq, hash) (see [`head`]).
    pub(crate) fn new(lane: i64, head: (i64, String)) -> Self {
        Self {
            lane,
            head,
            events: Vec::new(),
        }
    }

    /// Chains the event for a row that was just inserted or updated in this transaction.
    pub(crate) fn append(
        &mut self,
        now: OffsetDateTime,
        entity: &'static str,
        entity_id: &str,
        version: i64,
        state: &str,
        row_hash: &str,
    ) {
        let (prev_seq, prev_hash) = std::mem::take(&mut self.head);
        let fields = EventFields {
            lane: self.lane,
            seq: prev_seq + 1,
            entity,
            entity_id,
            version,
            state,
            row_hash,
            at: to_micros(now),
        };
        let hash = event_hash(&prev_hash, &fields);
        self.head = (fields.seq, hash.clone());
        self.events.push(Event {
            lane: fields.lane,
            seq: fields.seq,
            entity,
            entity_id: entity_id.to_owned(),
            version,
            state: state.to_owned(),
            row_hash: row_hash.to_owned(),
            prev_hash,
            hash,
            at: fields.at,
        });
    }

    /// The queued events as insert statements, a chunk per statement; empties the queue.
    pub(crate) fn take(&mut self, tx: &DbTx) -> Vec<CountedWrite> {
        let locked = tx.lane_locked(self.lane);
        let writes = self
            .events
            .chunks(EVENTS_PER_INSERT)
            .map(|chunk| {
                let binds = chunk.iter().flat_map(Event::binds).collect();
                CountedWrite::rows(tx, 10, binds, false, |rows| {
                    format!(
                        "INSERT INTO ledger_events (lane, seq, entity, entity_id, version, \
                         state, row_hash, prev_hash, hash, at) {rows}{locked}"
                    )
                })
            })
            .collect();
        self.events.clear();
        writes
    }

    /// The lane's last event (seq, hash), once the transaction has committed.
    pub(crate) fn into_head(self) -> (i64, String) {
        self.head
    }
}

/// Events per INSERT: 10 parameters each stays far below both backends' parameter limits.
const EVENTS_PER_INSERT: usize = 200;

impl Event {
    fn binds(&self) -> [SqlValue; 10] {
        [
            SqlValue::Int(self.lane),
            SqlValue::Int(self.seq),
            SqlValue::Text(self.entity.to_owned()),
            SqlValue::Text(self.entity_id.clone()),
            SqlValue::Int(self.version),
            SqlValue::Text(self.state.clone()),
            SqlValue::Text(self.row_hash.clone()),
            SqlValue::Text(self.prev_hash.clone()),
            SqlValue::Text(self.hash.clone()),
            SqlValue::Int(self.at),
        ]
    }
}

/// The latest (version, row hash) the chain holds for each row.
type Latest = HashMap<(String, String), (i64, String)>;

/// Walks every lane and every row, all in one read snapshot (a commit made meanwhile by a
/// serving gateway is wholly in it or wholly out); reports the first break.
pub(crate) async fn verify(pool: &DbPool) -> Result<AuditReport, LedgerError> {
    let mut tx = pool.begin_read().await?;
    let report = verify_in(&mut tx).await;
    // Read-only: ending it either way changes nothing.
    let _ = tx.rollback().await;
    report
}

async fn verify_in(tx: &mut DbTx) -> Result<AuditReport, LedgerError> {
    let mut report = AuditReport {
        events: 0,
        rows: 0,
        first_break: None,
    };
    let mut latest = Latest::new();
    if let Some(b) = walk_lanes(tx, &mut report, &mut latest).await? {
        report.first_break = Some(b);
        return Ok(report);
    }
    report.first_break = check_rows(tx, &mut report, &mut latest).await?;
    Ok(report)
}

async fn walk_lanes(
    tx: &mut DbTx,
    report: &mut AuditReport,
    latest: &mut Latest,
) -> Result<Option<ChainBreak>, LedgerError> {
    // TODO-perf(#4): stream events instead of loading them all for very large ledgers.
    let rows = tx
        .fetch_all(
            "SELECT lane, seq, entity, entity_id, version, state, row_hash, prev_hash, hash, at \
             FROM ledger_events ORDER BY lane, seq",
            &[],
        )
        .await?;
    let mut lane_pos: Option<(i64, i64, String)> = None;
    for r in rows {
        report.events += 1;
        let (lane, seq) = (r.req_int("lane")?, r.req_int("seq")?);
        let (entity, entity_id) = (r.req_text("entity")?, r.req_text("entity_id")?);
        let (state, row_hash) = (r.req_text("state")?, r.req_text("row_hash")?);
        let (prev_hash, hash) = (r.req_text("prev_hash")?, r.req_text("hash")?);
        let version = r.req_int("version")?;
        let (expect_seq, expect_prev) = match &lane_pos {
            Some((l, s, h)) if *l == lane => (s + 1, h.clone()),
            _ => (1, GENESIS.to_owned()),
        };
        let broken = |reason: String| ChainBreak {
            entity: entity.clone(),
            id: entity_id.clone(),
            reason: format!("audit event {lane}/{seq}: {reason}"),
        };
        if seq != expect_seq {
            return Ok(Some(broken(format!(
                "events missing before it (expected seq {expect_seq}); rows were deleted"
            ))));
        }
        if prev_hash != expect_prev {
            return Ok(Some(broken("does not chain to the previous event".into())));
        }
        let fields = EventFields {
            lane,
            seq,
            entity: &entity,
            entity_id: &entity_id,
            version,
            state: &state,
            row_hash: &row_hash,
            at: r.req_int("at")?,
        };
        if event_hash(&prev_hash, &fields) != hash {
            return Ok(Some(broken("the event was edited".into())));
        }
        let key = (entity.clone(), entity_id.clone());
        let newer = latest.get(&key).is_none_or(|(v, _)| version >= *v);
        if newer {
            latest.insert(key, (version, row_hash));
        }
        lane_pos = Some((lane, seq, hash));
    }
    Ok(None)
}

async fn check_rows(
    tx: &mut DbTx,
    report: &mut AuditReport,
    latest: &mut Latest,
) -> Result<Option<ChainBreak>, LedgerError> {
    let sessions = tx
        .fetch_all(
            sqlx::AssertSqlSafe(format!(
                "SELECT {SESSION_COLUMNS} FROM sessions ORDER BY created_at, id"
            )),
            &[],
        )
        .await?;
    for r in &sessions {
        let row = SessionRow::read(r)?;
        if let Some(b) = check_one(latest, "session", &row.id, 1, &content_hash(&row)) {
            return Ok(Some(b));
        }
        report.rows += 1;
    }
    let runs = tx
        .fetch_all(
            sqlx::AssertSqlSafe(format!(
                "SELECT {RUN_COLUMNS} FROM runs ORDER BY created_at, id"
            )),
            &[],
        )
        .await?;
    for r in &runs {
        let row = RunRow::read(r)?;
        if let Some(b) = check_one(latest, "run", &row.id, row.version, &content_hash(&row)) {
            return Ok(Some(b));
        }
        report.rows += 1;
    }
    let invocations = tx
        .fetch_all(
            sqlx::AssertSqlSafe(format!(
                "SELECT {INVOCATION_COLUMNS} FROM invocations ORDER BY created_at, id"
            )),
            &[],
        )
        .await?;
    for r in &invocations {
        let row = InvocationRow::read(r)?;
        let hash = content_hash(&row);
        if let Some(b) = check_one(latest, "invocation", &row.id, row.version, &hash) {
            return Ok(Some(b));
        }
        report.rows += 1;
    }
    // Whatever is left in `latest` has events but no row: it was deleted.
    let mut missing: Vec<_> = latest.drain().collect();
    missing.sort();
    Ok(missing
        .into_iter()
        .next()
        .map(|((entity, id), _)| ChainBreak {
            entity,
            id,
            reason: "the audit chain records this row but it is missing: it was deleted".into(),
        }))
}

fn check_one(
    latest: &mut Latest,
    entity: &str,
    id: &str,
    version: i64,
    hash: &str,
) -> Option<ChainBreak> {
    let broken = |reason: &str| {
        Some(ChainBreak {
            entity: entity.to_owned(),
            id: id.to_owned(),
            reason: reason.to_owned(),
        })
    };
    match latest.remove(&(entity.to_owned(), id.to_owned())) {
        None => broken("the row has no audit events: it was inserted outside the ledger"),
        Some((v, _)) if v != version => {
            broken("the row's version differs from its last audit event: it was edited")
        }
        Some((_, h)) if h != hash => {
            broken("the row's content differs from its last audit event: it was edited")
        }
        Some(_) => None,
    }
}
