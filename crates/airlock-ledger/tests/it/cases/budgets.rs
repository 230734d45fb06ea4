//! LEDGER-74 on both backends: a call's share of a limit is judged and reserved in the commit
//! that records it, and counts as long as its row's state says the call may run or may have run.

use std::time::Duration;

use airlock_ledger::{
    Approval, BudgetShare, Decision, InvocationState as S, OverLimit, Resolution, ToolError,
    ToolErrorKind,
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

/// One unit of a two-unit hourly cap.
fn hourly() -> BudgetShare {
    BudgetShare {
        key: "api:send/hourly".into(),
        label: "hourly".into(),
        unit: None,
        share: 1_000_000,
        cap: 2_000_000,
        window: Duration::from_secs(3_600),
        over: OverLimit::Deny,
    }
}

/// A share leaves its limit's window when the window has passed it, and a call that failed
/// before anything was sent gives its share back; the key's running total always equals the
/// sum of the shares that count.
pub(crate) async fn ledger_74_a_share_leaves_its_window(h: &Harness) {
    let s = h.session().await;
    let record = |n: u32| {
        let mut call = h.call(s, "send", json!({"n": n}));
        call.shares = vec![hourly()];
        call
    };
    let first = h
        .store
        .record_and_claim(record(1), "w1", LEASE)
        .await
        .unwrap();
    h.store
        .finish(first.invocation.id, "w1", Ok(json!({"sent": 1})))
        .await
        .unwrap();
    h.clock.advance(Duration::from_secs(1_800));
    let second = h
        .store
        .record_and_claim(record(2), "w1", LEASE)
        .await
        .unwrap();
    let unsent = ToolError::new(ToolErrorKind::Unavailable, "no connection");
    let second = h
        .store
        .finish(second.invocation.id, "w1", Err(unsent))
        .await
        .unwrap();
    assert_eq!(second.state, S::Failed);
    let third = h.store.record(record(3)).await.unwrap().invocation;
    assert_eq!(
        third.state,
        S::Pending,
        "the unsent call gave its share back"
    );
    let fourth = h.store.record(record(4)).await.unwrap().invocation;
    assert_eq!(
        fourth.state,
        S::Failed,
        "two shares within the hour: {fourth:?}"
    );
    assert_totals_match_open_shares(h, 2_000_000).await;
    // An hour after the first share it has left the window: one more fits, not two.
    h.clock.advance(Duration::from_secs(1_801));
    let fifth = h.store.record(record(5)).await.unwrap().invocation;
    assert_eq!(fifth.state, S::Pending);
    let sixth = h.store.record(record(6)).await.unwrap().invocation;
    assert_eq!(sixth.state, S::Failed);
    assert_totals_match_open_shares(h, 2_000_000).await;
    let usage = h.store.limit_usage().await.unwrap();
    assert_eq!(usage[0].used, 2_000_000);
}

/// The running total of the test's key, and the sum of its open shares, are both `expected`.
async fn assert_totals_match_open_shares(h: &Harness, expected: i64) {
    let total = h
        .raw
        .count("SELECT used FROM budget_totals WHERE limit_key = 'api:send/hourly'")
        .await;
    let open = h
        .raw
        .count(
            "SELECT CAST(SUM(share) AS BIGINT) FROM budget_shares \
             WHERE limit_key = 'api:send/hourly' AND open = 1",
        )
        .await;
    assert_eq!((total, open), (expected, expected));
}
