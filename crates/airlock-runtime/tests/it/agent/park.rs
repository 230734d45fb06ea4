//! Parking and resuming (docs/rules.md AGENT-3..AGENT-7): a step's calls settle together, the
//! run resumes exactly once when the last parked call is decided, in another process too, and
//! nothing is asked or run twice.

use std::sync::Arc;

use airlock_runtime::agent::{AgentError, RunState};
use airlock_runtime::ledger::{InvocationState, ResumeOutcome, RunStatus};
use serde_json::json;

use super::{TREE, World, answer, approve, calls, on_both_backends, request, run_with_events};
use crate::gateway::Backend;

on_both_backends!(
    a_step_with_two_gated_and_one_ungated_call_resumes_once_after_the_last_decision,
    two_concurrent_resumers_resume_once,
    a_batch_approval_of_a_steps_calls_resumes_the_run_once,
    an_edited_approval_runs_on_resume_with_its_arguments_and_the_model_is_told,
);

async fn a_step_with_two_gated_and_one_ungated_call_resumes_once_after_the_last_decision(
    backend: Backend,
) {
    let Some(w) = World::new(backend).await else {
        return;
    };
    w.script(
        "boss",
        [
            calls(&[
                ("gate", json!({"amount": 1})),
                ("count", json!({"amount": 2})),
                ("gate", json!({"amount": 3})),
            ]),
            answer("all three done"),
        ],
    );
    let agents = w.agents(TREE);
    let (parked, events) = run_with_events(&agents, request("boss", "do three things")).await;
    assert_eq!(parked.status, RunState::Parked);
    assert_eq!(parked.waiting.len(), 2, "{parked:?}");
    assert_eq!((w.ran("count"), w.ran("gate")), (1, 0));
    let approvals = events
        .iter()
        .filter(|e| matches!(e, airlock_runtime::agent::RunEvent::ApprovalRequired { .. }))
        .count();
    assert_eq!(approvals, 2);
    drop(agents);

    // A restart: a new process on the same database decides and resumes.
    let store = w.other_process().await;
    approve(store.as_ref(), parked.waiting[0]).await;
    assert_eq!(
        store.resume_run(parked.run_id).await.unwrap(),
        ResumeOutcome::StillWaiting,
        "one call still waits"
    );
    approve(store.as_ref(), parked.waiting[1]).await;
    // The decisions worker leaves a run's approved calls to the run (AGENT-12).
    assert!(store.approved_unclaimed(10).await.unwrap().is_empty());
    assert_eq!(
        store.resume_run(parked.run_id).await.unwrap(),
        ResumeOutcome::Resumed
    );
    let agents = w.agents_on(Arc::clone(&store), TREE, Default::default());
    let done = agents.continue_resumed(parked.run_id).await.unwrap();
    assert_eq!(done.status, RunState::Completed, "{done:?}");
    assert_eq!(done.answer.as_deref(), Some("all three done"));
    // The model was asked once per step; the ungated call was not run again.
    assert_eq!(w.asked("boss"), 2);
    assert_eq!((w.ran("count"), w.ran("gate")), (1, 2));
    assert_eq!(done.steps, 2);
    assert_eq!(done.usage.input_tokens, 20);
    assert_eq!(done.invocations.len(), 3);
    // Read back by anyone, any time.
    assert_eq!(w.agents(TREE).read(parked.run_id).await.unwrap(), done);
}

async fn two_concurrent_resumers_resume_once(backend: Backend) {
    let Some(w) = World::new(backend).await else {
        return;
    };
    w.script(
        "boss",
        [calls(&[("gate", json!({"amount": 1}))]), answer("ok")],
    );
    let agents = w.agents(TREE);
    let (parked, _) = run_with_events(&agents, request("boss", "gate it")).await;
    approve(w.store.as_ref(), parked.waiting[0]).await;
    let other = w.other_process().await;
    let (a, b) = tokio::join!(
        w.store.resume_run(parked.run_id),
        other.resume_run(parked.run_id)
    );
    let outcomes = [a.unwrap(), b.unwrap()];
    let resumed = outcomes
        .iter()
        .filter(|o| **o == ResumeOutcome::Resumed)
        .count();
    assert_eq!(resumed, 1, "{outcomes:?}");
    let done = agents.continue_resumed(parked.run_id).await.unwrap();
    assert_eq!(done.status, RunState::Completed);
    assert_eq!((w.asked("boss"), w.ran("gate")), (2, 1));
}

#[tokio::test]
async fn the_resume_worker_resumes_a_run_once_its_call_is_decided() {
    // The resume worker finds the run and resumes it once; a second look does nothing.
    let w = World::new(Backend::Sqlite).await.unwrap();
    w.script(
        "boss",
        [calls(&[("gate", json!({"amount": 1}))]), answer("ok")],
    );
    let agents = w.agents(TREE);
    let (parked, _) = run_with_events(&agents, request("boss", "gate it")).await;
    let stop = tokio_util::sync::CancellationToken::new();
    let worker = tokio::spawn(airlock_runtime::agent::resume::work_polling_every(
        agents.clone(),
        stop.clone(),
        std::time::Duration::from_secs(3600),
    ));
    approve(w.store.as_ref(), parked.waiting[0]).await;
    // Bounded: the worker is woken by the decision's signal, not by its hourly poll.
    let mut status = RunStatus::Parked;
    for _ in 0..500 {
        status = w.store.get_run(parked.run_id).await.unwrap().status;
        if status == RunStatus::Succeeded {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(status, RunStatus::Succeeded);
    stop.cancel();
    worker.await.unwrap();
    assert_eq!((w.asked("boss"), w.ran("gate")), (2, 1));
}

#[tokio::test]
async fn cancelling_a_parked_run_expires_its_waiting_calls() {
    let w = World::new(Backend::Sqlite).await.unwrap();
    w.script(
        "boss",
        [calls(&[("gate", json!({"amount": 1}))]), answer("never")],
    );
    let agents = w.agents(TREE);
    let (parked, _) = run_with_events(&agents, request("boss", "gate it")).await;
    let cancelled = agents.cancel(parked.run_id).await.unwrap();
    assert_eq!(cancelled.status, RunState::Cancelled);
    let row = w.store.get(parked.waiting[0]).await.unwrap();
    assert_eq!(row.state, InvocationState::Expired);
    assert_eq!(
        w.store.resume_run(parked.run_id).await.unwrap(),
        ResumeOutcome::NotParked(RunStatus::Cancelled)
    );
    assert!(matches!(
        agents.cancel(parked.run_id).await,
        Err(AgentError::RunEnded { .. })
    ));
    assert_eq!((w.asked("boss"), w.ran("gate")), (1, 0));
}

#[tokio::test]
async fn one_run_at_a_time_per_session() {
    let w = World::new(Backend::Sqlite).await.unwrap();
    w.script("boss", [calls(&[("gate", json!({"amount": 1}))])]);
    let agents = w.agents(TREE);
    let (parked, _) = run_with_events(&agents, request("boss", "gate it")).await;
    let mut again = request("boss", "and again");
    again.session_id = Some(parked.session_id);
    let refused = agents
        .run(again, None, tokio_util::sync::CancellationToken::new())
        .await
        .unwrap_err();
    match refused {
        AgentError::SessionBusy { run, .. } => assert_eq!(run, parked.run_id),
        other => panic!("{other:?}"),
    }
}

/// DECIDE-19: a step's three gated calls approved in one batch decision resume the run once,
/// and all three run.
async fn a_batch_approval_of_a_steps_calls_resumes_the_run_once(backend: Backend) {
    let Some(w) = World::new(backend).await else {
        return;
    };
    w.script(
        "boss",
        [
            calls(&[
                ("gate", json!({"amount": 1})),
                ("gate", json!({"amount": 2})),
                ("gate", json!({"amount": 3})),
            ]),
            answer("all three done"),
        ],
    );
    let agents = w.agents(TREE);
    let (parked, _) = run_with_events(&agents, request("boss", "do three things")).await;
    assert_eq!(parked.waiting.len(), 3, "{parked:?}");
    let store = w.other_process().await;
    let decided = store
        .decide_all(
            parked.waiting.clone(),
            "ops",
            airlock_runtime::ledger::Decision::Approve,
        )
        .await
        .unwrap();
    assert!(decided.iter().all(|r| r.state == InvocationState::Approved));
    assert_eq!(
        store.resume_run(parked.run_id).await.unwrap(),
        ResumeOutcome::Resumed
    );
    assert_ne!(
        store.resume_run(parked.run_id).await.unwrap(),
        ResumeOutcome::Resumed,
        "resumed once"
    );
    let agents = w.agents_on(Arc::clone(&store), TREE, Default::default());
    let done = agents.continue_resumed(parked.run_id).await.unwrap();
    assert_eq!(done.status, RunState::Completed, "{done:?}");
    assert_eq!((w.asked("boss"), w.ran("gate")), (2, 3));
}

/// DECIDE-20, DECIDE-21: a run's parked call approved with edited arguments runs with them when
/// the run resumes, and the model reads which arguments ran beside the result. Arguments the
/// tool's schema refuses, or an edit that changes nothing a surface can check (the ledger
/// transition alone, as the CLI takes it), decide nothing.
async fn an_edited_approval_runs_on_resume_with_its_arguments_and_the_model_is_told(
    backend: Backend,
) {
    use airlock_runtime::GatewayError;
    use airlock_runtime::decisions;
    use airlock_runtime::ledger::{Decision, LedgerError};

    let Some(w) = World::new(backend).await else {
        return;
    };
    w.script(
        "boss",
        [calls(&[("gate", json!({"amount": 100}))]), answer("paid")],
    );
    let agents = w.agents(TREE);
    let (parked, _) = run_with_events(&agents, request("boss", "pay")).await;
    let id = parked.waiting[0];
    let edit = |arguments| Decision::Edit { arguments };
    let store = agents.gateway().store().as_ref();
    let unchecked =
        decisions::record(store, &[], id, "alice", edit(json!({"amount": 7})), "cli").await;
    assert!(
        matches!(unchecked, Err(LedgerError::DecisionRefused { .. })),
        "{unchecked:?}"
    );
    let gateway = agents.gateway();
    let bad = decisions::decide(gateway, id, "alice", edit(json!({"amount": "x"})), "api").await;
    match bad {
        Err(GatewayError::BadEdit { error, .. }) => {
            assert!(error.message.contains("/amount"), "{error:?}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        store.get(id).await.unwrap().state,
        InvocationState::AwaitingApproval
    );
    decisions::decide(gateway, id, "alice", edit(json!({"amount": 7})), "api")
        .await
        .unwrap();
    assert_eq!(
        store.resume_run(parked.run_id).await.unwrap(),
        ResumeOutcome::Resumed
    );
    let done = agents.continue_resumed(parked.run_id).await.unwrap();
    assert_eq!(done.status, RunState::Completed, "{done:?}");
    let row = store.get(id).await.unwrap();
    assert_eq!(row.arguments, json!({"amount": 100}));
    assert_eq!(row.result, Some(json!({"echo": {"amount": 7}})));
    let results = w.read("boss").into_iter().find_map(|m| match m {
        airlock_model::Message::ToolResults { results } => Some(results),
        _ => None,
    });
    let told = &results.expect("the model read the result")[0].content;
    assert!(told.contains("edited"), "{told}");
    assert!(told.contains(r#"{"amount":7}"#), "{told}");
}
