//! Proposals in runs (docs/rules.md POLICY-8..POLICY-12, AGENT-21..AGENT-23): validated,
//! recorded, never executed, capped per run tree, refused where nobody receives them.

use airlock_runtime::agent::RunState;
use airlock_runtime::ledger::InvocationState;
use serde_json::json;

use super::{TREE, World, answer, calls, request, run_with_events};
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
