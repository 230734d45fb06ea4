//! `airlock audit export`: the ledger's audit trail as JSON lines, one event a line, appended
//! to a file (docs/rules.md OPS-83 … OPS-85).
//!
//! Guarantees: read-only on the ledger (one read snapshot, LEDGER-80); every event has a stable
//! `id` — a chain event its chain position (`chain:<lane>:<seq>`), a freeze or unfreeze, and a
//! pin, what they are and when — and a line is made only of what never changes once its event
//! was written, so exporting the same ledger twice yields the same lines, and a receiver drops
//! a replayed line by its id; appending skips the events the file already holds (a torn last
//! line, from a crash mid-write, is cut first) and syncs the file before it reports. Arguments,
//! results, answers, reasons and tool errors' messages are written only when `[audit.export]
//! include_arguments = true`.

use std::collections::HashSet;
use std::io::{Read as _, Seek as _, Write as _};
use std::path::Path;

use airlock_ledger::{AuditTrail, ChainEvent, FreezeEvent, Invocation, PinEvent};
use anyhow::Context as _;
use serde_json::{Map, Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Every event of `trail` as its line, in the trail's order: the chain's, then freezes, then
/// pins.
pub(super) fn lines(trail: &AuditTrail, include_arguments: bool) -> Vec<(String, String)> {
    let chain = trail
        .events
        .iter()
        .map(|e| chain_event(trail, e, include_arguments));
    let freezes = trail
        .freezes
        .iter()
        .map(|f| freeze_event(f, include_arguments));
    let pins = trail.pins.iter().map(pin_event);
    chain
        .chain(freezes)
        .chain(pins)
        .map(|event| {
            let id = event["id"].as_str().unwrap_or_default().to_owned();
            (id, event.to_string())
        })
        .collect()
}

/// Appends to `path` the lines whose id it does not hold yet; returns (appended, already
/// there).
pub(super) fn append(path: &Path, lines: &[(String, String)]) -> anyhow::Result<(usize, usize)> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    let mut held = String::new();
    file.read_to_string(&mut held)
        .with_context(|| format!("reading {}", path.display()))?;
    // A line cut short by a crash was never a whole event: it goes, and is written again.
    let whole = held.rfind('\n').map_or(0, |end| end + 1);
    if whole < held.len() {
        file.set_len(u64::try_from(whole)?)?;
        file.seek(std::io::SeekFrom::End(0))?;
    }
    let seen: HashSet<String> = held[..whole]
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|v| v["id"].as_str().map(str::to_owned))
        .collect();
    let mut out = std::io::BufWriter::new(&file);
    let mut appended = 0;
    for (id, line) in lines {
        if !seen.contains(id.as_str()) {
            writeln!(out, "{line}")?;
            appended += 1;
        }
    }
    out.flush()?;
    drop(out);
    file.sync_all()
        .with_context(|| format!("syncing {}", path.display()))?;
    Ok((appended, lines.len() - appended))
}

fn time(at: OffsetDateTime) -> String {
    at.format(&Rfc3339).unwrap_or_default()
}

/// A chain event: what happened to a session, a run or a call.
fn chain_event(trail: &AuditTrail, e: &ChainEvent, include_arguments: bool) -> Value {
    let mut event = json!({
        "id": format!("chain:{}:{}", e.lane, e.seq),
        "at": time(e.at),
        "event": kind(trail, e),
        "entity": e.entity,
        "entity_id": e.entity_id,
        "version": e.version,
        "state": e.state,
        "hash": e.hash,
    });
    let details = match e.entity.as_str() {
        "session" => trail
            .sessions
            .get(&e.entity_id)
            .map(|s| json!({"session": {"channel": s.channel, "principal": s.principal}})),
        "run" => trail
            .runs
            .get(&e.entity_id)
            .map(|r| json!({"run": {"agent": r.agent, "session_id": r.session_id.to_string()}})),
        "invocation" => trail
            .invocations
            .get(&e.entity_id)
            .map(|row| call(row, e, include_arguments)),
        _ => None,
    };
    if let (Some(Value::Object(details)), Some(event)) = (details, event.as_object_mut()) {
        event.extend(details);
    }
    event
}

/// The event's word: a row's first version is its start, a call's terminal state settles it.
fn kind(trail: &AuditTrail, e: &ChainEvent) -> &'static str {
    let settled = || {
        trail
            .invocations
            .get(&e.entity_id)
            .is_some_and(|row| e.state == row.state.as_str() && row.state.is_terminal())
    };
    match (e.entity.as_str(), e.version) {
        ("session", _) => "session_opened",
        ("run", 1) => "run_started",
        ("run", _) => "run_changed",
        ("invocation", 1) => "call_recorded",
        ("invocation", _) if settled() => "call_settled",
        ("invocation", _) => "call_changed",
        _ => "changed",
    }
}

/// What a call event shows: the call's fixed facts; its arguments when it was recorded, a
/// decision or a resolution in the commit that took it, the outcome when it settled — each
/// written once and never changed after.
fn call(row: &Invocation, e: &ChainEvent, include_arguments: bool) -> Value {
    let mut call = json!({
        "tool": row.tool,
        "principal": row.principal,
        "session_id": row.session_id.to_string(),
        "run_id": row.run_id.map(|r| r.to_string()),
        "call_id": row.call_id,
        "kind": row.kind.as_str(),
        "mode": row.mode.as_str(),
        "approval": row.approval.as_str(),
        "effect": row.effect.as_str(),
    });
    if include_arguments && e.version == 1 {
        call["arguments"] = row.arguments.clone();
    }
    let mut details = Map::new();
    details.insert("call".into(), call);
    if let Some(d) = row.decision.as_ref().filter(|d| d.at == e.at) {
        let mut decision = json!({"by": d.by, "decision": d.decision.as_str()});
        if include_arguments {
            decision["reason"] = json!(d.reason);
        }
        details.insert("decision".into(), decision);
    }
    if let Some(r) = row.resolution.as_ref().filter(|r| r.at == e.at) {
        let mut resolution = json!({"by": r.by, "resolution": r.resolution.as_str()});
        if include_arguments {
            resolution["note"] = json!(r.note);
        }
        details.insert("resolution".into(), resolution);
    }
    if e.state == row.state.as_str() && row.state.is_terminal() {
        details.insert("outcome".into(), outcome(row, include_arguments));
    }
    Value::Object(details)
}

/// A settled call's outcome: its error's kind; with arguments, its result and the message.
fn outcome(row: &Invocation, include_arguments: bool) -> Value {
    let mut outcome = json!({"error_kind": row.error.as_ref().map(|e| e.kind.as_str())});
    if include_arguments {
        outcome["result"] = row.result.clone().unwrap_or(Value::Null);
        outcome["error_message"] = json!(row.error.as_ref().map(|e| e.message.clone()));
    }
    outcome
}

fn freeze_event(f: &FreezeEvent, include_arguments: bool) -> Value {
    let micros = f.at.unix_timestamp_nanos() / 1000;
    let (kind, name) = (f.target.kind(), f.target.name());
    let mut event = json!({
        "id": format!("freeze:{micros}:{kind}:{name}:{}", f.action),
        "at": time(f.at),
        "event": f.action,
        "target": {"kind": kind, "name": name},
        "by": f.by,
    });
    if include_arguments {
        event["reason"] = json!(f.reason);
    }
    event
}

fn pin_event(p: &PinEvent) -> Value {
    let micros = p.at.unix_timestamp_nanos() / 1000;
    json!({
        "id": format!("pin:{}:{}:{micros}", p.connection, p.tool),
        "at": time(p.at),
        "event": "pin_accepted",
        "connection": p.connection,
        "tool": p.tool,
        "definition_hash": p.definition_hash,
        "by": p.by,
    })
}
