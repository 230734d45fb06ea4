//! A freeze stops a running agent run before its next call (docs/rules.md POLICY-55): the run
//! parks on a gated call, another process freezes the tool its next step calls, the gated call
//! is approved and the run resumes — it runs the approved call, records the frozen one `denied`
//! by the freeze, and ends `failed` naming the freeze, without asking its model again.

use std::sync::Arc;

use airlock_runtime::agent::RunState;
use airlock_runtime::ledger::{FREEZE, Freeze, FreezeTarget, InvocationState, ResumeOutcome};
use serde_json::json;

use super::{TREE, World, answer, approve, calls, on_both_backends, request, run_with_events};
use crate::gateway::Backend;

on_both_backends!(
    a_freeze_stops_a_running_run_before_its_next_call,
    a_frozen_sub_agent_is_not_started_and_a_stopped_child_stops_its_caller,
);

async fn a_freeze_stops_a_running_run_before_its_next_call(backend: Backend) {
    let Some(w) = World::new(backend).await else {
        return;
    };
    w.script(
        "boss",
        [
            calls(&[("gate", json!({"amount": 1}))]),
            calls(&[
                ("count", json!({"amount": 2})),
                ("gate", json!({"amount": 3})),
            ]),
            answer("never reached"),
        ],
    );
    let agents = w.agents(TREE);
    let (parked, _) = run_with_events(&agents, request("boss", "two steps")).await;
    assert_eq!(parked.status, RunState::Parked, "{parked:?}");
    drop(agents);

    // Another replica freezes `count` while the run waits, then the gate is approved.
    let store = w.other_process().await;
    let freeze = Freeze {
        target: FreezeTarget::Tool("count".into()),
        reason: "runaway loop".into(),
        by: "ops".into(),
        at: time::OffsetDateTime::now_utc(),
    };
    store.freeze(freeze).await.unwrap();
    approve(store.as_ref(), parked.waiting[0]).await;
    assert_eq!(
        store.resume_run(parked.run_id).await.unwrap(),
        ResumeOutcome::Resumed
    );
    let agents = w.agents_on(Arc::clone(&store), TREE, Default::default());
    agents.gateway().freezes().refresh().await.unwrap();
    let done = agents.continue_resumed(parked.run_id).await.unwrap();
    assert_eq!(done.status, RunState::Failed, "{done:?}");
    let error = done.error.clone().unwrap_or_default();
    assert!(
        error.contains("stopped by a freeze")
            && error.contains("tool `count` is frozen by ops (runaway loop)"),
        "{error}"
    );
    // The approved call ran; the frozen one never did, nor the call after it in its step.
    assert_eq!((w.ran("gate"), w.ran("count")), (1, 0));
    assert_eq!(w.asked("boss"), 2, "the model is not asked again");
    let rows = store.run_invocations(parked.run_id).await.unwrap();
    let frozen = rows.iter().find(|r| r.tool == "count").unwrap();
    assert_eq!(frozen.state, InvocationState::Denied);
    assert_eq!(frozen.decision.as_ref().unwrap().by, FREEZE);
    assert_eq!(
        rows.len(),
        2,
        "the step's call after the frozen one was not recorded"
    );
}

/// POLICY-55: a freeze on the sub-agent's tool stops the delegating run before the child starts;
/// a freeze on the child's agent stops the child at its first call, and its caller with it.
async fn a_frozen_sub_agent_is_not_started_and_a_stopped_child_stops_its_caller(backend: Backend) {
    let Some(w) = World::new(backend).await else {
        return;
    };
    let agents = w.agents(TREE);
    let watch = agents.gateway().freezes();
    // The sub-agent's tool frozen in the caller's scope: no child run at all.
    w.script("boss", [calls(&[("helper", json!({"input": "go"}))])]);
    let helper_tool = FreezeTarget::Tool("helper".into());
    watch
        .freeze(helper_tool.clone(), "incident", "ops")
        .await
        .unwrap();
    let (done, _) = run_with_events(&agents, request("boss", "delegate")).await;
    assert_eq!(done.status, RunState::Failed, "{done:?}");
    let error = done.error.clone().unwrap_or_default();
    assert!(error.contains("tool `helper` is frozen by ops"), "{error}");
    assert_eq!(w.asked("helper"), 0, "the child never started");
    watch.unfreeze(helper_tool, "ops").await.unwrap();
    // The child's agent frozen: the child stops at its first call, and so does its caller.
    w.script(
        "boss",
        [
            calls(&[("helper", json!({"input": "go"}))]),
            answer("never"),
        ],
    );
    w.script(
        "helper",
        [calls(&[("count", json!({"amount": 1}))]), answer("never")],
    );
    let helper = FreezeTarget::Agent("helper".into());
    watch.freeze(helper, "loops", "ops").await.unwrap();
    let (done, _) = run_with_events(&agents, request("boss", "delegate again")).await;
    assert_eq!(done.status, RunState::Failed, "{done:?}");
    let error = done.error.clone().unwrap_or_default();
    assert!(
        error.contains("agent `helper` is frozen by ops (loops)"),
        "{error}"
    );
    assert_eq!(w.ran("count"), 0);
    assert_eq!(
        (w.asked("helper"), w.asked("boss")),
        (1, 2),
        "nobody asked again"
    );
}
