//! docs/rules.md POLICY-43 … POLICY-49 inside an agent run: the model of a run started by a
//! caller is offered only the tools an `[[access]]` rule grants that caller, and a call the
//! model makes to another tool anyway is recorded `denied` by the access policy and never runs.

use std::net::SocketAddr;

use airlock_ledger::ACCESS_POLICY;
use airlock_testkit::{FakeCall, FakeModel, ModelReply};
use serde_json::{Value, json};

use super::{CALLER, helper_deployment, start_run, upstream};
use crate::serve::ADMIN;
use crate::support::{http, serve_in_process};

/// The names of the tools the model was offered in its request `body`.
fn offered(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

async fn invocation(addr: SocketAddr, id: &str) -> Value {
    let path = format!("/v1/invocations/{id}");
    let (status, body, _) = http(addr, "GET", &path, Some(ADMIN), None).await;
    assert_eq!(status, 200, "{body}");
    body
}

#[tokio::test]
async fn a_runs_model_sees_only_granted_tools_and_a_call_outside_them_is_denied() {
    // `carol` (the run's caller) is granted `erp_*` only; the model calls `fetch` anyway.
    let erp = upstream().await;
    let fetch = FakeCall::new(
        "call_1",
        "fetch",
        &json!({"url": format!("http://127.0.0.1:{}/page", erp.port)}),
    );
    let model = FakeModel::openai(vec![
        ModelReply::calls(vec![fetch]),
        ModelReply::text(&["Not allowed."]),
    ])
    .await;
    let dir = helper_deployment(&model.endpoint(), &format!("http://127.0.0.1:{}", erp.port));
    let toml = dir.path().join("airlock.toml");
    let mut config = std::fs::read_to_string(&toml).unwrap();
    config.push_str("\n[[access]]\nprincipals = [\"carol\"]\ntools = [\"erp_*\"]\n");
    std::fs::write(&toml, config).unwrap();
    let (addr, _) = serve_in_process(dir.path()).await;

    let (status, run) = start_run(addr, "helper", CALLER, json!({"input": "Read the page."})).await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["status"], "completed", "{run}");

    let bodies = model.bodies();
    assert_eq!(
        bodies.len(),
        2,
        "the model is asked again after the refusal"
    );
    assert_eq!(offered(&bodies[0]), ["erp_lookup"], "{}", bodies[0]);
    let calls = run["invocations"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{run}");
    assert_eq!(calls[0]["tool"], "fetch");
    let row = invocation(addr, calls[0]["id"].as_str().unwrap()).await;
    assert_eq!(row["state"], "denied", "{row}");
    assert_eq!(row["decision"]["by"], ACCESS_POLICY, "{row}");
    assert_eq!(row["principal"], "carol");
    assert!(
        erp.seen().is_empty(),
        "the refused fetch reached {:?}",
        erp.seen()
    );
}
