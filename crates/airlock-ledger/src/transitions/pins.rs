//! Pinned tool definitions (docs/rules.md LEDGER-49): the accepted definition of each tool of
//! each connection file.
//!
//! Guarantees: one pin per (connection, server tool name); pinning again replaces the
//! definition, who accepted it and when; the definition is stored as the JSON it was given and
//! read back equal. Deciding what differs is the runtime's; this module stores.

use serde_json::Value;
use time::OffsetDateTime;

use crate::sql::db::{DbPool, DbRow};
use crate::sql::tx::LedgerTx;
use crate::transitions::batch::Batch;
use crate::vocabulary::clock::{from_micros, to_micros};
use crate::vocabulary::error::LedgerError;

/// One pinned definition.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolPin {
    /// The connection file's namespace.
    pub connection: String,
    /// The tool's name on the server.
    pub tool: String,
    /// The definition as accepted (name, description, schemas, annotations).
    pub definition: Value,
    /// Who accepted it (`trust on first use` for a connection's first boot).
    pub pinned_by: String,
    /// When (set by the ledger's clock when written).
    pub pinned_at: OffsetDateTime,
}

pub(crate) async fn pin(
    tx: &mut LedgerTx,
    batch: &Batch,
    pin: &ToolPin,
) -> Result<(), LedgerError> {
    let definition =
        serde_json::to_string(&pin.definition).map_err(|e| LedgerError::Invalid(e.to_string()))?;
    tx.inner
        .execute(
            "INSERT INTO tool_pins (connection, tool, definition, pinned_by, pinned_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (connection, tool) DO UPDATE SET \
             definition = $3, pinned_by = $4, pinned_at = $5",
            &[
                pin.connection.clone().into(),
                pin.tool.clone().into(),
                definition.into(),
                pin.pinned_by.clone().into(),
                to_micros(batch.now).into(),
            ],
        )
        .await?;
    Ok(())
}

pub(crate) async fn unpin(
    tx: &mut LedgerTx,
    connection: &str,
    tool: &str,
) -> Result<(), LedgerError> {
    tx.inner
        .execute(
            "DELETE FROM tool_pins WHERE connection = $1 AND tool = $2",
            &[connection.to_owned().into(), tool.to_owned().into()],
        )
        .await?;
    Ok(())
}

pub(crate) async fn all(pool: &DbPool) -> Result<Vec<ToolPin>, LedgerError> {
    let rows = pool
        .fetch_all(
            "SELECT connection, tool, definition, pinned_by, pinned_at FROM tool_pins \
             ORDER BY connection, tool",
            &[],
        )
        .await?;
    rows.iter().map(read).collect()
}

fn read(row: &DbRow) -> Result<ToolPin, LedgerError> {
    let definition = serde_json::from_str(&row.req_text("definition")?)
        .map_err(|e| LedgerError::Invalid(format!("stored tool pin JSON: {e}")))?;
    let at = row.req_int("pinned_at")?;
    Ok(ToolPin {
        connection: row.req_text("connection")?,
        tool: row.req_text("tool")?,
        definition,
        pinned_by: row.req_text("pinned_by")?,
        pinned_at: from_micros(at)
            .ok_or_else(|| LedgerError::Invalid(format!("stored pin time {at}")))?,
    })
}
