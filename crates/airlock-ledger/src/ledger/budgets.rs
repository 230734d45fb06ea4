//! [`Budgets`] for [`Ledger`]: the shares calls reserved, read from the read pool at the
//! ledger's time.

use super::Ledger;
use crate::store::{Budgets, LedgerFuture};
use crate::transitions::budgets;
use crate::vocabulary::budget::{BudgetUse, LimitUsage};
use crate::vocabulary::ids::InvocationId;

impl Budgets for Ledger {
    fn budget_uses(&self, id: InvocationId) -> LedgerFuture<'_, Vec<BudgetUse>> {
        Box::pin(budgets::of(&self.pool, id))
    }

    fn limit_usage(&self) -> LedgerFuture<'_, Vec<LimitUsage>> {
        Box::pin(async move { budgets::usage(&self.pool, self.clock.now()).await })
    }
}
