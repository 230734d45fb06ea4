//! docs/rules.md POLICY-43 … POLICY-49 on the served gateway: two principals under one
//! `[[access]]` section see different `tools/list` answers (marked `Cache-Control: private`),
//! a call outside the policy is recorded `denied` by the access policy and never runs, and an
//! approval override parks one principal's call while the `ops` group's runs at once.

use airlock_ledger::{ACCESS_POLICY, InvocationState};
use airlock_mcp::{Caller, HostOutcome, ToolHost};
use airlock_runtime::McpHost;
use airlock_spec::ScopeId;
use serde_json::{Value, json};

use crate::mcp::{ADMIN, CLAUDE, OTHER, call, page, rpc};
use crate::support::{deployment_with, serve_in_process};

/// `claude` is in no group; `other` is in `ops`. Everyone may fetch, with approval; only `ops`
/// may ask a person, and fetches without approval.
fn deployment() -> tempfile::TempDir {
    let toml = r#"
[[admin.tokens]]
credential = "airlock.admin"
principal = "alice"
[[mcp.tokens]]
credential = "airlock.claude"
principal = "claude"
[[mcp.tokens]]
credential = "airlock.other"
principal = "other"
groups = ["ops"]
[egress]
allow = ["127.0.0.1/32"]
allow_fetch = true
[credentials]
file = "creds.yml"
[builtins.ask_human]
[builtins.fetch]

[[access]]
principals = ["*"]
tools = ["fetch"]
approval = "always"

[[access]]
groups = ["ops"]
tools = ["fetch", "ask_*"]
approval = "never"
"#;
    deployment_with(
        toml,
        &format!("airlock:\n  admin: {ADMIN}\n  claude: {CLAUDE}\n  other: {OTHER}\n"),
    )
}

async fn listed(base: &str, token: &str) -> (Vec<String>, Option<String>) {
    let response = crate::support::mcp_request(base)
        .header("authorization", format!("Bearer {token}"))
        .body(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string())
        .send()
        .await
        .unwrap();
    let cache = response
        .headers()
        .get("cache-control")
        .map(|v| v.to_str().unwrap().to_owned());
    let reply: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    let names = reply["result"]["tools"].as_array().unwrap().iter();
    let names = names
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    (names, cache)
}

#[tokio::test]
async fn each_principal_lists_only_what_a_rule_grants_it_privately() {
    let dir = deployment();
    let (addr, _) = serve_in_process(dir.path()).await;
    let base = format!("http://127.0.0.1:{}", addr.port());
    let (claude, cache) = listed(&base, CLAUDE).await;
    assert_eq!(claude, ["fetch", "airlock_await_decision"]);
    assert_eq!(cache.as_deref(), Some("private"));
    let (other, _) = listed(&base, OTHER).await;
    assert_eq!(other, ["ask_human", "fetch", "airlock_await_decision"]);
    // Reachable at all: the initialize handshake still answers both.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    assert_eq!(rpc(&base, Some(CLAUDE), init).await.0, 200);
}

#[tokio::test]
async fn a_call_outside_the_policy_is_recorded_denied_and_never_runs() {
    let dir = deployment();
    let (addr, gateway) = serve_in_process(dir.path()).await;
    let base = format!("http://127.0.0.1:{}", addr.port());
    let refused = call(&base, CLAUDE, "ask_human", json!({"question": "Ship it?"})).await;
    assert_eq!(refused["isError"], true, "{refused}");
    let text = refused["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("not permitted") && text.contains("ask_human"),
        "{text}"
    );
    // The row: born denied by the access policy, with its reason; nothing waits for a person.
    let claude = Caller {
        principal: "claude".into(),
        groups: Vec::new(),
        ..Default::default()
    };
    let question = json!({"question": "Ship it?"});
    let host = McpHost::new(gateway.clone());
    let host_call = host
        .call_tool(&ScopeId::Gateway, &claude, "ask_human", question.clone())
        .await
        .unwrap();
    assert!(matches!(host_call.outcome, HostOutcome::Denied { .. }));
    let row = gateway
        .store()
        .get(host_call.invocation_id.parse().unwrap())
        .await
        .unwrap();
    assert_eq!(row.state, InvocationState::Denied);
    let decision = row.decision.unwrap();
    assert_eq!(decision.by, ACCESS_POLICY);
    assert!(decision.reason.unwrap().contains("principal claude"));
    assert_eq!(row.attempts, 0, "a refused call is never claimed");
    // The same tool, granted to `ops`, parks as a question for `other`.
    let ops = Caller {
        principal: "other".into(),
        groups: vec!["ops".into()],
        ..Default::default()
    };
    let asked = host
        .call_tool(&ScopeId::Gateway, &ops, "ask_human", question)
        .await
        .unwrap();
    assert!(asked.is_parked(), "{:?}", asked.outcome);
}

#[tokio::test]
async fn an_approval_override_parks_one_principal_and_not_the_ops_group() {
    let dir = deployment();
    let (addr, _) = serve_in_process(dir.path()).await;
    let base = format!("http://127.0.0.1:{}", addr.port());
    let url = page().await;
    let parked = call(&base, CLAUDE, "fetch", json!({"url": url})).await;
    let parked = parked["structuredContent"]["status"].clone();
    assert_eq!(
        parked, "awaiting_approval",
        "fetch has no declared approval"
    );
    let ran = call(&base, OTHER, "fetch", json!({"url": url})).await;
    assert_eq!(ran["isError"], false, "{ran}");
    assert!(ran.to_string().contains("hello"), "{ran}");
}
