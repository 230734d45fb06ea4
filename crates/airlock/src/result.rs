//! What the HTTP API and the CLI show of a settled row, built here from the ledger's typed
//! [`Settlement`]: the documented shapes, byte for byte — the result itself,
//! `{"error": {kind, message}}`, `{"denied": reason}`, `{"denied": "approval expired"}`,
//! `{"resolved": note}`, `{"abandoned": reason}` and `{"proposed": {tool, arguments}}`. The
//! row's state beside it (`expired`, `abandoned`, …) says which of them it is.

use airlock_ledger::{Invocation, Settlement};
use serde_json::{Value, json};

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
        Settlement::Proposed { tool, arguments } => {
            json!({ "proposed": { "tool": tool, "arguments": arguments } })
        }
    })
}
