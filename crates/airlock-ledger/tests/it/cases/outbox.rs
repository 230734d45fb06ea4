//! The notification outbox (docs/rules.md LEDGER-30 … LEDGER-34): rows written with the
//! transition that causes them, claimed under a lease, delivered once, retried, given up.

use std::sync::Arc;
use std::time::Duration;

use airlock_ledger::{Approval, Decision, Invocation, NotifyEvent, OutboxRoute, SessionId, Store};
use serde_json::json;

use crate::harness::{Harness, LEASE, TTL, config};

/// A webhook that wants everything and a Slack channel that wants parks and decisions.
fn routes() -> Vec<OutboxRoute> {
    vec![
        OutboxRoute {
            destination: "webhook:a".into(),
            events: NotifyEvent::ALL.to_vec(),
        },
        OutboxRoute {
            destination: "slack".into(),
            events: vec![NotifyEvent::Parked, NotifyEvent::Decided],
        },
    ]
}

/// A store on the harness's database that writes notifications for [`routes`].
async fn notifying(h: &Harness) -> Arc<dyn Store> {
    h.reopen(airlock_ledger::StoreConfig {
        outbox: routes(),
        ..config(&h.clock)
    })
    .await
}

async fn parked(h: &Harness, store: &Arc<dyn Store>, s: SessionId) -> Invocation {
    let mut call = h.call(s, "refund", json!({"card": "4111111111111111"}));
    call.approval = Approval::Always;
    store.record(call).await.unwrap().invocation
}

/// (event, destination) of every notice of `id`, in order.
async fn events(store: &Arc<dyn Store>, id: airlock_ledger::InvocationId) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = store
        .notices_of(id)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.notice.event.as_str().into(), r.notice.destination))
        .collect();
    out.sort();
    out
}

/// LEDGER-30: park, decision, expiry and in doubt each write one row per destination that
/// asked for the event, in the transition's commit; the payload carries no argument.
pub(crate) async fn ledger_30_transitions_write_their_notices(h: &Harness) {
    let store = notifying(h).await;
    let s = h.session().await;
    let row = parked(h, &store, s).await;
    assert_eq!(
        events(&store, row.id).await,
        [
            ("invocation.parked".into(), "slack".into()),
            ("invocation.parked".into(), "webhook:a".into())
        ]
    );
    let deny = Decision::Deny {
        reason: "not <today>".into(),
    };
    store.decide(row.id, "bob", deny).await.unwrap();
    let notices = store.notices_of(row.id).await.unwrap();
    let decided = notices
        .iter()
        .find(|r| r.notice.event == NotifyEvent::Decided && r.notice.destination == "webhook:a")
        .unwrap();
    let data = &decided.notice.payload;
    assert_eq!(data["decided_by"], "bob");
    assert_eq!(data["state"], "denied");
    assert_eq!(data["reason"], "not <today>");
    assert_eq!(data["tool"], "refund");
    assert_eq!(data["principal"], "alice@example.com");
    assert!(!data.to_string().contains("4111"), "no argument: {data}");
    assert_eq!(notices.len(), 4, "parked and decided, to both");

    // Expiry: only the webhook asked for it.
    let late = parked(h, &store, s).await;
    h.clock.advance(TTL + Duration::from_secs(1));
    store.sweep(h.clock_now()).await.unwrap();
    let expired: Vec<_> = events(&store, late.id).await;
    assert!(expired.contains(&("invocation.expired".into(), "webhook:a".into())));
    assert!(!expired.contains(&("invocation.expired".into(), "slack".into())));

    // In doubt: a lost lease on an at-most-once call.
    let id = store
        .record(h.call(s, "charge", json!({"cents": 1})))
        .await
        .unwrap()
        .invocation
        .id;
    store.claim(id, "w1", LEASE).await.unwrap();
    let later = h.clock_now() + LEASE + Duration::from_secs(1);
    h.clock.advance(LEASE + Duration::from_secs(1));
    assert_eq!(store.sweep(later).await.unwrap().in_doubt, vec![id]);
    assert_eq!(
        events(&store, id).await,
        [("invocation.in_doubt".into(), "webhook:a".into())]
    );

    // An escalation is told once, naming who may now decide (LEDGER-78).
    let waiting = parked(h, &store, s).await;
    let to = vec!["carol".to_owned()];
    assert!(
        store
            .escalate(waiting.id, Duration::ZERO, to.clone())
            .await
            .unwrap()
    );
    assert!(
        !store
            .escalate(waiting.id, Duration::ZERO, to)
            .await
            .unwrap()
    );
    let told: Vec<_> = store
        .notices_of(waiting.id)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.notice.event == NotifyEvent::Escalated)
        .collect();
    assert_eq!(told.len(), 1, "only the webhook asked for it, once");
    assert_eq!(told[0].notice.payload["escalated_to"], json!(["carol"]));

    // A proposal waits for a person too (DECIDE-18): proposed, then decided.
    let mut call = h.call(s, "refund", json!({"n": 2}));
    call.mode = airlock_spec::Mode::Propose;
    let proposal = store.record(call).await.unwrap().invocation;
    assert_eq!(
        events(&store, proposal.id).await,
        [("invocation.proposed".into(), "webhook:a".into())]
    );
    store
        .decide(proposal.id, "bob", Decision::Approve)
        .await
        .unwrap();
    assert_eq!(
        events(&store, proposal.id).await,
        [
            ("invocation.decided".into(), "slack".into()),
            ("invocation.decided".into(), "webhook:a".into()),
            ("invocation.proposed".into(), "webhook:a".into()),
        ]
    );
}

/// LEDGER-30: a store opened without routes writes no notification at all.
pub(crate) async fn ledger_30_no_routes_no_rows(h: &Harness) {
    let s = h.session().await;
    let row = parked(h, &h.store, s).await;
    h.store
        .decide(row.id, "bob", Decision::Approve)
        .await
        .unwrap();
    assert_eq!(h.raw.count("SELECT COUNT(*) FROM notifications").await, 0);
}

/// LEDGER-31: a claimed notice is held under the claimer's lease — a second claimer, here
/// another store as another process, gets nothing until the lease ends undelivered; it is
/// delivered exactly once, and the reference it kept is found by the next notices.
pub(crate) async fn ledger_31_one_holder_one_delivery(h: &Harness) {
    let store = notifying(h).await;
    let other = h
        .reopen(airlock_ledger::StoreConfig {
            outbox: routes(),
            ..config(&h.clock)
        })
        .await;
    let s = h.session().await;
    let row = parked(h, &store, s).await;
    let (a, b) = tokio::join!(
        store.claim_notices("w1", LEASE, 10),
        other.claim_notices("w2", LEASE, 10)
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(
        a.len() + b.len(),
        2,
        "each notice to one claimer: {a:?} {b:?}"
    );
    for n in &a {
        assert!(!b.iter().any(|m| m.id == n.id), "claimed twice: {n:?}");
    }
    let mut all: Vec<_> = a.iter().map(|n| (n, "w1")).collect();
    all.extend(b.iter().map(|n| (n, "w2")));
    let (n, holder) = all[0];
    let thief = if holder == "w1" { "w2" } else { "w1" };
    assert_eq!(n.attempts, 1);
    assert!(!store.notice_delivered(n.id, thief, None).await.unwrap());
    assert!(
        store
            .notice_delivered(n.id, holder, Some("C1 1700000000.0001".into()))
            .await
            .unwrap()
    );
    assert!(
        !other.notice_delivered(n.id, holder, None).await.unwrap(),
        "one delivered transition"
    );
    let reference = other
        .notice_reference(row.id, &n.destination)
        .await
        .unwrap();
    assert_eq!(reference.as_deref(), Some("C1 1700000000.0001"));

    // The other notice's holder crashed: after its lease it is due again, attempt 2; the
    // delivered one never is.
    assert!(
        other
            .claim_notices("w3", LEASE, 10)
            .await
            .unwrap()
            .is_empty()
    );
    h.clock.advance(LEASE + Duration::from_secs(1));
    let again = other.claim_notices("w3", LEASE, 10).await.unwrap();
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(again[0].id, all[1].0.id);
    assert_eq!(again[0].attempts, 2);
}

/// LEDGER-32: an undelivered notice is due again after the delay the worker asks for, with
/// the same delivery id; given up, it is never claimed again.
pub(crate) async fn ledger_32_retry_then_give_up(h: &Harness) {
    let store = notifying(h).await;
    let s = h.session().await;
    parked(h, &store, s).await;
    let first = store.claim_notices("w", LEASE, 1).await.unwrap();
    let id = first[0].id;
    let wait = Duration::from_secs(5);
    assert!(
        store
            .notice_undelivered(id, "w", Some(wait), "HTTP 500".into())
            .await
            .unwrap()
    );
    let early = store.claim_notices("w", LEASE, 10).await.unwrap();
    assert!(!early.iter().any(|n| n.id == id), "not before its time");
    h.clock.advance(wait);
    let retried = store.claim_notices("w", LEASE, 10).await.unwrap();
    let retried = retried.iter().find(|n| n.id == id).expect("due again");
    assert_eq!(retried.attempts, 2);
    assert!(
        store
            .notice_undelivered(id, "w", None, "HTTP 500".into())
            .await
            .unwrap()
    );
    h.clock.advance(Duration::from_secs(3600));
    let after = store.claim_notices("w", LEASE, 10).await.unwrap();
    assert!(!after.iter().any(|n| n.id == id), "failed for good");
    let record = store
        .notices_of(retried.invocation_id)
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.notice.id == id)
        .unwrap();
    assert!(record.failed_at.is_some());
    assert_eq!(record.last_error.as_deref(), Some("HTTP 500"));
}
