//! Waiting and audit (docs/rules.md DECIDE-9, LEDGER-15, LEDGER-16).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use airlock_ledger::{
    Approval, ApprovalFilter, Decision, Effect, InvocationId, InvocationState as S, NewInvocation,
    NewRun, NewSession, SessionId, SourceKind, SqlValue, StoreConfig, ToolError, ToolErrorKind,
    tx_tool,
};
use airlock_spec::sha256_hex;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::harness::{DIGEST, Harness, LEASE, TTL};

/// DECIDE-9: `wait_for_change` returns promptly on a change and at the deadline otherwise.
pub(crate) async fn decide_9_wait_for_change(h: &Harness) {
    let s = h.session().await;
    let mut call = h.call(s, "refund", json!({"amount": 5}));
    call.approval = Approval::Always;
    let row = h.store.record(call).await.unwrap().invocation;

    // Nothing happens: back at the deadline with the same version.
    let same = h
        .store
        .wait_for_change(row.id, None, Instant::now() + Duration::from_millis(50))
        .await
        .unwrap();
    assert_eq!(same.version, row.version);

    // A change wakes the waiter long before its deadline.
    let store = Arc::clone(&h.store);
    let deadline = Instant::now() + Duration::from_secs(30);
    let waiter = tokio::spawn(async move {
        store
            .wait_for_change(row.id, Some(row.version), deadline)
            .await
    });
    h.store
        .decide(row.id, "bob", Decision::Approve)
        .await
        .unwrap();
    let changed = waiter.await.unwrap().unwrap();
    assert_eq!(changed.state, S::Approved);
    assert!(Instant::now() < deadline);

    // A stale `seen` returns at once.
    let now = h
        .store
        .wait_for_change(row.id, Some(row.version), deadline)
        .await
        .unwrap();
    assert_eq!(now.state, S::Approved);
}

/// LEDGER-15: Every decision records who, when and why; listings show the story in order.
pub(crate) async fn ledger_15_story_in_order(h: &Harness) {
    let s = h.session().await;
    let mut ids = Vec::new();
    for (n, approval) in [
        (1, Approval::Never),
        (2, Approval::Always),
        (3, Approval::Always),
    ] {
        let mut call = h.call(s, "refund", json!({"n": n}));
        call.approval = approval;
        ids.push(h.store.record(call).await.unwrap().invocation.id);
        h.clock.advance(Duration::from_millis(5));
    }
    let pending = h
        .store
        .pending_approvals(ApprovalFilter {
            tool: Some("refund".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        pending.iter().map(|i| i.id).collect::<Vec<_>>(),
        ids[1..].to_vec()
    );
    // INBOX-5: the inbox reads newest first, and its limit keeps the newest rows.
    let newest = h
        .store
        .pending_approvals(ApprovalFilter {
            tool: Some("refund".into()),
            newest_first: true,
            limit: Some(1),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(newest.iter().map(|i| i.id).collect::<Vec<_>>(), [ids[2]]);
    let by_principal = ApprovalFilter {
        principal: Some("nobody".into()),
        ..Default::default()
    };
    assert!(
        h.store
            .pending_approvals(by_principal)
            .await
            .unwrap()
            .is_empty()
    );
    let old = ApprovalFilter {
        recorded_before: Some(h.clock_now() - Duration::from_millis(7)),
        ..Default::default()
    };
    assert_eq!(h.store.pending_approvals(old).await.unwrap().len(), 1);
    proposals_are_listed_by_kind(h).await;

    h.store.claim(ids[0], "w1", LEASE).await.unwrap();
    h.store.finish(ids[0], "w1", Ok(json!("ok"))).await.unwrap();
    h.store
        .decide(ids[1], "alice", Decision::Approve)
        .await
        .unwrap();
    h.store
        .decide(
            ids[2],
            "bob",
            Decision::Deny {
                reason: "duplicate".into(),
            },
        )
        .await
        .unwrap();

    let story = h.store.session_invocations(s).await.unwrap();
    assert_eq!(story.iter().map(|i| i.id).collect::<Vec<_>>(), ids);
    let states: Vec<_> = story.iter().map(|i| i.state).collect();
    assert_eq!(states, vec![S::Succeeded, S::Approved, S::Denied]);
    let d1 = story[1].decision.clone().unwrap();
    let d2 = story[2].decision.clone().unwrap();
    assert_eq!(
        (d1.by.as_str(), d2.by.as_str(), d2.reason.as_deref()),
        ("alice", "bob", Some("duplicate"))
    );
    assert_eq!(d2.at, h.clock_now());
    let session = h.store.get_session(s).await.unwrap();
    assert_eq!(
        (session.channel.as_str(), session.principal.as_deref()),
        ("mcp", Some("alice@example.com"))
    );
    assert!(
        story
            .iter()
            .all(|i| i.principal.as_deref() == Some("alice@example.com"))
    );
}

/// LEDGER-86: the database skips and limits a page of the waiting calls, the calls in doubt
/// among them when asked, in one order: paging lists every row once, oldest or newest first.
pub(crate) async fn ledger_86_waiting_pages_are_skipped_in_the_database(h: &Harness) {
    let s = h.session().await;
    let mut ids = Vec::new();
    for n in 0..9 {
        let mut call = h.call(s, "pager", json!({"n": n}));
        let id = if n % 3 == 2 {
            call.source_kind = SourceKind::Api;
            call.effect = Effect::AtMostOnce;
            let id = h.store.record_and_claim(call, "w1", LEASE).await.unwrap();
            let id = id.invocation.id;
            let unanswered = ToolError::new(ToolErrorKind::Timeout, "no answer").into_unanswered();
            let doubted = h.store.finish(id, "w1", Err(unanswered)).await.unwrap();
            assert_eq!(doubted.state, S::InDoubt);
            id
        } else {
            call.approval = Approval::Always;
            h.store.record(call).await.unwrap().invocation.id
        };
        ids.push(id);
        h.clock.advance(Duration::from_millis(5));
    }
    let page = |offset, newest_first, with_in_doubt| ApprovalFilter {
        tool: Some("pager".into()),
        limit: Some(2),
        offset: Some(offset),
        newest_first,
        with_in_doubt,
        ..Default::default()
    };
    let listed = async |filter| -> Vec<InvocationId> {
        let rows = h.store.pending_approvals(filter).await.unwrap();
        rows.iter().map(|r| r.id).collect()
    };
    for newest_first in [false, true] {
        let mut expected = ids.clone();
        if newest_first {
            expected.reverse();
        }
        let mut paged = Vec::new();
        for offset in (0..10).step_by(2) {
            paged.extend(listed(page(offset, newest_first, true)).await);
        }
        assert_eq!(paged, expected, "newest first: {newest_first}");
    }
    let waiting: Vec<InvocationId> = (0..9).filter(|n| n % 3 != 2).map(|n| ids[n]).collect();
    assert_eq!(listed(page(2, false, false)).await, waiting[2..4]);
    let doubted = ApprovalFilter {
        state: Some(S::InDoubt),
        ..page(1, false, true)
    };
    assert_eq!(listed(doubted).await, [ids[5], ids[8]]);
}

/// A proposal waits for a person too (DECIDE-18), and each kind can be listed alone (beside
/// the two rows `ledger_15_story_in_order` leaves waiting).
async fn proposals_are_listed_by_kind(h: &Harness) {
    let elsewhere = h.session().await;
    let mut proposal = h.call(elsewhere, "refund", json!({"n": 4}));
    proposal.mode = airlock_spec::Mode::Propose;
    let proposal = h.store.record(proposal).await.unwrap().invocation.id;
    let of = |state| ApprovalFilter {
        state,
        ..Default::default()
    };
    let all = h.store.pending_approvals(of(None)).await.unwrap();
    assert_eq!(all.len(), 3);
    let proposals = h
        .store
        .pending_approvals(of(Some(S::Proposed)))
        .await
        .unwrap();
    assert_eq!(
        proposals.iter().map(|i| i.id).collect::<Vec<_>>(),
        [proposal]
    );
    let asked = h.store.pending_approvals(of(Some(S::AwaitingApproval)));
    assert_eq!(asked.await.unwrap().len(), 2);
    h.store
        .decide(
            proposal,
            "carol",
            Decision::Deny {
                reason: "not now".into(),
            },
        )
        .await
        .unwrap();
}

/// LEDGER-16: The audit chain detects an edited or deleted row and names it.
pub(crate) async fn ledger_16_audit_chain_names_tampered_rows(h: &Harness) {
    let s = h.session().await;
    let mut ids = Vec::new();
    for n in 0..4 {
        let row = h
            .store
            .record(h.call(s, "refund", json!({"amount": n})))
            .await
            .unwrap()
            .invocation;
        h.store.claim(row.id, "w1", LEASE).await.unwrap();
        h.store.finish(row.id, "w1", Ok(json!(n))).await.unwrap();
        ids.push(row.id);
    }
    let clean = h.store.verify().await.unwrap();
    assert_eq!(clean.first_break, None);
    assert_eq!(clean.rows, 5);

    h.raw
        .exec(&format!(
            "UPDATE invocations SET arguments = '{{\"amount\":1000}}' WHERE id = '{}'",
            ids[2]
        ))
        .await;
    let broken = h.store.verify().await.unwrap().first_break.unwrap();
    assert_eq!(
        (broken.entity.as_str(), broken.id.clone()),
        ("invocation", ids[2].to_string())
    );
    assert!(broken.reason.contains("edited"), "{broken}");
    h.raw
        .exec(&format!(
            "UPDATE invocations SET arguments = '{{\"amount\":2}}' WHERE id = '{}'",
            ids[2]
        ))
        .await;
    assert_eq!(h.store.verify().await.unwrap().first_break, None);

    h.raw
        .exec(&format!("DELETE FROM invocations WHERE id = '{}'", ids[1]))
        .await;
    let broken = h.store.verify().await.unwrap().first_break.unwrap();
    assert_eq!(broken.id, ids[1].to_string());
    assert!(broken.reason.contains("deleted"), "{broken}");

    // Deleting its audit events too breaks the chain at the gap.
    h.raw
        .exec(&format!(
            "DELETE FROM ledger_events WHERE entity_id = '{}'",
            ids[1]
        ))
        .await;
    let broken = h.store.verify().await.unwrap().first_break.unwrap();
    assert!(broken.reason.contains("audit event"), "{broken}");
}

/// A row an older build stored with a legacy kind word (the egress guard's `unresolvable`) reads
/// as the kind of its cause now, and still verifies: the audit chain hashes the columns as
/// stored, never a re-serialisation of the parsed row.
pub(crate) async fn legacy_kind_word_reads_and_still_verifies(h: &Harness) {
    const INTS: &[&str] = &[
        "version",
        "decided_at",
        "resolved_at",
        "expires_at",
        "lease_deadline",
        "attempts",
        "created_at",
        "updated_at",
    ];
    let s = h.session().await;
    let row = h
        .store
        .record(h.call(s, "lookup", json!({"host": "api.example.com"})))
        .await
        .unwrap()
        .invocation;
    h.store.claim(row.id, "w1", LEASE).await.unwrap();
    let dns = ToolError::new(ToolErrorKind::Unreachable, "no address for api.example.com");
    h.store.finish(row.id, "w1", Err(dns)).await.unwrap();

    let event_sql = format!(
        "SELECT lane, seq, entity, entity_id, version, state, row_hash, prev_hash, at \
         FROM ledger_events WHERE entity_id = '{}' ORDER BY version DESC LIMIT 1",
        row.id
    );
    let event = h
        .raw
        .row_json(&event_sql, &["lane", "seq", "version", "at"])
        .await;
    let row_sql = format!("SELECT * FROM invocations WHERE id = '{}'", row.id);
    let row_hash =
        |columns: &BTreeMap<String, Value>| sha256_hex(&serde_json::to_vec(columns).unwrap());
    // The reconstruction hashes what the ledger hashed: every column as stored, but a NULL
    // `approved_arguments` or `credential_use`, which rows written before them never had
    // (DECIDE-20, LEDGER-84), and the budget shares, which are not the call's content (LEDGER-74).
    let mut columns = h.raw.row_json(&row_sql, INTS).await;
    assert_eq!(columns.remove("approved_arguments"), Some(Value::Null));
    assert_eq!(columns.remove("credential_use"), Some(Value::Null));
    assert_eq!(columns.remove("budget"), Some(Value::Null));
    assert_eq!(json!(row_hash(&columns)), event["row_hash"]);

    // Rewrite the row and its latest audit event as an older build wrote them: the guard's
    // own word, chained over exactly those stored bytes.
    let (lane, seq) = (&event["lane"], &event["seq"]);
    let later = format!("SELECT COUNT(*) FROM ledger_events WHERE lane = {lane} AND seq > {seq}");
    assert_eq!(
        h.raw.count(&later).await,
        0,
        "the row's event heads its lane"
    );
    columns.insert("error_kind".into(), json!("unresolvable"));
    let legacy_hash = row_hash(&columns);
    let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
    let fields = [
        "prev_hash",
        "lane",
        "seq",
        "entity",
        "entity_id",
        "version",
        "state",
    ]
    .map(|f| text(&event[f]));
    let event_hash = sha256_hex(
        format!(
            "{}\n{legacy_hash}\n{}",
            fields.join("\n"),
            text(&event["at"])
        )
        .as_bytes(),
    );
    h.raw
        .exec(&format!(
            "UPDATE invocations SET error_kind = 'unresolvable' WHERE id = '{}'",
            row.id
        ))
        .await;
    h.raw
        .exec(&format!(
            "UPDATE ledger_events SET row_hash = '{legacy_hash}', hash = '{event_hash}' \
             WHERE lane = {lane} AND seq = {seq}"
        ))
        .await;

    let audit = h.store.verify().await.unwrap();
    assert_eq!(audit.first_break, None);
    let read = h.store.get(row.id).await.unwrap();
    let error = read.error.unwrap();
    assert_eq!(error.kind, ToolErrorKind::Unreachable);
    assert_eq!(
        serde_json::to_value(&error).unwrap(),
        json!({"kind": "unreachable", "message": "no address for api.example.com"})
    );
    // Still stored as written: reading never rewrote it.
    let stored = h.raw.row_json(&row_sql, INTS).await;
    assert_eq!(stored["error_kind"], "unresolvable");
}

/// Two stores on one database (two processes) writing the same writer lanes in turns: each
/// lane's chain head a store remembers goes stale, yet every write lands once and the chain
/// verifies without a break or fork.
pub(crate) async fn two_stores_share_the_chain(h: &Harness) {
    let other = h.second_store().await;
    let s = h.session().await;
    let mut ids = Vec::new();
    for round in 0..3 {
        for (n, store) in [&h.store, &other].into_iter().enumerate() {
            let tasks: Vec<_> = (0..8)
                .map(|i| {
                    let store = Arc::clone(store);
                    let call = h.call(s, "refund", json!({"round": round, "store": n, "i": i}));
                    tokio::spawn(async move {
                        let r = store.record_and_claim(call, "w", LEASE).await.unwrap();
                        assert!(r.created);
                        store
                            .finish(r.invocation.id, "w", Ok(json!(i)))
                            .await
                            .unwrap();
                        r.invocation.id
                    })
                })
                .collect();
            for t in tasks {
                ids.push(t.await.unwrap());
            }
            // And one write alone, in a batch of its own, right after the other store's.
            let call = h.call(
                s,
                "refund",
                json!({"round": round, "store": n, "alone": true}),
            );
            let r = store.record_and_claim(call, "w", LEASE).await.unwrap();
            store
                .finish(r.invocation.id, "w", Ok(json!(0)))
                .await
                .unwrap();
            ids.push(r.invocation.id);
        }
    }
    for id in &ids {
        let row = h.store.get(*id).await.unwrap();
        assert_eq!((row.state, row.version, row.attempts), (S::Succeeded, 3, 1));
    }
    let audit = h.store.verify().await.unwrap();
    assert!(audit.first_break.is_none(), "{audit:?}");
    assert_eq!(audit.rows, 1 + ids.len() as u64);
}

/// The approval flow across processes: a person approves from another process (the CLI), then
/// the server runs the transactional tool — whose body runs once and commits with its row, even
/// though the other process moved the lane's chain on meanwhile.
pub(crate) async fn a_transactional_call_after_another_process_decided(h: &Harness) {
    h.raw
        .exec("CREATE TABLE tool_orders (n BIGINT NOT NULL)")
        .await;
    let s = h.session().await;
    let mut call = h.call(s, "orders_create", json!({"n": 1}));
    call.effect = Effect::Transactional;
    call.approval = Approval::Always;
    let parked = h.store.record(call).await.unwrap().invocation;
    let cli = h.second_store().await;
    cli.decide(parked.id, "bob", Decision::Approve)
        .await
        .unwrap();
    let done = h
        .store
        .run_transactional(
            parked.id,
            "w1",
            tx_tool(|tx| {
                Box::pin(async move {
                    tx.execute(
                        "INSERT INTO tool_orders (n) VALUES ($1)",
                        &[SqlValue::Int(1)],
                    )
                    .await?;
                    Ok(json!({"ok": true}))
                })
            }),
        )
        .await
        .unwrap();
    assert_eq!(done.state, S::Succeeded);
    assert_eq!(h.raw.count("SELECT count(*) FROM tool_orders").await, 1);
    let audit = h.store.verify().await.unwrap();
    assert!(audit.first_break.is_none(), "{audit:?}");
}

/// One sweep settles more rows than one PostgreSQL statement can carry binds for (65,535):
/// the batch's writes are split into several statements. (Each expired row is an update of 21
/// binds and an audit event of 10.)
pub(crate) async fn a_sweep_bigger_than_one_statement(h: &Harness) {
    let store = h
        .reopen(StoreConfig {
            sweep_limit: 10_000,
            ..crate::harness::config(&h.clock)
        })
        .await;
    let s = h.session().await;
    let n = 6_700; // 207,700 binds
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let store = Arc::clone(&store);
            let mut call = h.call(s, "refund", json!({ "i": i }));
            call.approval = Approval::Always;
            tokio::spawn(async move { store.record(call).await.unwrap() })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    h.clock.advance(TTL + Duration::from_secs(1));
    let report = store.sweep(h.clock_now()).await.unwrap();
    assert_eq!(report.expired.len(), n);
}

/// A session and a run opened together in one batch: the run's foreign key finds the session.
pub(crate) async fn a_run_beside_its_new_session(h: &Harness) {
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let store = Arc::clone(&h.store);
            tokio::spawn(async move {
                let id = SessionId::new();
                let new = NewSession {
                    channel: "agent".into(),
                    principal: None,
                    metadata: json!({}),
                };
                let run = NewRun {
                    session_id: id,
                    agent: "support".into(),
                    definitions_digest: DIGEST.into(),
                    definitions_snapshot: json!({}),
                    lease: None,
                };
                let (session, run) =
                    tokio::join!(store.create_session(id, new), store.create_run(run));
                session.unwrap();
                run.unwrap().session_id == id
            })
        })
        .collect();
    for t in tasks {
        assert!(t.await.unwrap());
    }
}

/// `verify` on a ledger that is being written: every report is clean, because the audit reads
/// the chain and the rows in one snapshot (reading them apart, a call committed in between
/// looks like a row inserted or edited outside the ledger).
pub(crate) async fn verify_beside_live_writes_reports_no_break(h: &Harness) {
    let s = h.session().await;
    let store = Arc::clone(&h.store);
    let writer = tokio::spawn(async move {
        for i in 0..150 {
            let call = NewInvocation::new(s, format!("live-{i}"), "noop", json!({"i": i}), DIGEST);
            let id = store
                .record_and_claim(call, "w", LEASE)
                .await
                .unwrap()
                .invocation
                .id;
            store.finish(id, "w", Ok(json!(i))).await.unwrap();
        }
    });
    let mut audits = 0;
    while !writer.is_finished() && audits < 400 {
        let report = h.store.verify().await.unwrap();
        assert!(report.first_break.is_none(), "{report:?}");
        audits += 1;
    }
    writer.await.unwrap();
    assert!(audits > 1, "the audits ran beside the writes");
}
