//! The confirmation gate (docs/rules.md POLICY-30..POLICY-35): a `confirm: true` call is held,
//! the person is told by airlock, and only their literal next message consents — once, for the
//! same tool and arguments, across a restart; a sub-agent can use a consent but never grant it.

use std::sync::Arc;

use airlock_runtime::agent::{Agents, Limits, RunEvent, RunReport, RunState};
use serde_json::json;

use super::{Layout, World, answer, calls, request, run_with_events};
use crate::gateway::Backend;

/// `boss` with the confirm tool and `helper`, which has it too.
const WITH_HELPER: Layout = &[("boss", &["confirm", "helper"]), ("helper", &["confirm"])];

/// Runs `input` in `session` (a new one when `None`) and returns the report and events.
async fn say(
    agents: &Agents,
    session: Option<&RunReport>,
    input: &str,
) -> (RunReport, Vec<RunEvent>) {
    let mut req = request("boss", input);
    req.session_id = session.map(|r| r.session_id);
    run_with_events(agents, req).await
}

fn notices(events: &[RunEvent]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, RunEvent::ConfirmationRequired { .. }))
        .count()
}

/// The first run: the model calls `confirm` with `amount`, which is held and the person told.
async fn held(w: &World, agents: &Agents, amount: i64) -> RunReport {
    w.script(
        "boss",
        [
            calls(&[("confirm", json!({"amount": amount}))]),
            answer("asked"),
        ],
    );
    let (report, events) = say(agents, None, "close ticket").await;
    assert_eq!(report.status, RunState::Completed, "{report:?}");
    assert_eq!(w.ran("confirm"), 0, "held, not run");
    assert_eq!(notices(&events), 1, "airlock tells the person itself");
    let notice = report
        .confirmation
        .clone()
        .expect("the report carries the notice");
    assert_eq!(notice.tool, "confirm");
    assert_eq!(notice.arguments, json!({"amount": amount}));
    report
}

async fn yes_runs_the_held_call_once(backend: Backend) {
    let Some(w) = World::new(backend).await else {
        return;
    };
    let agents = w.agents(TREE_WITH_CONFIRM);
    let first = held(&w, &agents, 7).await;
    // The person's literal yes (case and whitespace aside): the same call runs, once; the
    // model calling it again in the same run is held again.
    w.script(
        "boss",
        [
            calls(&[("confirm", json!({"amount": 7}))]),
            calls(&[("confirm", json!({"amount": 7}))]),
            answer("done"),
        ],
    );
    let (second, events) = say(&agents, Some(&first), "  YES \n").await;
    assert_eq!(second.status, RunState::Completed, "{second:?}");
    assert_eq!(w.ran("confirm"), 1);
    assert_eq!(notices(&events), 1, "the second call is held again");
    assert!(second.confirmation.is_some());
}

/// `boss` of the usual tree, plus the confirm tool.
const TREE_WITH_CONFIRM: Layout = &[
    ("boss", &["count", "confirm", "helper"]),
    ("helper", &["count", "gate", "propose", "leaf"]),
    ("leaf", &["count", "gate", "propose"]),
];

async fn any_other_message_cancels_the_held_call(backend: Backend) {
    let Some(w) = World::new(backend).await else {
        return;
    };
    let agents = w.agents(TREE_WITH_CONFIRM);
    let first = held(&w, &agents, 7).await;
    w.script("boss", [answer("ok, not closing it")]);
    let (second, _) = say(&agents, Some(&first), "yes please").await;
    assert!(second.confirmation.is_none());
    let store = agents.gateway().store();
    assert_eq!(
        store.held_confirmation(first.session_id).await.unwrap(),
        None
    );
    // A later yes has nothing to consent to: the model's call is held anew, not run.
    w.script(
        "boss",
        [calls(&[("confirm", json!({"amount": 7}))]), answer("asked")],
    );
    let (third, _) = say(&agents, Some(&first), "yes").await;
    assert_eq!(w.ran("confirm"), 0);
    assert!(third.confirmation.is_some());
}

async fn different_arguments_are_not_consented(backend: Backend) {
    let Some(w) = World::new(backend).await else {
        return;
    };
    let agents = w.agents(TREE_WITH_CONFIRM);
    let first = held(&w, &agents, 7).await;
    w.script(
        "boss",
        [calls(&[("confirm", json!({"amount": 8}))]), answer("asked")],
    );
    let (second, _) = say(&agents, Some(&first), "y").await;
    assert_eq!(w.ran("confirm"), 0);
    let notice = second.confirmation.expect("the new call is held instead");
    assert_eq!(notice.arguments, json!({"amount": 8}));
}

async fn consent_survives_a_restart_and_is_used_once(backend: Backend) {
    let Some(w) = World::new(backend).await else {
        return;
    };
    let first = {
        let agents = w.agents(TREE_WITH_CONFIRM);
        held(&w, &agents, 7).await
    };
    // Another process on the same database: new store, new `Agents`.
    let store = w.other_process().await;
    let agents = w.agents_on(Arc::clone(&store), TREE_WITH_CONFIRM, Limits::default());
    w.script(
        "boss",
        [calls(&[("confirm", json!({"amount": 7}))]), answer("done")],
    );
    let (second, _) = say(&agents, Some(&first), "confirm").await;
    assert_eq!(second.status, RunState::Completed, "{second:?}");
    assert_eq!(w.ran("confirm"), 1);
    // Used: the next yes grants nothing.
    w.script(
        "boss",
        [calls(&[("confirm", json!({"amount": 7}))]), answer("asked")],
    );
    let (_, events) = say(&agents, Some(&first), "yes").await;
    assert_eq!(w.ran("confirm"), 1);
    assert_eq!(notices(&events), 1);
}

async fn a_sub_agent_uses_consent_but_never_grants_it(backend: Backend) {
    let Some(w) = World::new(backend).await else {
        return;
    };
    let agents = w.agents(WITH_HELPER);
    // The root's model holds a call, then hands `helper` the input "yes": a model's words, not
    // the person's, so helper's identical call is held again and nothing runs.
    w.script(
        "boss",
        [
            calls(&[("confirm", json!({"amount": 7}))]),
            calls(&[("helper", json!({"input": "yes"}))]),
            answer("asked"),
        ],
    );
    w.script(
        "helper",
        [calls(&[("confirm", json!({"amount": 7}))]), answer("held")],
    );
    let (first, events) = say(&agents, None, "close ticket").await;
    assert_eq!(first.status, RunState::Completed, "{first:?}");
    assert_eq!(w.ran("confirm"), 0);
    assert_eq!(
        notices(&events),
        2,
        "the person sees the sub-agent's notice too"
    );
    // The person's yes: the sub-agent's call uses the root's consent.
    w.script(
        "boss",
        [
            calls(&[("helper", json!({"input": "close it"}))]),
            answer("done"),
        ],
    );
    w.script(
        "helper",
        [
            calls(&[("confirm", json!({"amount": 7}))]),
            answer("closed"),
        ],
    );
    let (second, _) = say(&agents, Some(&first), "yes").await;
    assert_eq!(second.status, RunState::Completed, "{second:?}");
    assert_eq!(w.ran("confirm"), 1);
}

/// Outside an agent run nobody can consent: the call is refused and stored failed.
#[tokio::test]
async fn outside_a_run_a_confirm_action_is_refused() {
    let w = World::new(Backend::Sqlite).await.unwrap();
    let agents = w.agents(TREE_WITH_CONFIRM);
    let gateway = agents.gateway();
    let scope = airlock_spec::ScopeId::Agent("boss".into());
    let session = gateway.open_session("mcp", None, &scope).await.unwrap();
    let ctx = airlock_runtime::CallContext {
        scope,
        session,
        call_id: "c1".into(),
        principal: None,
        groups: None,
        channel: "mcp",
        downstream: Default::default(),
    };
    let outcome = gateway
        .call(&ctx, "confirm", json!({"amount": 1}))
        .await
        .unwrap();
    let row = outcome.into_invocation();
    assert_eq!(row.state.as_str(), "failed", "{row:?}");
    assert_eq!(w.ran("confirm"), 0);
}

super::on_both_backends!(
    yes_runs_the_held_call_once,
    any_other_message_cancels_the_held_call,
    different_arguments_are_not_consented,
    consent_survives_a_restart_and_is_used_once,
    a_sub_agent_uses_consent_but_never_grants_it,
);
