//! Reads never wait for a person (docs/rules.md LEDGER-71, LEDGER-72, DECL-88): a `type: api`
//! tool loaded from its declaration, against a loopback upstream that takes each request and
//! never answers (the egress deadline, injected short, passes) or hangs up. The read's failure
//! is a tool error the model reads and the run completes; an approved write declared
//! `effect: idempotent` fails the same way, while one of the default effect parks in doubt.

use std::sync::Arc;
use std::time::Duration;

use airlock_egress::{EgressPolicy, GuardedClient};
use airlock_model::Message;
use airlock_runtime::agent::{Limits, RunState};
use airlock_runtime::decisions;
use airlock_runtime::ledger::{Decision, InvocationState, ToolErrorKind};
use airlock_spec::{Credentials, Deployment, ToolSpec};
use airlock_testkit::{Cue, RawServer};
use serde_json::json;

use super::{Extras, TREE, World, answer, calls, request, run_with_events};
use crate::gateway::Backend;

/// The deadline of every upstream request: the upstream never answers, so each call waits
/// exactly this long.
const DEADLINE: Duration = Duration::from_millis(300);

/// `boss` with the operations of an `erp` api declared in YAML (with `effect`, when given) on
/// a connection to 127.0.0.1:`port`, through a guard that allows loopback with [`DEADLINE`].
fn agents_with_erp(w: &World, port: u16, effect: &str) -> airlock_runtime::agent::Agents {
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        "[connections.erp_main]\nuse_egress_allow = true\nbase_url = \"http://127.0.0.1:{port}/v1\"\ncredential = \"erp.token\"\n"
    );
    std::fs::write(dir.path().join("airlock.toml"), toml).unwrap();
    std::fs::create_dir(dir.path().join("agents")).unwrap();
    let manifest = format!(
        "apiVersion: airlock/v1\nkind: Agent\nmetadata: {{ name: boss }}\nspec:\n  model: {{ provider: openai, model: m }}\n  prompts: {{ system: s }}\n  tools:\n    - name: erp\n      type: api\n      connection: erp_main\n      auth: {{ scheme: bearer }}\n{effect}      operations:\n        - name: total\n          description: The total.\n          writes: false\n          request: {{ method: GET, path: /total }}\n        - name: refund\n          description: Refund.\n          writes: true\n          mode: propose\n          request: {{ method: POST, path: /refunds }}\n"
    );
    std::fs::write(dir.path().join("agents/boss.yml"), manifest).unwrap();
    let deployment = Deployment::load(dir.path()).unwrap();
    let tools: Vec<ToolSpec> = deployment.agent_scope("boss").unwrap().tools().to_vec();
    let policy = EgressPolicy {
        allow_cidrs: vec!["127.0.0.1/32".parse().unwrap()],
        deadline: DEADLINE,
        ..EgressPolicy::default()
    };
    let extras = Extras {
        egress: Some(GuardedClient::new(policy).unwrap()),
        connections: deployment.config.connections.clone(),
        credentials: Credentials::from_pairs([("erp.token".to_owned(), "tok-1".to_owned())]),
        boss_tools: tools,
        clock: None,
    };
    w.agents_with(Arc::clone(&w.store), TREE, Limits::default(), extras)
}

#[tokio::test]
async fn an_unanswered_read_is_a_tool_error_and_the_run_completes() {
    // The deadline passes on a held request; a request read and hung up on breaks the
    // connection: both leave the request unanswered.
    for (cue, kind) in [
        (Cue::Hold, ToolErrorKind::Timeout),
        (Cue::Hangup, ToolErrorKind::UpstreamError),
    ] {
        let w = World::new(Backend::Sqlite).await.unwrap();
        let upstream = RawServer::start(None, cue).await;
        let agents = agents_with_erp(&w, upstream.port, "");
        w.script(
            "boss",
            [calls(&[("erp_total", json!({}))]), answer("no total today")],
        );
        let (report, _) = run_with_events(&agents, request("boss", "the total?")).await;
        assert_eq!(report.status, RunState::Completed, "{cue:?}: {report:?}");
        assert_eq!(report.answer.as_deref(), Some("no total today"));
        assert!(report.waiting.is_empty(), "{report:?}");
        assert_eq!(upstream.seen(), ["/v1/total"], "the request was sent");
        let rows = w.store.run_invocations(report.run_id).await.unwrap();
        let row = rows.iter().find(|r| r.tool == "erp_total").unwrap();
        assert_eq!(row.state, InvocationState::Failed, "{cue:?}: {row:?}");
        assert_eq!(row.error.as_ref().unwrap().kind, kind);
        // The model read the failure as the tool's error and answered on.
        let results = w.read("boss").into_iter().find_map(|m| match m {
            Message::ToolResults { results } => Some(results),
            _ => None,
        });
        let results = results.expect("the model read a tool result");
        assert!(results[0].is_error, "{results:?}");
        assert_eq!(w.asked("boss"), 2);
    }
}

#[tokio::test]
async fn an_approved_idempotent_write_that_times_out_fails_and_the_default_parks() {
    for (effect, settled) in [
        ("      effect: idempotent\n", InvocationState::Failed),
        ("", InvocationState::InDoubt),
    ] {
        let w = World::new(Backend::Sqlite).await.unwrap();
        let upstream = RawServer::start(None, Cue::Hold).await;
        let agents = agents_with_erp(&w, upstream.port, effect);
        w.script(
            "boss",
            [calls(&[("erp_refund", json!({}))]), answer("proposed")],
        );
        let (report, _) = run_with_events(&agents, request("boss", "refund")).await;
        assert_eq!(report.status, RunState::Completed, "{report:?}");
        let id = report.proposals[0].id;
        decisions::record(w.store.as_ref(), &[], id, "alice", Decision::Approve, "api")
            .await
            .unwrap();
        agents.gateway().continue_approved(id).await.unwrap();
        assert_eq!(upstream.seen(), ["/v1/refunds"], "the request was sent");
        let row = w.store.get(id).await.unwrap();
        assert_eq!(row.state, settled, "{effect:?}: {row:?}");
        assert_eq!(row.error.as_ref().unwrap().kind, ToolErrorKind::Timeout);
    }
}
