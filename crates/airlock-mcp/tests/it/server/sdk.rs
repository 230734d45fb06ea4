//! The official TypeScript SDK (`tests/sdk/client.mjs`) as a real client of the endpoint.
//!
//! Needs `npm ci --prefix crates/airlock-mcp/tests/sdk`. Without it the test is skipped with a
//! message, unless `CI` is set: then it fails, so CI can never pass by skipping it.

use std::path::PathBuf;

use airlock_egress::{EgressPolicy, GuardedClient};
use airlock_mcp::ResourceServer;
use airlock_testkit::{Issuer, KeyKind};
use serde_json::{Value, json};

use super::{Endpoint, TOKEN};

#[tokio::test]
async fn typescript_sdk_lists_calls_parks_and_awaits() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk");
    if !dir.join("node_modules/@modelcontextprotocol/sdk").is_dir() {
        airlock_testkit::skip(airlock_testkit::Needs::TypeScriptSdk);
        return;
    }
    let server = Endpoint::start().await;
    let output = tokio::process::Command::new("node")
        .arg(dir.join("client.mjs"))
        .arg(server.url("/mcp"))
        .arg(TOKEN)
        .current_dir(&dir)
        .output()
        .await
        .expect("node must be on PATH");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "node failed:\n{stdout}\n{stderr}");
    let out: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{stdout}\n{stderr}"));

    assert_eq!(out["sessionId"], Value::Null, "no session is kept");
    assert_eq!(out["server"]["name"], "airlock");
    let names: Vec<_> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].clone())
        .collect();
    assert_eq!(
        names,
        [
            json!("echo"),
            json!("deploy"),
            json!("airlock_await_decision")
        ]
    );
    assert_eq!(out["tools"][1]["annotations"]["destructiveHint"], true);

    assert_eq!(out["echo"]["isError"], false);
    assert_eq!(
        out["echo"]["structuredContent"],
        json!({"echo": {"msg": "hi"}})
    );

    assert_eq!(out["parked"]["isError"], false);
    assert_eq!(
        out["parked"]["structuredContent"]["status"],
        "awaiting_approval"
    );
    let text: Value =
        serde_json::from_str(out["parked"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, out["parked"]["structuredContent"]);
    assert!(
        text["message"]
            .as_str()
            .unwrap()
            .starts_with("NOT EXECUTED YET")
    );

    assert_eq!(out["awaited"]["structuredContent"]["decided_by"], "bob");
    assert_eq!(
        out["awaited"]["structuredContent"]["result"],
        json!({"deployed": "prod"})
    );
    assert_eq!(out["failed"]["isError"], true);
    assert_eq!(out["unknown"]["code"], -32602);

    // MCP Tasks (2025-11-25): created, then the settled result, as the SDK streams them.
    assert_eq!(
        out["taskCapability"]["requests"]["tools"]["call"],
        json!({})
    );
    let stream = out["taskStream"].as_array().unwrap();
    assert_eq!(stream[0]["type"], "taskCreated", "{stream:?}");
    assert_eq!(stream[0]["status"], "working");
    let last = stream.last().unwrap();
    assert_eq!(last["type"], "result", "{stream:?}");
    // A task's result is the call's own result, exactly as `tools/call` would have returned it.
    assert_eq!(
        last["result"]["structuredContent"],
        json!({"deployed": "prod"})
    );
    assert_eq!(out["waitingTask"]["status"], "working");
    assert_eq!(out["cancelledTask"]["status"], "cancelled");
    assert!(
        server
            .asked()
            .iter()
            .any(|a| matches!(a, super::Asked::Withdraw { invocation_id, .. } if invocation_id == "inv-waiting")),
        "the SDK's cancel withdrew the call"
    );
}

/// docs/rules.md AUTH-16: the SDK's own OAuth flow (401 → protected resource metadata →
/// authorization server metadata → registration → authorization with PKCE → token) against the
/// endpoint and the testkit's authorization server, then calls with the access token.
#[tokio::test]
async fn typescript_sdk_completes_the_oauth_flow() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk");
    if !dir.join("node_modules/@modelcontextprotocol/sdk").is_dir() {
        airlock_testkit::skip(airlock_testkit::Needs::TypeScriptSdk);
        return;
    }
    let issuer = Issuer::start(KeyKind::Rs256).await;
    issuer.set_subject("ada");
    let for_endpoint = issuer.clone();
    let server = Endpoint::start_oauth(move |base| {
        let guard = GuardedClient::new(EgressPolicy {
            allow_cidrs: vec!["127.0.0.1/32".parse().unwrap()],
            ..EgressPolicy::default()
        })
        .unwrap();
        ResourceServer::new(super::oauth::settings(&for_endpoint, base), guard).unwrap()
    })
    .await;
    let output = tokio::process::Command::new("node")
        .arg(dir.join("oauth_client.mjs"))
        .arg(server.url("/mcp"))
        .current_dir(&dir)
        .output()
        .await
        .expect("node must be on PATH");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "node failed:\n{stdout}\n{stderr}");
    let out: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{stdout}\n{stderr}"));
    assert_eq!(out["firstConnect"], "unauthorized");
    // The SDK asked for this endpoint as the resource (RFC 8707), with the scope the 401 named.
    assert_eq!(out["authorization"]["resource"], server.url("/mcp"));
    assert_eq!(out["authorization"]["scope"], "mcp:tools");
    assert_eq!(out["authorization"]["code_challenge_method"], "S256");
    assert_eq!(out["clientId"], "client-1");
    assert_eq!(out["tokenType"], "Bearer");
    assert!(out["tools"].as_array().unwrap().contains(&json!("echo")));
    assert_eq!(out["echo"]["isError"], false);
    let callers = server.host.callers.lock().unwrap().clone();
    assert_eq!(callers.len(), 1);
    assert_eq!(callers[0].principal, "ada");
}
