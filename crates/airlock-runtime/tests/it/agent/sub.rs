//! Sub-agents (docs/rules.md AGENT-20..AGENT-23): nested runs two levels deep, the parent sees
//! only the answer, proposals climb with `via`, a park anywhere parks the root, which resumes
//! the tree exactly once; cancelling the root cancels the tree (AGENT-34); `approval:` on a
//! sub-agent parks before its child starts (AGENT-36).

use std::sync::Arc;

use airlock_runtime::agent::{Limits, RunEvent, RunState};
use airlock_runtime::decisions;
use airlock_runtime::ledger::{Decision, InvocationState, ResumeOutcome, RunStatus};
use airlock_spec::Approval;
use serde_json::json;

use super::{
    Extras, TREE, World, answer, approve, calls, on_both_backends, request, run_with_events,
};
use crate::gateway::Backend;

#[tokio::test]
async fn sub_agents_two_levels_deep_answer_their_callers() {
    let w = World::new(Backend::Sqlite).await.unwrap();
    w.script(
        "boss",
        [
            calls(&[("helper", json!({"input": "ask leaf"}))]),
            answer("boss: helper said it"),
        ],
    );
    w.script(
        "helper",
        [
            calls(&[("leaf", json!({"input": "count"}))]),
            answer("helper: leaf counted"),
        ],
    );
    w.script(
        "leaf",
        [
            calls(&[
                ("count", json!({"amount": 1})),
                ("propose", json!({"amount": 2})),
            ]),
            answer("leaf: counted"),
        ],
    );
    let agents = w.agents(TREE);
    let (report, _) = run_with_events(&agents, request("boss", "go")).await;
    assert_eq!(report.status, RunState::Completed, "{report:?}");
    assert_eq!(report.answer.as_deref(), Some("boss: helper said it"));
    assert_eq!(
        (w.asked("boss"), w.asked("helper"), w.asked("leaf")),
        (2, 2, 2)
    );
    assert_eq!(w.ran("count"), 1);
    // The grandchild's proposal reaches the root named after the root's own sub-agent.
    assert_eq!(report.proposals.len(), 1);
    assert_eq!(report.proposals[0].via.as_deref(), Some("helper"));
    // Usage of the whole tree: six turns.
    assert_eq!(report.usage.input_tokens, 60);
    // Sub-agents are not tools of the one path outside a run.
    let scope = airlock_spec::ScopeId::Agent("boss".into());
    assert!(
        agents
            .gateway()
            .scope(&scope)
            .unwrap()
            .get("helper")
            .is_some()
    );
}

#[tokio::test]
async fn a_park_inside_a_grandchild_parks_the_root_and_resumes_once() {
    let w = World::new(Backend::Sqlite).await.unwrap();
    w.script(
        "boss",
        [
            calls(&[("helper", json!({"input": "ask leaf"}))]),
            answer("boss done"),
        ],
    );
    w.script(
        "helper",
        [
            calls(&[("leaf", json!({"input": "gate"}))]),
            answer("helper done"),
        ],
    );
    w.script(
        "leaf",
        [
            calls(&[("gate", json!({"amount": 1}))]),
            answer("leaf done"),
        ],
    );
    let agents = w.agents(TREE);
    let (parked, _) = run_with_events(&agents, request("boss", "go")).await;
    assert_eq!(parked.status, RunState::Parked, "{parked:?}");
    assert_eq!(parked.waiting.len(), 1);
    approve(w.store.as_ref(), parked.waiting[0]).await;
    assert_eq!(
        w.store.resume_run(parked.run_id).await.unwrap(),
        ResumeOutcome::Resumed
    );
    let done = agents.continue_resumed(parked.run_id).await.unwrap();
    assert_eq!(done.status, RunState::Completed, "{done:?}");
    assert_eq!(done.answer.as_deref(), Some("boss done"));
    assert_eq!(
        (w.asked("boss"), w.asked("helper"), w.asked("leaf")),
        (2, 2, 2)
    );
    assert_eq!(w.ran("gate"), 1);
}

#[tokio::test]
async fn a_sub_agent_that_fails_after_proposing_leaves_its_proposals() {
    let w = World::new(Backend::Sqlite).await.unwrap();
    w.script(
        "boss",
        [
            calls(&[("helper", json!({"input": "propose"}))]),
            answer("helper failed"),
        ],
    );
    // The helper's script ends after its first turn: its second request fails.
    w.script("helper", [calls(&[("propose", json!({"amount": 5}))])]);
    let agents = w.agents(TREE);
    let (report, events) = run_with_events(&agents, request("boss", "go")).await;
    assert_eq!(report.status, RunState::Completed, "{report:?}");
    assert_eq!(report.proposals.len(), 1);
    assert_eq!(report.proposals[0].via.as_deref(), Some("helper"));
    let failed = events.iter().any(|e| {
        matches!(e,
        airlock_runtime::agent::RunEvent::ToolResult { content, is_error: true, .. }
            if content.contains("sub-agent `helper` failed") && content.contains("script is over"))
    });
    assert!(failed, "{events:?}");
}

/// AGENT-34: cancelling a root parked inside its grandchild marks the child and the grandchild
/// cancelled in the same commit, and their waiting call expires: nothing of the tree resumes.
async fn cancelling_a_root_cancels_its_nested_runs(backend: Backend) {
    let Some(w) = World::new(backend).await else {
        return;
    };
    w.script("boss", [calls(&[("helper", json!({"input": "ask leaf"}))])]);
    w.script("helper", [calls(&[("leaf", json!({"input": "gate"}))])]);
    w.script("leaf", [calls(&[("gate", json!({"amount": 1}))])]);
    let agents = w.agents(TREE);
    let (parked, _) = run_with_events(&agents, request("boss", "go")).await;
    assert_eq!(parked.status, RunState::Parked, "{parked:?}");
    let root = parked.run_id;
    // A sub-agent's call is `<calling run>:<step>:<index>` (AGENT-2), here the first of each.
    let first_call = |run| format!("{run}:1:0");
    let helper = w.store.child_run(root, first_call(root)).await.unwrap();
    let helper = helper.expect("the helper's run");
    let leaf = w.store.child_run(helper, first_call(helper)).await.unwrap();
    let leaf = leaf.expect("the leaf's run");
    let cancelled = agents.cancel(root).await.unwrap();
    assert_eq!(cancelled.status, RunState::Cancelled);
    for run in [root, helper, leaf] {
        let status = w.store.get_run(run).await.unwrap().status;
        assert_eq!(status, RunStatus::Cancelled, "{run}");
    }
    let gate = w.store.get(parked.waiting[0]).await.unwrap();
    assert_eq!(gate.state, InvocationState::Expired);
    assert_eq!(
        w.store.resume_run(root).await.unwrap(),
        ResumeOutcome::NotParked(RunStatus::Cancelled)
    );
    assert_eq!(w.ran("gate"), 0);
}

/// `boss` with the sub-agent `leaf` behind `approval: always` (AGENT-36).
fn gated_leaf(w: &World) -> airlock_runtime::agent::Agents {
    let mut leaf = super::sub_agent("leaf");
    leaf.policy.approval = Approval::Always;
    let extras = Extras {
        boss_tools: vec![leaf],
        ..Extras::default()
    };
    w.script(
        "boss",
        [
            calls(&[("leaf", json!({"input": "hi"}))]),
            answer("boss done"),
        ],
    );
    w.script("leaf", [answer("leaf says hi")]);
    w.agents_with(Arc::clone(&w.store), TREE, Limits::default(), extras)
}

/// AGENT-36: a gated sub-agent parks the run before its child starts; once approved the child
/// starts and runs exactly once and the run completes.
async fn a_gated_sub_agent_parks_before_its_child_starts(backend: Backend) {
    let Some(w) = World::new(backend).await else {
        return;
    };
    let agents = gated_leaf(&w);
    let (parked, events) = run_with_events(&agents, request("boss", "go")).await;
    assert_eq!(parked.status, RunState::Parked, "{parked:?}");
    assert_eq!(w.asked("leaf"), 0, "the child has not started");
    let asked = events
        .iter()
        .any(|e| matches!(e, RunEvent::ApprovalRequired { tool, .. } if tool == "leaf"));
    assert!(asked, "{events:?}");
    approve(w.store.as_ref(), parked.waiting[0]).await;
    let resumed = w.store.resume_run(parked.run_id).await.unwrap();
    assert_eq!(resumed, ResumeOutcome::Resumed);
    let done = agents.continue_resumed(parked.run_id).await.unwrap();
    assert_eq!(done.status, RunState::Completed, "{done:?}");
    assert_eq!((w.asked("boss"), w.asked("leaf")), (2, 1));
    let gate = w.store.get(parked.waiting[0]).await.unwrap();
    assert_eq!(gate.state, InvocationState::Succeeded);
}

on_both_backends!(
    cancelling_a_root_cancels_its_nested_runs,
    a_gated_sub_agent_parks_before_its_child_starts,
);

/// AGENT-36: a declined sub-agent call never starts its child; the model is told.
#[tokio::test]
async fn a_declined_sub_agent_never_starts() {
    let w = World::new(Backend::Sqlite).await.unwrap();
    let agents = gated_leaf(&w);
    let (parked, _) = run_with_events(&agents, request("boss", "go")).await;
    let deny = Decision::Deny {
        reason: "not today".into(),
    };
    decisions::record(
        w.store.as_ref(),
        &[],
        parked.waiting[0],
        "alice",
        deny,
        "cli",
    )
    .await
    .unwrap();
    w.store.resume_run(parked.run_id).await.unwrap();
    let done = agents.continue_resumed(parked.run_id).await.unwrap();
    assert_eq!(done.status, RunState::Completed, "{done:?}");
    assert_eq!((w.asked("boss"), w.asked("leaf")), (2, 0));
}
