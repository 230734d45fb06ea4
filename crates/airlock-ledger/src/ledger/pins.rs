//! [`Pins`] for [`Ledger`]: pinned tool definitions.
//!
//! Guarantees: this store's pins change on one fixed lane, one after another; a pin's time is
//! the ledger's.

use super::Ledger;
use crate::commit::writer::Prefetch;
use crate::store::{LedgerFuture, Pins};
use crate::transitions::pins::{self, ToolPin};

impl Pins for Ledger {
    fn tool_pins(&self) -> LedgerFuture<'_, Vec<ToolPin>> {
        Box::pin(pins::all(&self.pool))
    }

    fn pin_tool(&self, pin: ToolPin) -> LedgerFuture<'_, ()> {
        // Pins are rare (a boot, an operator's accept): one fixed lane serializes them.
        Box::pin(
            self.writer
                .submit(uuid::Uuid::nil(), Prefetch::Nothing, move |tx, b| {
                    let pin = pin.clone();
                    Box::pin(async move { pins::pin(tx, b, &pin).await })
                }),
        )
    }

    fn unpin_tool(&self, connection: String, tool: String) -> LedgerFuture<'_, ()> {
        Box::pin(
            self.writer
                .submit(uuid::Uuid::nil(), Prefetch::Nothing, move |tx, _| {
                    let (connection, tool) = (connection.clone(), tool.clone());
                    Box::pin(async move { pins::unpin(tx, &connection, &tool).await })
                }),
        )
    }
}
