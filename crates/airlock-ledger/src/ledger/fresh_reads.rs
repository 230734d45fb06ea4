//! Reads that come back current: a parked row read past its expiry is expired first, in its
//! writer lane, before any caller sees it.
//!
//! Guarantees: no read of a [`Ledger`] returns an overdue parked row as still waiting, and the
//! expiry is written, not only shown (through `expiry`: the row becomes `expired` and its run
//! fails); a lister of parked rows does not get the rows that expired on its read; a waiter's
//! wake-up is never later than the row's expiry.

use std::time::Duration;

use time::OffsetDateTime;
use tokio::time::Instant;

use super::Ledger;
use crate::commit::writer::Prefetch;
use crate::reads;
use crate::sql::db::SqlValue;
use crate::transitions::expiry;
use crate::vocabulary::clock::truncate;
use crate::vocabulary::error::LedgerError;
use crate::vocabulary::model::Invocation;
use crate::vocabulary::state::InvocationState;

impl Ledger {
    fn now(&self) -> OffsetDateTime {
        truncate(self.clock.now())
    }

    /// A row read from the pool, expired first (persistently) if it is overdue.
    pub(super) async fn current(&self, inv: Invocation) -> Result<Invocation, LedgerError> {
        let overdue = inv.state.is_parked() && inv.expires_at.is_some_and(|at| at <= self.now());
        if !overdue {
            return Ok(inv);
        }
        let id = inv.id;
        self.writer
            .submit(id.0, Prefetch::Fresh(id), move |tx, b| {
                Box::pin(expiry::load_current(tx, b, id))
            })
            .await
    }

    /// The rows of `query` (one of `reads`'), each expired first if it is overdue.
    pub(super) async fn list(
        &self,
        query: &str,
        binds: &[SqlValue],
    ) -> Result<Vec<Invocation>, LedgerError> {
        let rows = reads::invocations(&self.pool, query, binds).await?;
        let mut out = Vec::with_capacity(rows.len());
        for inv in rows {
            out.push(self.current(inv).await?);
        }
        Ok(out)
    }

    /// [`Ledger::list`] without the rows that expired on this read: they no longer wait.
    pub(super) async fn parked(
        &self,
        query: &str,
        binds: &[SqlValue],
    ) -> Result<Vec<Invocation>, LedgerError> {
        let rows = self.list(query, binds).await?;
        // A proposal waits for a person too, but never expires.
        let waiting =
            |state: InvocationState| state.is_parked() || state == InvocationState::Proposed;
        Ok(rows.into_iter().filter(|i| waiting(i.state)).collect())
    }

    /// The earlier of `deadline` and the row's expiry (so a waiter sees it expire).
    pub(super) fn expiry_instant(&self, inv: &Invocation, deadline: Instant) -> Instant {
        let Some(at) = inv.expires_at.filter(|_| inv.state.is_parked()) else {
            return deadline;
        };
        let left = (at - self.now()).max(time::Duration::ZERO);
        let left = Duration::try_from(left).unwrap_or(Duration::ZERO);
        deadline.min(Instant::now() + left)
    }
}
