//! A run's bounds, events and snapshot (docs/rules.md AGENT-8..AGENT-16).

use std::sync::Arc;

use airlock_runtime::agent::{Limits, RunEvent, RunState};
use airlock_runtime::ledger::ResumeOutcome;
use serde_json::json;

use super::{Layout, TREE, World, answer, approve, calls, request, run_with_events};
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
