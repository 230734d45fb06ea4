//! Decisions (docs/rules.md DECIDE-2 to DECIDE-7, POLICY-15), plus questions (`ask_human`).

use std::sync::Arc;
use std::time::Duration;

use airlock_ledger::{
    Approval, CallKind, Decision, DecisionKind, InvocationState as S, LedgerError, NewRun,
    Resolution, ResumeOutcome, RunId, RunStatus, SessionId, Settlement,
};
use serde_json::json;
use tokio::time::Instant;

use crate::harness::{DIGEST, Harness, LEASE};

async fn parked(
    h: &Harness,
    s: SessionId,
    run: Option<RunId>,
    args: serde_json::Value,
) -> airlock_ledger::Invocation {
    let mut call = h.call(s, "refund", args);
    call.approval = Approval::Always;
    call.run_id = run;
    h.store.record(call).await.unwrap().invocation
}

async fn run(h: &Harness, s: SessionId) -> RunId {
    h.store
        .create_run(NewRun {
            session_id: s,
            agent: "support".into(),
            definitions_digest: DIGEST.into(),
            definitions_snapshot: json!({}),
            lease: None,
        })
        .await
        .unwrap()
        .id
}

/// DECIDE-2: Park → approve → runs exactly once, and whoever waits gets the result.
pub(crate) async fn decide_2_approve_runs_once_waiter_gets_result(h: &Harness) {
    let s = h.session().await;
    let row = parked(h, s, None, json!({"amount": 5})).await;
    let store = Arc::clone(&h.store);
    let waiter = tokio::spawn(async move {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut seen = None;
        for _ in 0..10 {
            let now = store.wait_for_change(row.id, seen, deadline).await.unwrap();
            if now.state.is_terminal() {
                return now;
            }
            seen = Some(now.version);
        }
        panic!("the row never settled");
    });
    h.store
        .decide(row.id, "bob", Decision::Approve)
        .await
        .unwrap();
    let claims = futures::future::join_all((0..4).map(|i| {
        let store = Arc::clone(&h.store);
        async move { store.claim(row.id, &format!("w{i}"), LEASE).await }
    }))
    .await;
    let winners: Vec<_> = claims.into_iter().filter_map(Result::ok).collect();
    assert_eq!(winners.len(), 1);
    let owner = winners[0].lease.clone().unwrap().owner;
    h.store
        .finish(row.id, &owner, Ok(json!({"refunded": 5})))
        .await
        .unwrap();
    let seen = waiter.await.unwrap();
    assert_eq!(
        seen.settlement(),
        Some(Settlement::Succeeded(&json!({"refunded": 5})))
    );
    assert_eq!(seen.attempts, 1);
}

/// DECIDE-3: Park → deny(reason) → denied, the model sees `{"denied": reason}`, nothing runs, the
/// run continues.
pub(crate) async fn decide_3_deny(h: &Harness) {
    let s = h.session().await;
    let r = run(h, s).await;
    let row = parked(h, s, Some(r), json!({"amount": 5})).await;
    let denied = h
        .store
        .decide(
            row.id,
            "bob",
            Decision::Deny {
                reason: "not today".into(),
            },
        )
        .await
        .unwrap();
    assert_eq!(denied.state, S::Denied);
    assert_eq!(
        denied.settlement(),
        Some(Settlement::Denied {
            reason: "not today"
        })
    );
    assert!(h.store.claim(row.id, "w1", LEASE).await.is_err());
    assert_eq!(h.store.get_run(r).await.unwrap().status, RunStatus::Running);
}

/// MCP-15: a withdrawal is a decision of its own word, not a denial's reason: the row is
/// `denied` (nothing claims it) with the decision `withdrawn`, and only a waiting row can be
/// withdrawn.
pub(crate) async fn mcp_15_withdraw_is_its_own_decision(h: &Harness) {
    let s = h.session().await;
    let row = parked(h, s, None, json!({"amount": 5})).await;
    let withdrawn = h
        .store
        .decide(row.id, "ada", Decision::Withdraw)
        .await
        .unwrap();
    assert_eq!(withdrawn.state, S::Denied);
    let decision = withdrawn.decision.clone().unwrap();
    assert_eq!(
        (decision.decision, decision.reason),
        (DecisionKind::Withdrawn, None)
    );
    assert!(h.store.claim(row.id, "w1", LEASE).await.is_err());
    // Read back from the database, the word is kept.
    let read = h.store.get(row.id).await.unwrap();
    assert_eq!(read.decision.unwrap().decision, DecisionKind::Withdrawn);
    let approved = parked(h, s, None, json!({"amount": 6})).await;
    h.store
        .decide(approved.id, "bob", Decision::Approve)
        .await
        .unwrap();
    let refused = h.store.decide(approved.id, "ada", Decision::Withdraw).await;
    assert!(
        matches!(refused, Err(LedgerError::AlreadyDecided { .. })),
        "{refused:?}"
    );
}

/// DECIDE-4: In doubt → "did not run" → re-executed exactly once; "it ran" → settled with the note.
pub(crate) async fn decide_4_resolve_in_doubt(h: &Harness) {
    let s = h.session().await;
    let a = h
        .store
        .record(h.call(s, "charge", json!({"n": 1})))
        .await
        .unwrap()
        .invocation;
    let b = h
        .store
        .record(h.call(s, "charge", json!({"n": 2})))
        .await
        .unwrap()
        .invocation;
    h.store.claim(a.id, "w1", LEASE).await.unwrap();
    h.store.claim(b.id, "w1", LEASE).await.unwrap();
    h.store.sweep(h.clock_now() + LEASE * 2).await.unwrap();

    let did_not = Decision::Resolve {
        resolution: Resolution::DidNotRun,
        note: "no charge in Stripe".into(),
    };
    let again = h.store.decide(a.id, "ops", did_not.clone()).await.unwrap();
    assert_eq!(again.state, S::Approved);
    h.store.claim(a.id, "w2", LEASE).await.unwrap();
    assert!(matches!(
        h.store.claim(a.id, "w3", LEASE).await,
        Err(LedgerError::Taken { .. })
    ));
    let done = h
        .store
        .finish(a.id, "w2", Ok(json!("charged")))
        .await
        .unwrap();
    assert_eq!((done.state, done.attempts), (S::Succeeded, 2));

    let ran = Decision::Resolve {
        resolution: Resolution::Ran,
        note: "charge ch_1 exists".into(),
    };
    let settled = h.store.decide(b.id, "ops", ran).await.unwrap();
    assert_eq!(settled.state, S::Resolved);
    assert_eq!(
        settled.settlement(),
        Some(Settlement::Resolved {
            resolution: Resolution::Ran,
            note: "charge ch_1 exists"
        })
    );
    let err = h.store.decide(b.id, "ops2", did_not).await.unwrap_err();
    assert!(err.to_string().contains("resolved: ran by ops"), "{err}");
    assert!(h.store.claim(b.id, "w2", LEASE).await.is_err());
}

/// DECIDE-4: In doubt → "abandoned" with a reason → terminal `abandoned`, never claimed or
/// finished; a blank reason is refused and changes nothing; a second resolution names the
/// first; the audit chain still verifies.
pub(crate) async fn decide_4_abandon_in_doubt(h: &Harness) {
    let s = h.session().await;
    let row = h
        .store
        .record(h.call(s, "charge", json!({"n": 3})))
        .await
        .unwrap()
        .invocation;
    h.store.claim(row.id, "w1", LEASE).await.unwrap();
    h.store.sweep(h.clock_now() + LEASE * 2).await.unwrap();
    let abandon = |note: &str| Decision::Resolve {
        resolution: Resolution::Abandoned,
        note: note.into(),
    };

    let err = h
        .store
        .decide(row.id, "ops", abandon(" "))
        .await
        .unwrap_err();
    assert!(matches!(err, LedgerError::Invalid(_)), "{err}");
    assert_eq!(h.store.get(row.id).await.unwrap().state, S::InDoubt);

    let given_up = h
        .store
        .decide(
            row.id,
            "ops",
            abandon("provider has no record; customer refunded by hand"),
        )
        .await
        .unwrap();
    assert_eq!(given_up.state, S::Abandoned);
    assert!(given_up.state.is_terminal());
    assert_eq!(
        given_up.settlement(),
        Some(Settlement::Abandoned {
            reason: "provider has no record; customer refunded by hand"
        })
    );
    assert_eq!(given_up.resolution.as_ref().unwrap().by, "ops");
    assert_eq!(given_up.attempts, 1, "nothing ran again");

    // It never runs: not claimed, not finished late by the lease owner, not re-resolved.
    assert!(h.store.claim(row.id, "w2", LEASE).await.is_err());
    assert!(
        h.store
            .finish(row.id, "w1", Ok(json!("late")))
            .await
            .is_err()
    );
    let did_not = Decision::Resolve {
        resolution: Resolution::DidNotRun,
        note: "try again".into(),
    };
    let err = h.store.decide(row.id, "ops2", did_not).await.unwrap_err();
    assert!(
        err.to_string().contains("resolved: abandoned by ops"),
        "{err}"
    );
    let now = h.store.get(row.id).await.unwrap();
    assert_eq!((now.state, now.attempts), (S::Abandoned, 1));
    assert_eq!(h.store.verify().await.unwrap().first_break, None);
}

/// DECIDE-5: A second decision fails naming the first; deny never overwrites approve; 16 concurrent
/// deciders leave exactly one decision.
pub(crate) async fn decide_5_one_decision_stands(h: &Harness) {
    let s = h.session().await;
    let row = parked(h, s, None, json!({"amount": 5})).await;
    h.store
        .decide(row.id, "alice", Decision::Approve)
        .await
        .unwrap();
    let err = h
        .store
        .decide(
            row.id,
            "bob",
            Decision::Deny {
                reason: "no".into(),
            },
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, LedgerError::AlreadyDecided { by, decision, .. } if by == "alice" && decision == "approved"),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "invocation {} was already decided: approved by alice",
            row.id
        )
    );
    assert_eq!(h.store.get(row.id).await.unwrap().state, S::Approved);

    let row = parked(h, s, None, json!({"amount": 6})).await;
    let results = futures::future::join_all((0..16).map(|i| {
        let store = Arc::clone(&h.store);
        async move {
            let d = if i % 2 == 0 {
                Decision::Approve
            } else {
                Decision::Deny {
                    reason: format!("r{i}"),
                }
            };
            (i, store.decide(row.id, &format!("person{i}"), d).await)
        }
    }))
    .await;
    let ok: Vec<_> = results
        .iter()
        .filter(|(_, r)| r.is_ok())
        .map(|(i, _)| *i)
        .collect();
    assert_eq!(ok.len(), 1);
    let winner = format!("person{}", ok[0]);
    for (_, r) in &results {
        if let Err(e) = r {
            assert!(
                matches!(e, LedgerError::AlreadyDecided { by, .. } if *by == winner),
                "{e}"
            );
        }
    }
    let stored = h.store.get(row.id).await.unwrap().decision.unwrap();
    assert_eq!(stored.by, winner);
}

/// DECIDE-6: Approving a row that is not awaiting a decision says which state it is in.
pub(crate) async fn decide_6_approve_wrong_state(h: &Harness) {
    let s = h.session().await;
    let row = h
        .store
        .record(h.call(s, "lookup", json!({})))
        .await
        .unwrap()
        .invocation;
    let err = h
        .store
        .decide(row.id, "bob", Decision::Approve)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "invocation {} is pending, expected awaiting_approval | proposed",
            row.id
        )
    );
    h.store.claim(row.id, "w1", LEASE).await.unwrap();
    let err = h
        .store
        .decide(row.id, "bob", Decision::Approve)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            LedgerError::WrongState {
                actual: S::Running,
                ..
            }
        ),
        "{err}"
    );
}

/// POLICY-15: Past `expires_at` a row cannot be approved; sweeper and reads mark it expired; the
/// model sees `{"denied": "approval expired"}`; its run fails with `approval_expired`.
pub(crate) async fn policy_15_expiry(h: &Harness) {
    let s = h.session().await;
    let r1 = run(h, s).await;
    let by_decision = parked(h, s, Some(r1), json!({"n": 1})).await;
    let by_read = parked(h, s, None, json!({"n": 2})).await;
    let by_sweep = parked(h, s, None, json!({"n": 3})).await;
    h.clock
        .advance(crate::harness::TTL + Duration::from_secs(1));

    let err = h
        .store
        .decide(by_decision.id, "bob", Decision::Approve)
        .await
        .unwrap_err();
    assert!(matches!(err, LedgerError::Expired { .. }), "{err}");
    let row = h.store.get(by_decision.id).await.unwrap();
    assert_eq!(row.state, S::Expired);
    assert_eq!(row.settlement(), Some(Settlement::Expired));
    let run = h.store.get_run(r1).await.unwrap();
    assert_eq!(
        (run.status, run.status_reason.as_deref()),
        (RunStatus::Failed, Some("approval_expired"))
    );

    // A read persists the expiry (the pending list no longer shows it).
    assert_eq!(h.store.get(by_read.id).await.unwrap().state, S::Expired);
    let report = h.store.sweep(h.clock_now()).await.unwrap();
    assert_eq!(report.expired, vec![by_sweep.id]);
    assert!(
        h.store
            .pending_approvals(Default::default())
            .await
            .unwrap()
            .is_empty()
    );
}

/// DECIDE-6: A decision on a row whose run was cancelled or failed is refused.
pub(crate) async fn decide_6_closed_run_refuses_decisions(h: &Harness) {
    let s = h.session().await;
    for status in [RunStatus::Cancelled, RunStatus::Failed] {
        let r = run(h, s).await;
        let row = parked(h, s, Some(r), json!({"status": status.as_str()})).await;
        h.store
            .end_run(r, status, Some("user stopped it".into()))
            .await
            .unwrap();
        let err = h
            .store
            .decide(row.id, "bob", Decision::Approve)
            .await
            .unwrap_err();
        assert!(
            matches!(err, LedgerError::RunClosed { status: st, .. } if st == status),
            "{err}"
        );
        assert_eq!(
            h.store.get(row.id).await.unwrap().state,
            S::AwaitingApproval
        );
    }
}

/// DECIDE-7: Two gated calls of one step approved concurrently: the run resumes exactly once.
pub(crate) async fn decide_7_run_resumes_once(h: &Harness) {
    let s = h.session().await;
    let r = run(h, s).await;
    let a = parked(h, s, Some(r), json!({"n": 1})).await;
    let b = parked(h, s, Some(r), json!({"n": 2})).await;
    h.store.park_run(r).await.unwrap();
    assert_eq!(
        h.store.resume_run(r).await.unwrap(),
        ResumeOutcome::StillWaiting
    );
    // Each decider approves, then tries to resume the run.
    let outcomes = futures::future::join_all([a.id, b.id].map(|id| {
        let store = Arc::clone(&h.store);
        async move {
            store.decide(id, "bob", Decision::Approve).await.unwrap();
            store.resume_run(r).await.unwrap()
        }
    }))
    .await;
    let resumed = outcomes
        .iter()
        .filter(|o| **o == ResumeOutcome::Resumed)
        .count();
    assert_eq!(resumed, 1, "{outcomes:?}");
    assert_eq!(
        h.store.resume_run(r).await.unwrap(),
        ResumeOutcome::NotParked(RunStatus::Running)
    );
}

/// `ask_human`: a question parks; an answer becomes the result; declining is a deny.
pub(crate) async fn question_answer_and_decline(h: &Harness) {
    let s = h.session().await;
    let mut q = h.call(s, "ask_human", json!({"question": "Which plan?"}));
    q.kind = CallKind::Question;
    q.source_kind = airlock_ledger::SourceKind::Builtin;
    let row = h.store.record(q.clone()).await.unwrap().invocation;
    assert_eq!(row.state, S::AwaitingAnswer);
    assert!(row.expires_at.is_some());
    assert!(
        h.store
            .decide(row.id, "bob", Decision::Approve)
            .await
            .is_err()
    );
    let answered = h
        .store
        .decide(row.id, "bob", Decision::Answer { text: "Pro".into() })
        .await
        .unwrap();
    assert_eq!(answered.state, S::Succeeded);
    assert_eq!(
        answered.settlement(),
        Some(Settlement::Succeeded(&json!({"answer": "Pro"})))
    );
    assert_eq!(answered.decision.unwrap().decision, DecisionKind::Answered);

    q.call_id = "q2".into();
    let row = h.store.record(q).await.unwrap().invocation;
    let declined = h
        .store
        .decide(
            row.id,
            "bob",
            Decision::Deny {
                reason: "ask sales".into(),
            },
        )
        .await
        .unwrap();
    assert_eq!(
        declined.settlement(),
        Some(Settlement::Denied {
            reason: "ask sales"
        })
    );
}

/// DECIDE-20: an edited approval keeps the proposed arguments (and their hash) beside the
/// approved ones, records the decision as `edited`, is the only decision its row takes, and
/// is part of the audit chain: the approved arguments cannot be changed unnoticed. It is no
/// `once` grant, and a row nobody edited runs with the arguments it was given.
pub(crate) async fn decide_20_an_edit_keeps_both_arguments_and_verifies(h: &Harness) {
    let s = h.session().await;
    let row = parked(h, s, None, json!({"amount": 500})).await;
    let refused = h
        .store
        .decide(
            row.id,
            "ada",
            Decision::Edit {
                arguments: json!([1]),
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(refused, LedgerError::Invalid(_)), "{refused:?}");
    let edit = Decision::Edit {
        arguments: json!({"amount": 50}),
    };
    let edited = h.store.decide(row.id, "ada", edit.clone()).await.unwrap();
    assert_eq!(edited.state, S::Approved);
    assert_eq!(edited.decision.unwrap().decision, DecisionKind::Edited);
    let read = h.store.get(row.id).await.unwrap();
    assert_eq!(read.arguments, json!({"amount": 500}));
    assert_eq!(read.arguments_hash, row.arguments_hash);
    assert_eq!(read.approved_arguments, Some(json!({"amount": 50})));
    assert_eq!(read.effective_arguments(), &json!({"amount": 50}));
    let again = h.store.decide(row.id, "bob", Decision::Approve).await;
    assert!(
        matches!(&again, Err(LedgerError::AlreadyDecided { by, decision, .. }) if by == "ada" && decision == "edited"),
        "{again:?}"
    );
    // The edit is no `once` grant: the same proposed call asks a person again.
    let mut same = h.call(h.session().await, "refund", json!({"amount": 500}));
    same.approval = Approval::Once;
    let same = h.store.record(same).await.unwrap().invocation;
    assert_eq!(same.state, S::AwaitingApproval);
    assert_eq!(same.effective_arguments(), &json!({"amount": 500}));
    assert_eq!(h.store.verify().await.unwrap().first_break, None);
    h.raw
        .exec(&format!(
            "UPDATE invocations SET approved_arguments = '{{\"amount\":5000}}' WHERE id = '{}'",
            row.id
        ))
        .await;
    let broken = h.store.verify().await.unwrap().first_break.unwrap();
    assert_eq!(broken.id, row.id.to_string());
}
