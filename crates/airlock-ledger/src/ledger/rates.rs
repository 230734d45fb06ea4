//! [`Rates`] for [`Ledger`]: one take from rate-limit budgets.
//!
//! Guarantees: a take is at the ledger's clock and spends from every budget or from none; on
//! PostgreSQL it is one statement that waits behind no writer lane, on SQLite a writer job whose
//! transaction holds the file's write lock from read to write, so every process on one database
//! spends from the same budget.

use super::Ledger;
use crate::commit::writer::Prefetch;
use crate::sql::db::DbPool;
use crate::store::{LedgerFuture, Rates};
use crate::transitions::rate::{self, RateBudget, RateRefusal};
use crate::vocabulary::clock::to_micros;

impl Rates for Ledger {
    fn take_rate(&self, budgets: Vec<RateBudget>) -> LedgerFuture<'_, Option<RateRefusal>> {
        let now = to_micros(self.clock.now());
        if let DbPool::Postgres(pool) = &self.pool {
            return Box::pin(async move { rate::take_shared(pool, &budgets, now).await });
        }
        let key = uuid::Uuid::nil();
        Box::pin(self.writer.submit(key, Prefetch::Nothing, move |tx, _| {
            let budgets = budgets.clone();
            Box::pin(async move { rate::take_in_lane(tx, &budgets, now).await })
        }))
    }
}
