//! [`Rates`] for [`Ledger`]: one take from rate-limit budgets.
//!
//! Guarantees: a take is at the ledger's clock and spends from every budget or from none; on
//! PostgreSQL it is one statement that waits behind no writer lane, on SQLite a writer job whose
//! transaction holds the file's write lock from read to write, so every process on one database
//! spends from the same budget.

use super::Ledger;
use crate::clock::to_micros;
use crate::db::DbPool;
use crate::rate::{self, RateBudget, RateRefusal};
use crate::store::{LedgerFuture, Rates};
use crate::writer::Prefetch;

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
