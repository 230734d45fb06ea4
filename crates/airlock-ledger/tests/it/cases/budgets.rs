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

/// A share counts for its whole window and at most a sixtieth of it longer (its bucket), a call
/// that failed before anything was sent gives its share back, and the buckets in a window
/// always hold the sum of the shares that count.
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
    assert_buckets_hold(h, 2_000_000).await;
    // A second before the first share is an hour old, it still counts.
    h.clock.advance(Duration::from_secs(1_799));
    let late = h.store.record(record(5)).await.unwrap().invocation;
    assert_eq!(late.state, S::Failed, "still within the hour: {late:?}");
    // An hour and one bucket (a minute) after the first share it has left: one more fits.
    h.clock.advance(Duration::from_secs(62));
    let sixth = h.store.record(record(6)).await.unwrap().invocation;
    assert_eq!(sixth.state, S::Pending);
    let seventh = h.store.record(record(7)).await.unwrap().invocation;
    assert_eq!(seventh.state, S::Failed);
    assert_buckets_hold(h, 2_000_000).await;
    let usage = h.store.limit_usage().await.unwrap();
    assert_eq!(usage[0].used, 2_000_000);
    // The sweep forgets the buckets no window reaches; what counts is unchanged.
    h.store.sweep(h.clock_now()).await.unwrap();
    let kept = h
        .raw
        .count("SELECT COUNT(*) FROM budget_buckets WHERE limit_key = 'api:send/hourly'")
        .await;
    assert_eq!(kept, 2, "the first share's bucket is gone, two remain");
    assert_buckets_hold(h, 2_000_000).await;
}

/// A limit whose window was lengthened: a share of the longer window that joins a bucket of
/// the shorter one keeps the bucket until its own window ends, never shorter.
pub(crate) async fn ledger_74_a_lengthened_window_keeps_its_shares(h: &Harness) {
    let s = h.session().await;
    // Start on a boundary of both widths (a minute for an hour, two minutes for two hours).
    let width: i128 = 120_000_000;
    let now = h.clock_now().unix_timestamp_nanos() / 1_000;
    let to_boundary = u64::try_from(width - now.rem_euclid(width)).unwrap();
    h.clock.advance(Duration::from_micros(to_boundary));
    let record = |n: u32, window: u64| {
        let mut call = h.call(s, "send", json!({"n": n}));
        call.shares = vec![BudgetShare {
            window: Duration::from_secs(window),
            ..hourly()
        }];
        call
    };
    for (n, window) in [(1, 3_600), (2, 7_200)] {
        let row = h.store.record(record(n, window)).await.unwrap().invocation;
        assert_eq!(row.state, S::Pending, "{n}");
    }
    // Past the hour and its bucket: the two-hour share still counts (and the bucket the two
    // share holds the hour's share with it, longer than its window, never shorter).
    h.clock.advance(Duration::from_secs(3_700));
    assert_buckets_hold(h, 2_000_000).await;
    let over = h.store.record(record(3, 7_200)).await.unwrap().invocation;
    assert_eq!(over.state, S::Failed, "{over:?}");
}

/// The test key's buckets still in a window hold `expected`.
async fn assert_buckets_hold(h: &Harness, expected: i64) {
    let now = h.clock_now().unix_timestamp_nanos() / 1_000;
    let held = h
        .raw
        .count(&format!(
            "SELECT CAST(COALESCE(SUM(used), 0) AS BIGINT) FROM budget_buckets \
             WHERE limit_key = 'api:send/hourly' AND until > {now}"
        ))
        .await;
    assert_eq!(held, expected);
}

/// During a rolling upgrade the previous release writes its shares to `budget_shares`: they
/// count against the same limit here, and leave it when their call stops counting.
pub(crate) async fn ledger_74_a_previous_releases_share_counts(h: &Harness) {
    let s = h.session().await;
    let mut parked = h.call(s, "send", json!({"n": 0}));
    parked.approval = Approval::Always;
    let old = h.store.record(parked).await.unwrap().invocation;
    let at = h.clock_now().unix_timestamp_nanos() / 1_000;
    h.raw
        .exec(&format!(
            "INSERT INTO budget_shares (invocation_id, limit_key, label, unit, share, \
             used_before, cap, window_us, over_cap, at) VALUES ('{}', 'api:send/hourly', \
             'hourly', NULL, 1000000, 0, 2000000, 3600000000, 0, {at})",
            old.id
        ))
        .await;
    let record = |n: u32| {
        let mut call = h.call(s, "send", json!({"n": n}));
        call.shares = vec![hourly()];
        call
    };
    assert_eq!(
        h.store.record(record(1)).await.unwrap().invocation.state,
        S::Pending
    );
    assert_eq!(
        h.store.record(record(2)).await.unwrap().invocation.state,
        S::Failed
    );
    let deny = Decision::Deny {
        reason: "no".into(),
    };
    h.store.decide(old.id, "ops", deny).await.unwrap();
    assert_eq!(
        h.store.record(record(3)).await.unwrap().invocation.state,
        S::Pending
    );
    assert_buckets_hold(h, 2_000_000).await;
}

/// A store that judges a limit on what it last knew (SQLite, LEDGER-74) is checked at commit:
/// shares another store on the database reserved meanwhile count, and a share given back since
/// does not hold a call up.
pub(crate) async fn ledger_74_a_limit_assumed_from_memory_is_checked_at_commit(h: &Harness) {
    let other = h.second_store().await;
    let s = h.session().await;
    let record = |n: u32| {
        let mut call = h.call(s, "send", json!({"n": n}));
        call.shares = vec![hourly()];
        call
    };
    let first = h.store.record(record(1)).await.unwrap().invocation;
    assert_eq!(first.state, S::Pending);
    // The other store takes the second unit; this one last knew one.
    let second = other.record(record(2)).await.unwrap().invocation;
    assert_eq!(second.state, S::Pending);
    let third = h.store.record(record(3)).await.unwrap().invocation;
    assert_eq!(
        third.state,
        S::Failed,
        "the other store's share counts: {third:?}"
    );
    assert_eq!(third.error.unwrap().kind, ToolErrorKind::OverLimit);
    assert_buckets_hold(h, 2_000_000).await;
    let fourth = h.store.record(record(4)).await.unwrap().invocation;
    assert_eq!(fourth.state, S::Failed, "still two within the hour");
    // A share given back through the other store: this one still knows two, and reads.
    let unsent = ToolError::new(ToolErrorKind::Unavailable, "no connection");
    other.claim(second.id, "w2", LEASE).await.unwrap();
    other.finish(second.id, "w2", Err(unsent)).await.unwrap();
    let fifth = h.store.record(record(5)).await.unwrap().invocation;
    assert_eq!(fifth.state, S::Pending, "the given-back share: {fifth:?}");
    assert_buckets_hold(h, 2_000_000).await;
    // A use this store cannot have seen (no write of its chain's lane, which a stale chain
    // head would reveal): only the commit's guard finds it.
    let other_key = |n: u32| {
        let mut call = record(n);
        call.shares[0].key = "api:send/other".into();
        call
    };
    let sixth = h.store.record(other_key(6)).await.unwrap().invocation;
    assert_eq!(sixth.state, S::Pending);
    h.raw
        .exec("UPDATE budget_buckets SET used = used + 1000000 WHERE limit_key = 'api:send/other'")
        .await;
    let seventh = h.store.record(other_key(7)).await.unwrap().invocation;
    assert_eq!(
        seventh.state,
        S::Failed,
        "a use not seen is counted: {seventh:?}"
    );
}
