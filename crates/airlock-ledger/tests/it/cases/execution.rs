//! Execution and effect modes (docs/rules.md LEDGER-3 to LEDGER-10, DECL-11).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use airlock_ledger::{
    Effect, InvocationState as S, LedgerError, NewRun, Settlement, SourceKind, SqlValue, ToolError,
    ToolErrorKind, tx_tool,
};
use serde_json::json;

use crate::harness::{Harness, LEASE, TTL};

/// LEDGER-7: A transactional local tool runs once; its writes and `succeeded` commit together; a
/// failing tool's writes roll back and the row is `failed` with the message.
pub(crate) async fn ledger_7_transactional_commits_with_the_row(h: &Harness) {
    h.raw
        .exec("CREATE TABLE tool_orders (n BIGINT NOT NULL)")
        .await;
    let s = h.session().await;
    let mut call = h.call(s, "orders_create", json!({"n": 1}));
    call.effect = Effect::Transactional;
    let ok = h.store.record(call).await.unwrap().invocation;
    let done = h
        .store
        .run_transactional(
            ok.id,
            "w1",
            tx_tool(|tx| {
                Box::pin(async move {
                    tx.execute(
                        "INSERT INTO tool_orders (n) VALUES ($1)",
                        &[SqlValue::Int(1)],
                    )
                    .await?;
                    let n = tx
                        .fetch_i64("SELECT COUNT(*) FROM tool_orders", &[])
                        .await?;
                    Ok(json!({"orders": n}))
                })
            }),
        )
        .await
        .unwrap();
    assert_eq!(done.state, S::Succeeded);
    assert_eq!(done.result, Some(json!({"orders": 1})));
    assert_eq!(h.raw.count("SELECT COUNT(*) FROM tool_orders").await, 1);

    // Runs exactly once: a second attempt is refused and writes nothing.
    let again = h
        .store
        .run_transactional(
            ok.id,
            "w2",
            tx_tool(|tx| {
                Box::pin(async move {
                    tx.execute("INSERT INTO tool_orders (n) VALUES (99)", &[])
                        .await?;
                    Ok(json!({}))
                })
            }),
        )
        .await;
    assert!(matches!(again, Err(LedgerError::Taken { .. })), "{again:?}");

    // A failing tool: its write rolls back, the row commits as failed with the message.
    let mut call = h.call(s, "orders_create", json!({"n": 2}));
    call.effect = Effect::Transactional;
    let bad = h.store.record(call).await.unwrap().invocation;
    let failed = h
        .store
        .run_transactional(
            bad.id,
            "w1",
            tx_tool(|tx| {
                Box::pin(async move {
                    tx.execute("INSERT INTO tool_orders (n) VALUES (2)", &[])
                        .await?;
                    Err(ToolError::new(
                        ToolErrorKind::ToolFailed,
                        "credit limit exceeded",
                    ))
                })
            }),
        )
        .await
        .unwrap();
    assert_eq!(failed.state, S::Failed);
    assert_eq!(
        failed.error.as_ref().unwrap().message,
        "credit limit exceeded"
    );
    assert_eq!(h.raw.count("SELECT COUNT(*) FROM tool_orders").await, 1);

    // A tool whose own SQL fails (aborting a PostgreSQL transaction) still leaves a failed row.
    let mut call = h.call(s, "orders_create", json!({"n": 3}));
    call.effect = Effect::Transactional;
    let broken = h.store.record(call).await.unwrap().invocation;
    let failed = h
        .store
        .run_transactional(
            broken.id,
            "w1",
            tx_tool(|tx| {
                Box::pin(async move {
                    tx.execute("INSERT INTO tool_orders (n) VALUES (3)", &[])
                        .await?;
                    tx.execute("INSERT INTO no_such_table (n) VALUES (1)", &[])
                        .await?;
                    Ok(json!({}))
                })
            }),
        )
        .await
        .unwrap();
    assert_eq!(failed.state, S::Failed);
    assert_eq!(failed.error.as_ref().unwrap().kind, ToolErrorKind::Database);
    assert_eq!(h.raw.count("SELECT COUNT(*) FROM tool_orders").await, 1);
    assert!(h.store.verify().await.unwrap().first_break.is_none());
}

/// LEDGER-5: Same (session, call id) → same row; finishing twice is an error; a settled row is never
/// executed again and replays its stored result.
pub(crate) async fn ledger_5_dedupe_finish_twice_replay(h: &Harness) {
    let s = h.session().await;
    let call = h.call(s, "crm__search", json!({"q": "ada"}));
    let first = h.store.record(call.clone()).await.unwrap();
    let second = h.store.record(call.clone()).await.unwrap();
    assert!(first.created && !second.created);
    assert_eq!(first.invocation.id, second.invocation.id);

    let id = first.invocation.id;
    h.store.claim(id, "w1", LEASE).await.unwrap();
    h.store
        .finish(id, "w1", Ok(json!({"hits": 1})))
        .await
        .unwrap();
    let twice = h.store.finish(id, "w1", Ok(json!({"hits": 2}))).await;
    assert!(
        matches!(
            twice,
            Err(LedgerError::AlreadyFinished {
                state: S::Succeeded,
                ..
            })
        ),
        "{twice:?}"
    );
    let claim = h.store.claim(id, "w2", LEASE).await;
    assert!(
        matches!(
            claim,
            Err(LedgerError::Taken {
                state: S::Succeeded,
                ..
            })
        ),
        "{claim:?}"
    );

    let replay = h.store.record(call).await.unwrap();
    assert!(!replay.created);
    assert_eq!(
        replay.invocation.settlement(),
        Some(Settlement::Succeeded(&json!({"hits": 1})))
    );
}

/// LEDGER-6: Calls of one step settle in order; the ungated one runs while its sibling parks; after
/// approval only the sibling runs.
pub(crate) async fn ledger_6_siblings_settle_in_order(h: &Harness) {
    let s = h.session().await;
    let run = h
        .store
        .create_run(NewRun {
            session_id: s,
            agent: "support".into(),
            definitions_digest: crate::harness::DIGEST.into(),
            definitions_snapshot: json!({"tools": []}),
            lease: None,
        })
        .await
        .unwrap();
    let mut a = h.call(s, "lookup", json!({"id": 1}));
    a.run_id = Some(run.id);
    let mut b = h.call(s, "refund", json!({"amount": 5}));
    b.run_id = Some(run.id);
    b.approval = airlock_ledger::Approval::Always;
    let a = h.store.record(a).await.unwrap().invocation;
    let b = h.store.record(b).await.unwrap().invocation;
    assert_eq!((a.state, b.state), (S::Pending, S::AwaitingApproval));

    h.store.claim(a.id, "w1", LEASE).await.unwrap();
    h.store
        .finish(a.id, "w1", Ok(json!("found")))
        .await
        .unwrap();
    h.store.park_run(run.id).await.unwrap();
    h.store
        .decide(b.id, "bob", airlock_ledger::Decision::Approve)
        .await
        .unwrap();

    // Resuming: only the sibling is claimable; the settled call is not run again.
    assert!(h.store.claim(a.id, "w2", LEASE).await.is_err());
    h.store.claim(b.id, "w2", LEASE).await.unwrap();
    h.store
        .finish(b.id, "w2", Ok(json!("refunded")))
        .await
        .unwrap();
    let rows = h.store.run_invocations(run.id).await.unwrap();
    let order: Vec<_> = rows.iter().map(|i| (i.id, i.state, i.attempts)).collect();
    assert_eq!(
        order,
        vec![(a.id, S::Succeeded, 1), (b.id, S::Succeeded, 1)]
    );
}

/// LEDGER-3: 16 concurrent claimers of one at-most-once row: the body runs once; the rest are told
/// the row is taken.
pub(crate) async fn ledger_3_sixteen_claimers(h: &Harness) {
    let s = h.session().await;
    let id = h
        .store
        .record(h.call(s, "send_email", json!({"to": "x"})))
        .await
        .unwrap()
        .invocation
        .id;
    let runs = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..16 {
        let (store, runs) = (Arc::clone(&h.store), Arc::clone(&runs));
        tasks.push(tokio::spawn(async move {
            let owner = format!("w{i}");
            match store.claim(id, &owner, LEASE).await {
                Ok(_) => {
                    runs.fetch_add(1, Ordering::SeqCst);
                    store.finish(id, &owner, Ok(json!("sent"))).await.unwrap();
                    true
                }
                Err(LedgerError::Taken { .. }) => false,
                Err(e) => panic!("unexpected: {e}"),
            }
        }));
    }
    let mut winners = 0;
    for t in tasks {
        winners += usize::from(t.await.unwrap());
    }
    assert_eq!((winners, runs.load(Ordering::SeqCst)), (1, 1));
    assert_eq!(h.store.get(id).await.unwrap().attempts, 1);
}

/// LEDGER-8: An at-most-once row found running with an expired lease becomes in doubt and parks
/// with an expiry; it is not run.
pub(crate) async fn ledger_8_expired_lease_in_doubt(h: &Harness) {
    let s = h.session().await;
    let id = h
        .store
        .record(h.call(s, "charge", json!({"cents": 500})))
        .await
        .unwrap()
        .invocation
        .id;
    h.store.claim(id, "w1", LEASE).await.unwrap();
    let now = h.clock_now();
    assert!(
        h.store
            .sweep(now + Duration::from_secs(5))
            .await
            .unwrap()
            .in_doubt
            .is_empty()
    );
    let later = now + LEASE + Duration::from_secs(1);
    let report = h.store.sweep(later).await.unwrap();
    assert_eq!(report.in_doubt, vec![id]);
    let row = h.store.get(id).await.unwrap();
    assert_eq!(row.state, S::InDoubt);
    assert_eq!(row.expires_at, Some(later + TTL));
    assert_eq!(row.lease.as_ref().unwrap().owner, "w1");
    assert!(matches!(
        h.store.claim(id, "w2", LEASE).await,
        Err(LedgerError::Taken {
            state: S::InDoubt,
            ..
        })
    ));
    assert_eq!(h.store.in_doubt().await.unwrap().len(), 1);
}

/// LEDGER-9: An idempotent row with an expired lease is re-run once with the same key, and completes.
pub(crate) async fn ledger_9_idempotent_rerun(h: &Harness) {
    let s = h.session().await;
    let mut call = h.call(s, "crm__upsert", json!({"email": "a@b"}));
    call.effect = Effect::Idempotent;
    call.source_kind = SourceKind::Mcp;
    let id = h.store.record(call).await.unwrap().invocation.id;
    let first = h.store.claim(id, "w1", LEASE).await.unwrap();
    let report = h.store.sweep(h.clock_now() + LEASE * 2).await.unwrap();
    assert_eq!(report.retried, vec![id]);
    let second = h.store.claim(id, "w2", LEASE).await.unwrap();
    assert_eq!(second.idempotency_key, first.idempotency_key);
    assert_eq!(second.attempts, 2);
    let done = h
        .store
        .finish(id, "w2", Ok(json!({"ok": true})))
        .await
        .unwrap();
    assert_eq!(done.state, S::Succeeded);
    // The lost owner cannot overwrite the re-run's result.
    assert!(matches!(
        h.store.finish(id, "w1", Ok(json!(1))).await,
        Err(LedgerError::AlreadyFinished { .. })
    ));
    assert_eq!(
        h.store.sweep(h.clock_now() + LEASE * 10).await.unwrap(),
        Default::default()
    );
}

/// LEDGER-10: (ledger side) A row claimed by a process that stops renewing its lease does not stay
/// running: renewals keep it alive, and after the lease it is in doubt or re-run.
/// LEDGER-64: the relay's lease owner marks a row that runs as its upstream's task, so no
/// process may claim under that name; a row claimed by a process is not such a row.
pub(crate) async fn ledger_64_no_process_claims_as_the_upstream_task(h: &Harness) {
    let s = h.session().await;
    let id = h
        .store
        .record(h.call(s, "mcp_write", json!({"a": 1})))
        .await
        .unwrap()
        .invocation
        .id;
    let refused = h.store.claim(id, airlock_ledger::RELAY_OWNER, LEASE).await;
    assert!(
        matches!(refused, Err(LedgerError::Invalid(_))),
        "{refused:?}"
    );
    assert_eq!(h.store.get(id).await.unwrap().state, S::Pending);
    let claimed = h.store.claim(id, "endpoint-1", LEASE).await.unwrap();
    assert!(!claimed.runs_as_upstream_task());
}

pub(crate) async fn ledger_10_claimed_row_does_not_stay_running(h: &Harness) {
    let s = h.session().await;
    let amo = h
        .store
        .record(h.call(s, "mcp_write", json!({"a": 1})))
        .await
        .unwrap()
        .invocation
        .id;
    let mut idem = h.call(s, "mcp_write", json!({"a": 2}));
    idem.effect = Effect::Idempotent;
    let idem = h.store.record(idem).await.unwrap().invocation.id;
    h.store.claim(amo, "endpoint-1", LEASE).await.unwrap();
    h.store.claim(idem, "endpoint-1", LEASE).await.unwrap();
    // While the process lives it renews; a sweep inside the renewed lease changes nothing.
    h.clock.advance(LEASE - Duration::from_secs(1));
    h.store.renew_lease(amo, "endpoint-1", LEASE).await.unwrap();
    h.store
        .renew_lease(idem, "endpoint-1", LEASE)
        .await
        .unwrap();
    assert_eq!(
        h.store
            .sweep(h.clock_now() + Duration::from_secs(2))
            .await
            .unwrap(),
        Default::default()
    );
    // Someone else cannot renew it.
    assert!(matches!(
        h.store.renew_lease(amo, "intruder", LEASE).await,
        Err(LedgerError::LeaseLost { .. })
    ));
    // The process is killed: no more renewals.
    let report = h
        .store
        .sweep(h.clock_now() + LEASE + Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!((report.in_doubt, report.retried), (vec![amo], vec![idem]));
}

/// DECL-11: Remote tools can never be transactional (the ledger refuses too, behind the loader).
pub(crate) async fn decl_11_remote_never_transactional(h: &Harness) {
    let s = h.session().await;
    for kind in [SourceKind::Mcp, SourceKind::Api] {
        let mut call = h.call(s, "crm__create", json!({}));
        call.effect = Effect::Transactional;
        call.source_kind = kind;
        let err = h.store.record(call).await.unwrap_err();
        assert!(matches!(err, LedgerError::Invalid(_)), "{err}");
        assert!(
            err.to_string()
                .contains("only local tools can be transactional")
        );
    }
    let mut call = h.call(s, "crm__create", json!({}));
    call.source_kind = SourceKind::Mcp;
    let id = h.store.record(call).await.unwrap().invocation.id;
    let err = h
        .store
        .run_transactional(id, "w1", tx_tool(|_| Box::pin(async { Ok(json!({})) })))
        .await
        .unwrap_err();
    assert!(matches!(err, LedgerError::Invalid(_)), "{err}");
    assert_eq!(h.store.get(id).await.unwrap().state, S::Pending);
}
