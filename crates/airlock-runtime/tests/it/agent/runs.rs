//! A run's bounds, events and snapshot (docs/rules.md AGENT-8..AGENT-16),
//! and one open run per session across processes (AGENT-32).

use std::sync::Arc;
use std::time::Duration;

use airlock_runtime::agent::{Limits, RunEvent, RunState};
use airlock_runtime::ledger::{
    LedgerError, ManualClock, NewRun, NewSession, ResumeOutcome, SessionId,
};
use serde_json::json;

use super::{
    Extras, Layout, TREE, World, answer, approve, calls, on_both_backends, request, run_with_events,
};
use crate::gateway::Backend;

#[tokio::test]
async fn max_steps_fails_the_run() {
    let w = World::new(Backend::Sqlite).await.unwrap();
    let again = || calls(&[("count", json!({"amount": 1}))]);
    w.script("boss", [again(), again(), again()]);
    let limits = Limits {
        max_steps: 2,
        ..Limits::default()
    };
    let agents = w.agents_on(Arc::clone(&w.store), TREE, limits);
    let (report, events) = run_with_events(&agents, request("boss", "loop")).await;
    assert_eq!(report.status, RunState::Failed);
    assert!(
        report.error.as_deref().unwrap().contains("max_steps 2"),
        "{report:?}"
    );
    assert_eq!((w.asked("boss"), w.ran("count")), (2, 2));
    assert!(matches!(
        events.last(),
        Some(RunEvent::Done {
            status: RunState::Failed,
            ..
        })
    ));
}

#[tokio::test]
async fn done_is_the_last_event_after_every_other() {
    let w = World::new(Backend::Sqlite).await.unwrap();
    w.script(
        "boss",
        [calls(&[("count", json!({"amount": 1}))]), answer("counted")],
    );
    let agents = w.agents(TREE);
    let (report, events) = run_with_events(&agents, request("boss", "count")).await;
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| match e {
            RunEvent::Status { .. } => "status",
            RunEvent::Token { .. } => "token",
            RunEvent::ToolCall { .. } => "tool_call",
            RunEvent::ToolResult { .. } => "tool_result",
            RunEvent::ApprovalRequired { .. } => "approval_required",
            RunEvent::CredentialRequired { .. } => "credential_required",
            RunEvent::ConfirmationRequired { .. } => "confirmation_required",
            RunEvent::Done { .. } => "done",
        })
        .collect();
    assert_eq!(
        kinds,
        ["status", "tool_call", "tool_result", "token", "done"]
    );
    match events.last().unwrap() {
        RunEvent::Done {
            answer,
            session_id,
            proposals,
            ..
        } => {
            assert_eq!(answer.as_deref(), Some("counted"));
            assert_eq!(*session_id, report.session_id);
            assert!(proposals.is_empty());
        }
        other => panic!("{other:?}"),
    }
    let wire = serde_json::to_value(events.last().unwrap()).unwrap();
    assert_eq!(wire["type"], "done");
    assert_eq!(wire["proposals"], json!([]));
}

/// The deployment after a connection changed: `count` is gone, `extra` arrived.
const CHANGED: Layout = &[
    ("boss", &["gate", "propose", "helper"]),
    ("helper", &["count", "gate", "propose", "leaf"]),
    ("leaf", &["count", "gate", "propose"]),
];

#[tokio::test]
async fn drift_is_reported_and_a_tool_gone_fails_loudly() {
    let w = World::new(Backend::Sqlite).await.unwrap();
    w.script(
        "boss",
        [
            calls(&[("gate", json!({"amount": 1}))]),
            calls(&[("count", json!({"amount": 2}))]),
            answer("count was gone"),
        ],
    );
    let (parked, _) = run_with_events(&w.agents(TREE), request("boss", "go")).await;
    approve(w.store.as_ref(), parked.waiting[0]).await;
    assert_eq!(
        w.store.resume_run(parked.run_id).await.unwrap(),
        ResumeOutcome::Resumed
    );
    let changed = w.agents(CHANGED);
    let done = changed.continue_resumed(parked.run_id).await.unwrap();
    assert_eq!(done.status, RunState::Completed, "{done:?}");
    let drift = done.drift.expect("drift reported");
    assert_eq!(drift.removed, ["count"]);
    // The model was still offered the snapshot it started with.
    assert!(w.offered("boss").contains(&"count".to_owned()));
    assert_eq!(w.ran("count"), 0);
    let rows = w.store.run_invocations(parked.run_id).await.unwrap();
    assert_eq!(rows.len(), 1, "the gone tool was never recorded: {rows:?}");
    let steps = w.store.run_steps(parked.run_id).await.unwrap();
    let shown = steps[1].results.as_ref().unwrap().to_string();
    assert!(
        shown.contains("tool `count` is no longer served"),
        "{shown}"
    );
}

/// AGENT-32: two processes (two stores on one database) starting a run in one session at the
/// same instant: exactly one starts, the other is refused naming it; once it ended, the
/// session takes a new run.
async fn one_open_run_per_session_across_processes(backend: Backend) {
    let Some(w) = World::new(backend).await else {
        return;
    };
    let other = w.other_process().await;
    let session = SessionId::new();
    let new_session = NewSession {
        channel: "run".into(),
        principal: None,
        metadata: json!({}),
    };
    w.store.create_session(session, new_session).await.unwrap();
    let new_run = || NewRun {
        session_id: session,
        agent: "boss".into(),
        definitions_digest: String::new(),
        definitions_snapshot: json!({}),
        lease: None,
    };
    let (a, b) = tokio::join!(w.store.create_run(new_run()), other.create_run(new_run()));
    let (won, lost) = match (a, b) {
        (Ok(run), Err(e)) | (Err(e), Ok(run)) => (run, e),
        other => panic!("exactly one run starts: {other:?}"),
    };
    assert!(
        matches!(lost, LedgerError::SessionBusy { run: Some(r), .. } if r == won.id),
        "{lost:?}"
    );
    w.store.cancel_run(won.id).await.unwrap();
    other.create_run(new_run()).await.unwrap();
}

on_both_backends!(
    one_open_run_per_session_across_processes,
    a_step_costs_three_durable_commits
);

/// AGENT-10, AGENT-35: the wall-clock budget, on an injected clock (each model turn takes four
/// minutes of a ten-minute budget): the hour spent parked does not count, the time before the
/// park does (cumulative across the resume), and the run that spends it fails saying so.
#[tokio::test]
async fn the_wall_clock_budget_excludes_parked_time_and_spans_resumes() {
    let w = World::new(Backend::Sqlite).await.unwrap();
    let clock = ManualClock::new(time::OffsetDateTime::now_utc());
    w.turns_take(&clock, Duration::from_secs(240));
    let count = || calls(&[("count", json!({"amount": 1}))]);
    let gate = calls(&[("gate", json!({"amount": 1}))]);
    w.script("boss", [gate, count(), count(), answer("too late")]);
    let extras = Extras {
        clock: Some(clock.clone()),
        ..Extras::default()
    };
    let agents = w.agents_with(Arc::clone(&w.store), TREE, Limits::default(), extras);
    let (parked, _) = run_with_events(&agents, request("boss", "slow")).await;
    assert_eq!(parked.status, RunState::Parked, "{parked:?}");
    clock.advance(Duration::from_secs(3600));
    approve(w.store.as_ref(), parked.waiting[0]).await;
    let resumed = w.store.resume_run(parked.run_id).await.unwrap();
    assert_eq!(resumed, ResumeOutcome::Resumed);
    let done = agents.continue_resumed(parked.run_id).await.unwrap();
    assert_eq!(done.status, RunState::Failed, "{done:?}");
    let reason = done.error.as_deref().unwrap_or_default();
    assert!(reason.contains("wall-clock budget of 600 s"), "{reason}");
    // Turns 1 (before the park), 2 and 3 (12 minutes in all); never the fourth.
    assert_eq!(w.asked("boss"), 3);
}

/// AGENT-53, LEDGER-35: a run's records share commits. A 10-step run (nine steps of one
/// ungated call, then the answer) makes 30 durable commits: its session, its start (run,
/// details, the answer to what the session held), three a step (the turn with the results of
/// the step before it, and the call's record-and-claim and finish) and its ending with the
/// answer. Before the records shared them it made 4.4 a step.
async fn a_step_costs_three_durable_commits(backend: Backend) {
    let Some(w) = World::new(backend).await else {
        return;
    };
    let ledger = match &w.location {
        crate::gateway::Location::Sqlite(path) => {
            airlock_runtime::ledger::SqliteStore::open(path, Default::default())
                .await
                .unwrap()
        }
        crate::gateway::Location::Postgres(options) => {
            airlock_runtime::ledger::PgStore::connect((**options).clone(), Default::default())
                .await
                .unwrap()
        }
    };
    let ledger = Arc::new(ledger);
    let step = || calls(&[("count", json!({"amount": 1}))]);
    w.script("boss", (0..9).map(|_| step()).chain([answer("done")]));
    let agents = w.agents_on(ledger.clone(), TREE, Limits::default());
    let (before, spent_before) = (ledger.commits(), ledger.commit_time());
    let started = std::time::Instant::now();
    let report = agents
        .run(
            request("boss", "count nine times"),
            None,
            tokio_util::sync::CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!((report.status, report.steps), (RunState::Completed, 10));
    assert_eq!(report.answer.as_deref(), Some("done"));
    assert_eq!((w.asked("boss"), w.ran("count")), (10, 9));
    assert_eq!(ledger.commits() - before, 30);
    // The commits' time is measured, and is part of the run's.
    let committing = ledger.commit_time() - spent_before;
    assert!(committing > Duration::ZERO && committing < started.elapsed());
}

/// AGENT-53: a run cancelled by another process while its step's call runs sends no call of
/// its next step: the next turn's commit reads the cancel, and the run stops cancelled.
#[tokio::test]
async fn a_cancel_by_another_process_stops_the_run_before_its_next_calls() {
    let w = World::new(Backend::Sqlite).await.unwrap();
    let step = || calls(&[("count", json!({"amount": 1}))]);
    w.script("boss", [step(), step(), answer("never")]);
    let agents = w.agents(TREE);
    // Room for one event: the run waits on its second until the test reads the first.
    let (tx, mut rx) = tokio::sync::mpsc::channel(1);
    let running = tokio::spawn({
        let agents = agents.clone();
        async move {
            let cancel = tokio_util::sync::CancellationToken::new();
            agents.run(request("boss", "count"), Some(tx), cancel).await
        }
    });
    let Some(RunEvent::Status { run_id, .. }) = rx.recv().await else {
        panic!("the first event is the run's status");
    };
    for _ in 0..500 {
        if w.ran("count") == 1 {
            break;
        }
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(w.ran("count"), 1, "the first step's call ran");
    w.other_process().await.cancel_run(run_id).await.unwrap();
    while rx.recv().await.is_some() {}
    let report = running.await.unwrap().unwrap();
    assert_eq!(report.status, RunState::Cancelled, "{report:?}");
    assert_eq!(w.ran("count"), 1, "no call of the next step was sent");
}
