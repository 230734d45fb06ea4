//! POLICY-16: rate-limit budgets in the ledger — shared by every store on one database (two
//! replicas never exceed the budget together), all-or-nothing across a call's budgets, and
//! refilled by the store's clock.

use std::sync::Arc;
use std::time::Duration;

use airlock_ledger::{RateBudget, RateRefusal, Store};

use crate::harness::Harness;

const MINUTE: Duration = Duration::from_secs(60);

fn budget(key: &str, requests: u32) -> RateBudget {
    RateBudget {
        key: key.into(),
        requests,
        per: MINUTE,
    }
}

async fn take(store: &Arc<dyn Store>, budgets: &[RateBudget]) -> Option<RateRefusal> {
    store.take_rate(budgets.to_vec()).await.unwrap()
}

pub(crate) async fn policy_16_budget_refills_by_the_store_clock(h: &Harness) {
    let api = [budget("crm", 2)];
    assert_eq!(take(&h.store, &api).await, None);
    assert_eq!(take(&h.store, &api).await, None);
    let refused = take(&h.store, &api).await.unwrap();
    assert_eq!(refused.budget, 0);
    assert_eq!(refused.retry_after, Duration::from_secs(30));
    h.clock.advance(Duration::from_secs(29));
    assert!(take(&h.store, &api).await.is_some(), "not yet refilled");
    h.clock.advance(Duration::from_secs(1));
    assert_eq!(take(&h.store, &api).await, None, "one call every 30 s");
    assert!(take(&h.store, &api).await.is_some());
    h.clock.advance(MINUTE);
    assert_eq!(take(&h.store, &api).await, None, "a full window refills");
    assert_eq!(take(&h.store, &api).await, None);
    assert!(take(&h.store, &api).await.is_some(), "never more than 2");
}

/// A refusal by one budget spends nothing from the others.
pub(crate) async fn policy_16_a_call_takes_from_every_budget_or_none(h: &Harness) {
    let shared = budget("crm", 3);
    let ada = [shared.clone(), budget("crm/ada", 1)];
    let bob = [shared, budget("crm/bob", 5)];
    assert_eq!(take(&h.store, &ada).await, None);
    let refused = take(&h.store, &ada).await.unwrap();
    assert_eq!(refused.budget, 1, "ada's own budget refused");
    assert_eq!(take(&h.store, &bob).await, None);
    assert_eq!(
        take(&h.store, &bob).await,
        None,
        "ada's refusal spent none of crm"
    );
    let refused = take(&h.store, &bob).await.unwrap();
    assert_eq!(refused.budget, 0, "the shared budget refused");
    assert_eq!(refused.retry_after, Duration::from_secs(20));
}

/// Two stores on one database (two replicas, or a CLI beside a server) spend one budget:
/// racing for it, together they never take more than it holds.
pub(crate) async fn policy_16_stores_on_one_database_share_the_budget(h: &Harness) {
    let other = h.second_store().await;
    let api = [budget("crm", 5)];
    let tasks: Vec<_> = (0..24)
        .map(|i| {
            let store = Arc::clone(if i % 2 == 0 { &h.store } else { &other });
            let api = api.clone();
            tokio::spawn(async move { store.take_rate(api.to_vec()).await.unwrap().is_none() })
        })
        .collect();
    let mut taken = 0;
    for t in tasks {
        taken += usize::from(t.await.unwrap());
    }
    assert_eq!(taken, 5);
}
