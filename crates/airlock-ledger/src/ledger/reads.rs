//! [`Reads`] for [`Ledger`]: reads go to the read pool, through `fresh_reads` so an overdue parked
//! row is expired before anyone sees it.
//!
//! Guarantees: a read waits on a writer lane only to expire an overdue row; a waiter registers
//! for the row's change before it reads the row, so a change committed after the read wakes it,
//! and it wakes by the row's expiry at the latest.

use std::pin::pin;

use tokio::sync::watch;
use tokio::time::Instant;

use super::Ledger;
use crate::audit_trail::{self, AuditTrail};
use crate::reads::{self, text};
use crate::store::{LedgerFuture, Reads};
use crate::support::chain;
use crate::vocabulary::clock::to_micros;
use crate::vocabulary::ids::{InvocationId, RunId, SessionId};
use crate::vocabulary::model::{ApprovalFilter, AuditReport, Invocation};
use crate::vocabulary::state::InvocationState;

impl Reads for Ledger {
    fn get(&self, id: InvocationId) -> LedgerFuture<'_, Invocation> {
        Box::pin(async move { self.current(reads::invocation(&self.pool, id).await?).await })
    }

    /// Returns once the row's version differs from `seen` (default: the version at the time of
    /// the call), or at `deadline` with the row as it is. A parked row past its expiry counts
    /// as changed: the read expires it.
    fn wait_for_change(
        &self,
        id: InvocationId,
        seen: Option<i64>,
        deadline: Instant,
    ) -> LedgerFuture<'_, Invocation> {
        Box::pin(async move {
            let watch = self.wakeups.watch(id);
            let mut notified = pin!(watch.notify.notified());
            // Registered before the read: a change committed after this line wakes us.
            notified.as_mut().enable();
            let current = self.get(id).await?;
            let seen = seen.unwrap_or(current.version);
            if current.version != seen {
                return Ok(current);
            }
            let mut wake_at = self.expiry_instant(&current, deadline);
            loop {
                tokio::select! {
                    () = &mut notified => {}
                    () = tokio::time::sleep_until(wake_at) => {}
                }
                notified.set(watch.notify.notified());
                notified.as_mut().enable();
                let current = self.get(id).await?;
                if current.version != seen || Instant::now() >= deadline {
                    return Ok(current);
                }
                wake_at = self.expiry_instant(&current, deadline);
            }
        })
    }

    fn approvals(&self) -> watch::Receiver<()> {
        self.wakeups.approvals()
    }

    fn pending_approvals(&self, filter: ApprovalFilter) -> LedgerFuture<'_, Vec<Invocation>> {
        Box::pin(async move {
            let binds = [
                text(filter.tool.as_deref()),
                text(filter.principal.as_deref()),
                filter.recorded_before.map(to_micros).into(),
                i64::from(filter.limit.unwrap_or(500)).into(),
                text(filter.state.map(InvocationState::as_str)),
                i64::from(filter.with_in_doubt).into(),
                i64::from(filter.offset.unwrap_or(0)).into(),
            ];
            let query = if filter.newest_first {
                reads::PENDING_APPROVALS_NEWEST
            } else {
                reads::PENDING_APPROVALS
            };
            self.parked(query, &binds).await
        })
    }

    fn in_doubt(&self) -> LedgerFuture<'_, Vec<Invocation>> {
        Box::pin(self.parked(reads::IN_DOUBT, &[]))
    }

    fn open_counts(&self) -> LedgerFuture<'_, Vec<(InvocationState, u64)>> {
        Box::pin(reads::open_counts(&self.pool))
    }

    fn approved_unclaimed(&self, limit: u32) -> LedgerFuture<'_, Vec<Invocation>> {
        let binds = [i64::from(limit).into()];
        Box::pin(async move { self.list(reads::APPROVED_UNCLAIMED, &binds).await })
    }

    fn escalated(&self, id: InvocationId) -> LedgerFuture<'_, bool> {
        Box::pin(crate::transitions::escalations::escalated(&self.pool, id))
    }

    fn session_invocations(&self, id: SessionId) -> LedgerFuture<'_, Vec<Invocation>> {
        let binds = [id.to_string().into()];
        Box::pin(async move { self.list(reads::SESSION_INVOCATIONS, &binds).await })
    }

    fn run_invocations(&self, id: RunId) -> LedgerFuture<'_, Vec<Invocation>> {
        let binds = [id.to_string().into()];
        Box::pin(async move { self.list(reads::RUN_INVOCATIONS, &binds).await })
    }

    fn verify(&self) -> LedgerFuture<'_, AuditReport> {
        Box::pin(chain::verify(&self.pool))
    }

    fn audit_trail(&self) -> LedgerFuture<'_, AuditTrail> {
        Box::pin(audit_trail::read(&self.pool))
    }
}
