//! A third-party MCP server: `tests/sdk/server.mjs`, built with the official TypeScript SDK
//! (Streamable HTTP, stateless, SSE replies), discovered and called through airlock's client and
//! the egress guard.
//!
//! Needs `npm ci --prefix crates/airlock-mcp/tests/sdk`. Without it the test is skipped with a
//! message, unless `CI` is set: then it fails, so CI can never pass by skipping it.

use std::path::PathBuf;
use std::process::Stdio;

use airlock_egress::{EgressPolicy, GuardedClient};
use airlock_mcp::{CallErrorKind, McpClient, McpCredential, McpTarget, ToolCall};
use serde_json::json;
use tokio::io::{AsyncBufReadExt as _, BufReader};

#[tokio::test]
async fn typescript_sdk_server_is_discovered_and_called() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk");
    if !dir.join("node_modules/@modelcontextprotocol/sdk").is_dir() {
        let help = "the TypeScript SDK is not installed: run `npm ci --prefix crates/airlock-mcp/tests/sdk`";
        assert!(std::env::var_os("CI").is_none(), "{help}");
        eprintln!("SKIPPED typescript_sdk_server_is_discovered_and_called: {help}");
        return;
    }
    // stdin stays open while the child lives; the server exits when it closes.
    let mut child = tokio::process::Command::new("node")
        .arg(dir.join("server.mjs"))
        .current_dir(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node must be on PATH");
    let stdout = child.stdout.take().unwrap();
    let port = BufReader::new(stdout)
        .lines()
        .next_line()
        .await
        .unwrap()
        .expect("server.mjs printed no port");

    let policy = EgressPolicy {
        allow_cidrs: vec!["127.0.0.1/32".parse().unwrap()],
        ..EgressPolicy::default()
    };
    let client = McpClient::new(GuardedClient::new(policy).unwrap());
    let target = McpTarget::new(format!("http://127.0.0.1:{port}/mcp"))
        .with_credential(McpCredential::Bearer("sdk-token".to_owned().into()));

    let tools = client.discover(&target).await.unwrap();
    let names: Vec<_> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["search", "whoami"]);
    assert_eq!(tools[0].description, "Search the CRM.");
    assert_eq!(
        tools[0].input_schema["properties"]["q"],
        json!({"type": "string"})
    );

    let out = client
        .call_tool(&target, &ToolCall::new("search", json!({"q": "acme"})))
        .await
        .unwrap();
    assert_eq!(out.text, "found 1 result for acme");
    assert_eq!(
        out.structured,
        Some(json!({"results": [{"id": 7, "q": "acme"}]}))
    );
    let out = client
        .call_tool(&target, &ToolCall::new("whoami", json!({})))
        .await
        .unwrap();
    assert_eq!(out.text, "Bearer sdk-token");
    let err = client
        .call_tool(&target, &ToolCall::new("nope", json!({})))
        .await
        .unwrap_err();
    assert_eq!(err.kind, CallErrorKind::ToolError);
    assert_eq!(err.message, "no tool nope");
}
