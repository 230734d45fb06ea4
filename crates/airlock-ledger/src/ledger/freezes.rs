//! [`Freezes`] and [`Delegations`] for [`Ledger`]: an operator's rare acts, on one fixed lane,
//! one after another, with the ledger's time; what is in force read from the read pool.

use super::Ledger;
use crate::commit::writer::Prefetch;
use crate::store::{Delegations, Freezes, LedgerFuture};
use crate::transitions::delegations::{self, Delegation};
use crate::transitions::freezes::{self, Freeze, FreezeTarget};

impl Delegations for Ledger {
    fn delegate(
        &self,
        from: String,
        to: String,
        lasts: std::time::Duration,
    ) -> LedgerFuture<'_, Delegation> {
        // Rare, like freezes: the same fixed lane.
        Box::pin(
            self.writer
                .submit(uuid::Uuid::nil(), Prefetch::Nothing, move |tx, b| {
                    let (from, to) = (from.clone(), to.clone());
                    Box::pin(async move { delegations::delegate(tx, b, (&from, &to, lasts)).await })
                }),
        )
    }

    fn delegations_to(&self, principal: String) -> LedgerFuture<'_, Vec<Delegation>> {
        Box::pin(async move { delegations::to(&self.pool, &principal, self.clock.now()).await })
    }
}

impl Freezes for Ledger {
    fn freeze(&self, freeze: Freeze) -> LedgerFuture<'_, Freeze> {
        // Freezes are rare (an operator's act): one fixed lane serializes them.
        Box::pin(
            self.writer
                .submit(uuid::Uuid::nil(), Prefetch::Nothing, move |tx, b| {
                    let freeze = freeze.clone();
                    Box::pin(async move { freezes::freeze(tx, b, &freeze).await })
                }),
        )
    }

    fn unfreeze(&self, target: FreezeTarget, by: String) -> LedgerFuture<'_, Option<Freeze>> {
        Box::pin(
            self.writer
                .submit(uuid::Uuid::nil(), Prefetch::Nothing, move |tx, b| {
                    let (target, by) = (target.clone(), by.clone());
                    Box::pin(async move { freezes::unfreeze(tx, b, &target, &by).await })
                }),
        )
    }

    fn freezes(&self) -> LedgerFuture<'_, Vec<Freeze>> {
        Box::pin(freezes::all(&self.pool))
    }
}
