//! What the HTTP API and the CLI show of a settled row, built here from the ledger's typed
//! [`Settlement`]: the documented shapes, byte for byte — the result itself,
//! `{"error": {kind, message}}`, `{"denied": reason}`, `{"denied": "approval expired"}`,
//! `{"resolved": note}`, `{"abandoned": reason}` and `{"proposed": {tool, arguments}}`. The
//! row's state beside it (`expired`, `abandoned`, …) says which of them it is. Also the whole
//! row and the approvals page as the API answers them, which the CLI's `--json` prints too; and
//! a run's state in its one written form.

use airlock_ledger::{Freeze, Invocation, Settlement};
use airlock_runtime::decisions::pending::Page;
use serde_json::{Value, json};
use time::format_description::well_known::Rfc3339;

/// The row's result as JSON, or `None` while it is not settled.
#[must_use]
pub fn result_json(row: &Invocation) -> Option<Value> {
    let settlement = row.settlement()?;
    Some(match settlement {
        Settlement::Succeeded(result) => result.clone(),
        Settlement::Failed(error) => json!({ "error": error }),
        Settlement::Denied { .. } | Settlement::Expired => {
            json!({ "denied": settlement.denied_reason() })
        }
        Settlement::Resolved { note, .. } => json!({ "resolved": note }),
        Settlement::Abandoned { reason } => json!({ "abandoned": reason }),
        Settlement::InputRequired(asked) => asked.clone(),
        Settlement::Proposed { tool, arguments } => {
            json!({ "proposed": { "tool": tool, "arguments": arguments } })
        }
    })
}

fn time(t: Option<time::OffsetDateTime>) -> Value {
    t.and_then(|t| t.format(&Rfc3339).ok())
        .map_or(Value::Null, Value::String)
}

/// A freeze in force, as the API and `airlock freezes --json` show it.
#[must_use]
pub fn freeze_json(freeze: &Freeze) -> Value {
    json!({
        "kind": freeze.target.kind(),
        "name": freeze.target.name(),
        "reason": freeze.reason,
        "by": freeze.by,
        "at": freeze.at.format(&Rfc3339).ok(),
    })
}

/// A row as the API shows it (arguments are shown: approvers decide on them). A call approved
/// with edited arguments shows them as `approved_arguments` beside the proposed `arguments`
/// (docs/rules.md DECIDE-20).
#[must_use]
pub fn invocation_json(row: &Invocation) -> Value {
    let mut shown = json!({
        "id": row.id.to_string(),
        "tool": row.tool,
        "state": row.state.to_string(),
        "approval": row.approval.to_string(),
        "arguments": row.arguments,
        "principal": row.principal,
        "session_id": row.session_id.to_string(),
        "created_at": time(Some(row.created_at)),
        "expires_at": time(row.expires_at),
        "decision": row.decision.as_ref().map(|d| json!({"by": d.by, "decision": d.decision.to_string(), "reason": d.reason, "at": time(Some(d.at))})),
        "resolution": row.resolution.as_ref().map(|r| json!({"by": r.by, "outcome": r.resolution.to_string(), "note": r.note, "at": time(Some(r.at))})),
        "result": result_json(row),
    });
    if let (Some(approved), Value::Object(fields)) = (&row.approved_arguments, &mut shown) {
        fields.insert("approved_arguments".to_owned(), approved.clone());
    }
    shown
}

/// A page of what waits for a person, as `GET /v1/approvals` answers it.
#[must_use]
pub fn approvals_json(page: &Page) -> Value {
    json!({
        "approvals": page.rows.iter().map(invocation_json).collect::<Vec<_>>(),
        "next_offset": page.next_offset,
    })
}

/// A run's state as the API writes it (`completed`, `parked`, …).
#[must_use]
pub fn run_state(state: airlock_runtime::agent::RunState) -> String {
    match serde_json::to_value(state) {
        Ok(Value::String(word)) => word,
        _ => format!("{state:?}").to_lowercase(),
    }
}
