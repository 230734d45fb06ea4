//! The outbox's rows as the state machine makes them (docs/rules.md LEDGER-30, LEDGER-31):
//! which transition is an event a person is told about, what the event says, and the insert
//! that commits it in the same transaction as the transition.
//!
//! Guarantees. An event row is made only for a configured destination that asked for that
//! event; with none configured nothing is made and the batch writes exactly what it wrote
//! before. The payload is built from the row as saved and holds no arguments, no result and
//! no answer's text (they may hold personal data): names, ids, states, who decided, a denial's
//! reason. Each row has its own delivery id, kept on every retry.

use std::sync::Arc;

use airlock_spec::NotifyEvent;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use uuid::Uuid;

use crate::sql::db::{CountedWrite, DbTx, SqlValue};
use crate::vocabulary::clock::to_micros;
use crate::vocabulary::ids::InvocationId;
use crate::vocabulary::model::Invocation;
use crate::vocabulary::state::{DecisionKind, InvocationState as S};

/// One destination of the outbox and the events it gets, set when the store is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxRoute {
    /// A stable name the delivery worker knows it by (`slack`, `webhook:…`); at most 200 bytes.
    pub destination: String,
    /// The events written for it.
    pub events: Vec<NotifyEvent>,
}

/// The routes of a store; empty means no outbox rows at all.
pub(crate) type Routes = Arc<[OutboxRoute]>;

/// A notification claimed for delivery (see [`crate::roles::Outbox::claim_notices`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    /// The delivery id: the same on every attempt, so a receiver can drop a repeat.
    pub id: Uuid,
    /// The route's destination.
    pub destination: String,
    /// What happened.
    pub event: NotifyEvent,
    /// The call it is about.
    pub invocation_id: InvocationId,
    /// The event's data as the transition left the row (see the module's guarantees).
    pub payload: Value,
    /// When the transition committed.
    pub created_at: OffsetDateTime,
    /// Delivery attempts so far, this one included.
    pub attempts: u32,
}

/// A notification made by a transition, written at commit.
#[derive(Debug)]
pub(crate) struct NewNotice {
    id: Uuid,
    destination: String,
    event: NotifyEvent,
    invocation_id: InvocationId,
    payload: String,
    at: i64,
}

/// The event a transition from `prev` (`None`: a new row) to `next` is, if any.
pub(crate) fn event_of(prev: Option<&Invocation>, next: &Invocation) -> Option<NotifyEvent> {
    let was = prev.map(|p| p.state);
    let parked = |s: Option<S>| matches!(s, Some(S::AwaitingApproval | S::AwaitingAnswer));
    match next.state {
        S::AwaitingApproval | S::AwaitingAnswer if !parked(was) => Some(NotifyEvent::Parked),
        S::Proposed if was != Some(S::Proposed) => Some(NotifyEvent::Proposed),
        S::InDoubt if was != Some(S::InDoubt) => Some(NotifyEvent::InDoubt),
        S::AwaitingCredential if was != Some(S::AwaitingCredential) => {
            Some(NotifyEvent::CredentialRequired)
        }
        S::Expired => Some(NotifyEvent::Expired),
        _ => {
            let prev = prev?;
            let decided = next.decision != prev.decision || next.resolution != prev.resolution;
            let waited = parked(was) || matches!(was, Some(S::InDoubt | S::Proposed));
            (waited && decided).then_some(NotifyEvent::Decided)
        }
    }
}

/// The event's data: what a person needs to know, nothing a caller sent.
pub(crate) fn payload(inv: &Invocation) -> Value {
    let time = |t: OffsetDateTime| t.format(&Rfc3339).ok();
    let decided_by = inv
        .resolution
        .as_ref()
        .map(|r| r.by.clone())
        .or_else(|| inv.decision.as_ref().map(|d| d.by.clone()));
    let decision = inv
        .resolution
        .as_ref()
        .map(|r| format!("resolved: {}", r.resolution))
        .or_else(|| inv.decision.as_ref().map(|d| d.decision.to_string()));
    // A denial's reason is the decider's words; an answer's text is not sent (it may be
    // personal), nor is a resolution's note.
    let reason = inv
        .decision
        .as_ref()
        .filter(|d| d.decision == DecisionKind::Denied)
        .and_then(|d| d.reason.clone());
    json!({
        "invocation_id": inv.id.to_string(),
        "session_id": inv.session_id.to_string(),
        "run_id": inv.run_id.map(|r| r.to_string()),
        "tool": inv.tool,
        "principal": inv.principal,
        "state": inv.state.as_str(),
        "effect": inv.effect.as_str(),
        "decided_by": decided_by,
        "decision": decision,
        "reason": reason,
        "expires_at": inv.expires_at.and_then(time),
        "recorded_at": time(inv.created_at),
    })
}

/// The rows `next` makes for `routes`, at `now`.
pub(crate) fn notices_for(
    routes: &[OutboxRoute],
    prev: Option<&Invocation>,
    next: &Invocation,
    now: OffsetDateTime,
) -> Vec<NewNotice> {
    let Some(event) = event_of(prev, next) else {
        return Vec::new();
    };
    notices_of(routes, event, next, &payload(next), now)
}

/// The rows of an escalation of `row` to `to` (LEDGER-78): its payload names who was told.
pub(crate) fn escalation(
    routes: &[OutboxRoute],
    row: &Invocation,
    to: &[String],
    now: OffsetDateTime,
) -> Vec<NewNotice> {
    let mut data = payload(row);
    data["escalated_to"] = json!(to);
    notices_of(routes, NotifyEvent::Escalated, row, &data, now)
}

/// One row of `event` about `row` per route that wants it.
fn notices_of(
    routes: &[OutboxRoute],
    event: NotifyEvent,
    next: &Invocation,
    data: &Value,
    now: OffsetDateTime,
) -> Vec<NewNotice> {
    let wanted: Vec<&OutboxRoute> = routes
        .iter()
        .filter(|r| r.events.contains(&event))
        .collect();
    if wanted.is_empty() {
        return Vec::new();
    }
    let payload = data.to_string();
    wanted
        .into_iter()
        .map(|route| NewNotice {
            id: Uuid::now_v7(),
            destination: route.destination.clone(),
            event,
            invocation_id: next.id,
            payload: payload.clone(),
            at: to_micros(now),
        })
        .collect()
}

/// Columns of `notifications` an insert sets, in bind order.
const INSERT_COLUMNS: &str =
    "id, destination, event, invocation_id, payload, created_at, attempts, next_attempt_at";

/// Rows per INSERT: 8 parameters each stays far below both backends' parameter limits.
const NOTICES_PER_INSERT: usize = 200;

/// The inserts of `notices`, run with the batch's other writes at commit.
pub(crate) fn inserts(notices: &[NewNotice], tx: &DbTx) -> Vec<CountedWrite> {
    notices
        .chunks(NOTICES_PER_INSERT)
        .map(|chunk| {
            let binds = chunk.iter().flat_map(binds).collect();
            CountedWrite::rows(tx, 8, binds, false, |rows| {
                format!("INSERT INTO notifications ({INSERT_COLUMNS}) {rows}")
            })
        })
        .collect()
}

fn binds(n: &NewNotice) -> [SqlValue; 8] {
    [
        n.id.to_string().into(),
        n.destination.clone().into(),
        n.event.as_str().into(),
        n.invocation_id.to_string().into(),
        n.payload.clone().into(),
        n.at.into(),
        0_i64.into(),
        n.at.into(),
    ]
}

/// A notice and where its delivery stands (see [`crate::roles::Outbox::notices_of`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NoticeRecord {
    /// The notice.
    pub notice: Notice,
    /// When it was delivered.
    pub delivered_at: Option<OffsetDateTime>,
    /// When it was given up (after the last attempt).
    pub failed_at: Option<OffsetDateTime>,
    /// When it may next be claimed.
    pub next_attempt_at: OffsetDateTime,
    /// Why the last attempt failed.
    pub last_error: Option<String>,
}
