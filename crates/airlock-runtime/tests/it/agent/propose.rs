//! Proposals in runs (docs/rules.md POLICY-8..POLICY-12, AGENT-21..AGENT-23): validated,
//! recorded, never executed, capped per run tree, refused where nobody receives them.

use airlock_runtime::agent::RunState;
use airlock_runtime::decisions;
use airlock_runtime::ledger::{Decision, InvocationId, InvocationState, LedgerError};
use serde_json::json;

use super::{TREE, World, answer, calls, on_both_backends, request, run_with_events};
use crate::gateway::Backend;

#[tokio::test]
async fn a_proposal_is_validated_recorded_and_never_run() {
    let w = World::new(Backend::Sqlite).await.unwrap();
    let big = "n".repeat(17 * 1024);
    w.script(
        "boss",
        [
            calls(&[
                ("propose", json!({"note": "no amount"})),
                ("propose", json!({"amount": 7})),
                ("propose", json!({"amount": 8, "note": big})),
            ]),
            answer("proposed"),
        ],
    );
    let agents = w.agents(TREE);
    let (report, events) = run_with_events(&agents, request("boss", "propose")).await;
    assert_eq!(report.status, RunState::Completed, "{report:?}");
    assert_eq!(w.ran("propose"), 0);
    assert_eq!(report.proposals.len(), 1, "{:?}", report.proposals);
    let p = &report.proposals[0];
    assert_eq!(
        (p.tool.as_str(), &p.arguments, &p.via),
        ("propose", &json!({"amount": 7}), &None)
    );
    let results: Vec<(String, bool)> = events
        .iter()
        .filter_map(|e| match e {
            airlock_runtime::agent::RunEvent::ToolResult {
                content, is_error, ..
            } => Some((content.clone(), *is_error)),
            _ => None,
        })
        .collect();
    assert!(
        results[0].1 && results[0].0.contains("amount"),
        "{:?}",
        results[0]
    );
    assert!(
        !results[1].1 && results[1].0.contains("NOT executed"),
        "{:?}",
        results[1]
    );
    assert!(
        results[2].1 && results[2].0.contains("16384"),
        "{:?}",
        results[2]
    );
}

#[tokio::test]
async fn twenty_proposals_per_run_shared_with_sub_agents() {
    let w = World::new(Backend::Sqlite).await.unwrap();
    let nineteen: Vec<(&str, serde_json::Value)> =
        (0..19).map(|i| ("propose", json!({"amount": i}))).collect();
    w.script(
        "boss",
        [
            calls(&nineteen),
            calls(&[("helper", json!({"input": "two more"}))]),
            answer("done"),
        ],
    );
    w.script(
        "helper",
        [
            calls(&[
                ("propose", json!({"amount": 100})),
                ("propose", json!({"amount": 101})),
            ]),
            answer("helper proposed"),
        ],
    );
    let agents = w.agents(TREE);
    let (report, events) = run_with_events(&agents, request("boss", "propose many")).await;
    assert_eq!(report.status, RunState::Completed, "{report:?}");
    assert_eq!(report.proposals.len(), 20);
    let last = &report.proposals[19];
    assert_eq!(
        (last.arguments.clone(), last.via.as_deref()),
        (json!({"amount": 100}), Some("helper"))
    );
    let refused = events.iter().any(|e| matches!(e,
        airlock_runtime::agent::RunEvent::ToolResult { content, is_error: true, .. } if content.contains("20 proposals")));
    assert!(refused);
    assert_eq!(w.ran("propose"), 0);
}

#[tokio::test]
async fn without_a_receiver_a_proposal_is_refused_and_no_row_is_left() {
    let w = World::new(Backend::Sqlite).await.unwrap();
    w.script(
        "boss",
        [
            calls(&[("propose", json!({"amount": 1}))]),
            answer("could not"),
        ],
    );
    let agents = w.agents(TREE);
    let mut req = request("boss", "propose");
    req.proposals_enabled = false;
    let (report, _) = run_with_events(&agents, req).await;
    assert_eq!(report.status, RunState::Completed);
    assert!(report.proposals.is_empty());
    let rows = w.store.run_invocations(report.run_id).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].state, InvocationState::Failed);
    assert!(
        rows[0]
            .error
            .as_ref()
            .unwrap()
            .message
            .contains("receives proposals")
    );
}

/// A finished run with one proposal (`{"amount": 7}`), and the proposal's id.
async fn one_proposal(w: &World) -> (airlock_runtime::agent::Agents, InvocationId) {
    w.script(
        "boss",
        [
            calls(&[("propose", json!({"amount": 7}))]),
            answer("proposed"),
        ],
    );
    let agents = w.agents(TREE);
    let (report, _) = run_with_events(&agents, request("boss", "propose")).await;
    assert_eq!(report.status, RunState::Completed, "{report:?}");
    let id = report.proposals[0].id;
    (agents, id)
}

/// AGENT-31: an approved proposal runs exactly once through the gateway's executor, whoever
/// races for it (the deciding surface's task, the worker of another process), after its run
/// ended; a second approval is refused naming the first; the run still lists it.
async fn an_approved_proposal_runs_exactly_once(backend: Backend) {
    let Some(w) = World::new(backend).await else {
        return;
    };
    let (agents, id) = one_proposal(&w).await;
    let gateway = agents.gateway();
    let row = decisions::record(w.store.as_ref(), &[], id, "alice", Decision::Approve, "api")
        .await
        .unwrap();
    assert_eq!(row.state, InvocationState::Approved);
    let listed = w.store.approved_unclaimed(10).await.unwrap();
    assert!(listed.iter().any(|r| r.id == id), "the worker sees it");
    let (a, b) = tokio::join!(gateway.continue_approved(id), gateway.continue_approved(id));
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(w.ran("propose"), 1);
    let done = w.store.get(id).await.unwrap();
    assert_eq!(done.state, InvocationState::Succeeded, "{a:?} {b:?}");
    assert_eq!(done.result, Some(json!({"echo": {"amount": 7}})));
    let again = decisions::record(w.store.as_ref(), &[], id, "bob", Decision::Approve, "api").await;
    assert!(
        matches!(&again, Err(LedgerError::AlreadyDecided { by, .. }) if by == "alice"),
        "{again:?}"
    );
    let report = agents.read(done.run_id.unwrap()).await.unwrap();
    assert_eq!(report.proposals.len(), 1);
    assert_eq!(w.ran("propose"), 1);
}

/// DECIDE-20, DECIDE-14: a proposal approved with edited arguments runs once with them, and
/// its run's report reads the proposed and the approved arguments and the decision `edited`.
async fn an_edited_proposal_runs_with_its_arguments_and_its_run_reads_both(backend: Backend) {
    let Some(w) = World::new(backend).await else {
        return;
    };
    let (agents, id) = one_proposal(&w).await;
    let gateway = agents.gateway();
    let edit = Decision::Edit {
        arguments: json!({"amount": 3}),
    };
    decisions::decide(gateway, id, "alice", edit, "api")
        .await
        .unwrap();
    let done = crate::gateway::settled(w.store.as_ref(), id).await;
    assert_eq!(done.state, InvocationState::Succeeded);
    assert_eq!(done.result, Some(json!({"echo": {"amount": 3}})));
    let report = agents.read(done.run_id.unwrap()).await.unwrap();
    let proposal = &report.proposals[0];
    assert_eq!(proposal.arguments, json!({"amount": 7}));
    assert_eq!(proposal.approved_arguments, Some(json!({"amount": 3})));
    assert_eq!(proposal.decision.as_ref().unwrap().decision, "edited");
    assert_eq!(w.ran("propose"), 1);
}

/// AGENT-31: a denied proposal never runs and cannot be approved afterwards.
async fn a_denied_proposal_never_runs(backend: Backend) {
    let Some(w) = World::new(backend).await else {
        return;
    };
    let (agents, id) = one_proposal(&w).await;
    let deny = Decision::Deny {
        reason: "not now".into(),
    };
    let row = decisions::record(w.store.as_ref(), &[], id, "alice", deny, "cli")
        .await
        .unwrap();
    assert_eq!(row.state, InvocationState::Denied);
    let later = decisions::record(w.store.as_ref(), &[], id, "bob", Decision::Approve, "api").await;
    assert!(
        matches!(later, Err(LedgerError::AlreadyDecided { .. })),
        "{later:?}"
    );
    agents.gateway().continue_approved(id).await.unwrap();
    assert_eq!(w.ran("propose"), 0);
}

/// AGENT-31: a proposal nobody decides stays `proposed`: it has no deadline, the sweep a year
/// later leaves it alone and no worker picks it up.
async fn an_undecided_proposal_stays_proposed(backend: Backend) {
    let Some(w) = World::new(backend).await else {
        return;
    };
    let (_agents, id) = one_proposal(&w).await;
    let year = time::OffsetDateTime::now_utc() + time::Duration::days(366);
    w.store.sweep(year).await.unwrap();
    let row = w.store.get(id).await.unwrap();
    assert_eq!(
        (row.state, row.expires_at),
        (InvocationState::Proposed, None)
    );
    assert!(w.store.approved_unclaimed(10).await.unwrap().is_empty());
    assert_eq!(w.ran("propose"), 0);
}

on_both_backends!(
    an_approved_proposal_runs_exactly_once,
    an_edited_proposal_runs_with_its_arguments_and_its_run_reads_both,
    a_denied_proposal_never_runs,
    an_undecided_proposal_stays_proposed,
);
