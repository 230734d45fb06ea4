//! LEDGER-74 on both backends: a call's share of a limit is judged and reserved in the commit
//! that records it, and counts as long as its row's state says the call may run or may have run.

use std::time::Duration;

use airlock_ledger::{
    Approval, BudgetShare, Decision, InvocationState as S, OverLimit, Resolution, ToolErrorKind,
};
use serde_json::json;

use crate::harness::{Harness, LEASE};

/// One unit of a one-unit daily cap.
fn unit(over: OverLimit) -> BudgetShare {
    BudgetShare {
        key: "api:pay/daily".into(),
        label: "daily".into(),
        unit: None,
        share: 1_000_000,
        cap: 1_000_000,
        window: Duration::from_secs(86_400),
        over,
    }
}

/// A call in doubt keeps its share until a person settles it; given up, it releases it; a
/// denial releases it too; over an `approval` limit the row waits for a person.
pub(crate) async fn ledger_74_a_share_follows_its_rows_state(h: &Harness) {
    let s = h.session().await;
    let mut first = h.call(s, "pay", json!({"n": 1}));
    first.shares = vec![unit(OverLimit::Deny)];
    let first = h
        .store
        .record_and_claim(first, "w1", LEASE)
        .await
        .unwrap()
        .invocation;
    assert_eq!(first.state, S::Running);
    // Killed between the reserve and the answer: the sweep puts it in doubt, share kept.
    let report = h
        .store
        .sweep(h.clock_now() + LEASE + Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(report.in_doubt, vec![first.id]);
    let mut second = h.call(s, "pay", json!({"n": 2}));
    second.shares = vec![unit(OverLimit::Deny)];
    let second = h.store.record(second).await.unwrap().invocation;
    assert_eq!(second.state, S::Failed);
    let error = second.error.unwrap();
    assert_eq!(error.kind, ToolErrorKind::OverLimit);
    assert!(
        error.message.contains("2 of 1 in 1d (daily)"),
        "{}",
        error.message
    );
    // Over an approval limit, a call waits for a person; the figures are kept for the card.
    let mut asked = h.call(s, "pay", json!({"n": 3}));
    asked.shares = vec![unit(OverLimit::Approval)];
    let asked = h.store.record(asked).await.unwrap().invocation;
    assert_eq!(asked.state, S::AwaitingApproval);
    let uses = h.store.budget_uses(asked.id).await.unwrap();
    assert_eq!((uses[0].used_before, uses[0].over), (1_000_000, true));
    let deny = Decision::Deny {
        reason: "no".into(),
    };
    h.store.decide(asked.id, "ops", deny).await.unwrap();
    // Given up: the share is released, and the next call fits.
    let abandon = Decision::Resolve {
        resolution: Resolution::Abandoned,
        note: "never sent".into(),
    };
    h.store.decide(first.id, "ops", abandon).await.unwrap();
    let mut third = h.call(s, "pay", json!({"n": 4}));
    third.shares = vec![unit(OverLimit::Deny)];
    third.approval = Approval::Always;
    let third = h.store.record(third).await.unwrap().invocation;
    assert_eq!(
        third.state,
        S::AwaitingApproval,
        "its own policy still parks it"
    );
    // Waiting, it holds its share; denied, it gives it back.
    let mut fourth = h.call(s, "pay", json!({"n": 5}));
    fourth.shares = vec![unit(OverLimit::Deny)];
    assert_eq!(
        h.store
            .record(fourth.clone())
            .await
            .unwrap()
            .invocation
            .state,
        S::Failed
    );
    let deny = Decision::Deny {
        reason: "no".into(),
    };
    h.store.decide(third.id, "ops", deny).await.unwrap();
    fourth.call_id = "again".into();
    assert_eq!(
        h.store.record(fourth).await.unwrap().invocation.state,
        S::Pending
    );
    assert!(h.store.verify().await.unwrap().first_break.is_none());
}
