//! Third-party MCP servers: `tests/sdk/server.mjs` and `tests/sdk/fixture.mjs` (every content
//! block type, an output schema), built with the official TypeScript SDK
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

/// Starts `tests/sdk/<script>` with node; `None` (the test skips) when the SDK is not installed
/// outside CI. The child lives as long as the handle: the server exits when its stdin closes.
async fn start(script: &str) -> Option<(tokio::process::Child, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk");
    if !dir.join("node_modules/@modelcontextprotocol/sdk").is_dir() {
        airlock_testkit::skip(airlock_testkit::Needs::TypeScriptSdk);
        return None;
    }
    let mut child = tokio::process::Command::new("node")
        .arg(dir.join(script))
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
        .expect("the script printed no port");
    Some((child, port))
}

/// A client allowed to reach loopback.
fn loopback_client() -> McpClient {
    let policy = EgressPolicy {
        allow_cidrs: vec!["127.0.0.1/32".parse().unwrap()],
        ..EgressPolicy::default()
    };
    McpClient::new(GuardedClient::new(policy).unwrap())
}

/// One block of every type both protocol revisions define, with the optional fields
/// (`annotations`, `_meta`, a resource link's `title`, `size`, ...) that must survive too.
pub(crate) fn every_block() -> serde_json::Value {
    json!([
        {"type": "text", "text": "héllo ✓\n\"quoted\"", "annotations": {"audience": ["user"], "priority": 0.5}, "_meta": {"example.com/k": 1}},
        {"type": "image", "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC", "mimeType": "image/png"},
        {"type": "audio", "data": "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==", "mimeType": "audio/wav", "annotations": {"lastModified": "2026-12-01T10:00:00Z"}},
        {"type": "resource_link", "uri": "file:///reports/q3.pdf", "name": "q3.pdf", "title": "Q3 report", "description": "The third quarter", "mimeType": "application/pdf", "size": 2048},
        {"type": "resource", "resource": {"uri": "test://notes/1", "mimeType": "text/markdown", "text": "# Notes\n"}},
        {"type": "resource", "resource": {"uri": "test://blob/1", "mimeType": "application/octet-stream", "blob": "AAECAwQF/w=="}, "_meta": {"example.com/k": "v"}}
    ])
}

/// docs/rules.md MCP-33: every block an upstream built with the official SDK returns comes back
/// from airlock's client as it was sent, in order; the model's text has placeholders.
#[tokio::test]
async fn every_content_block_comes_back_unchanged() {
    let Some((_child, port)) = start("fixture.mjs").await else {
        return;
    };
    let client = loopback_client();
    let target = McpTarget::new(format!("http://127.0.0.1:{port}/mcp"));
    let blocks = every_block();
    let args = json!({"content": blocks, "structuredContent": {"n": 1}});
    let out = client
        .call_tool(&target, &ToolCall::new("echo_blocks", args))
        .await
        .unwrap();
    // Equal JSON: every string (base64 payloads included) byte for byte, in order; the order
    // of an object's keys carries no meaning in JSON.
    assert_eq!(serde_json::Value::Array(out.content), blocks);
    assert_eq!(out.structured, Some(json!({"n": 1})));
    assert!(
        out.text.contains("[image: image/png, 69 bytes]"),
        "{}",
        out.text
    );

    let tools = client.discover(&target).await.unwrap();
    let weather = tools.iter().find(|t| t.name == "weather").unwrap();
    assert_eq!(
        weather.output_schema.as_ref().unwrap()["required"],
        json!(["city", "celsius"])
    );
    assert!(
        tools
            .iter()
            .all(|t| t.name == "weather" || t.output_schema.is_none())
    );
}

#[tokio::test]
async fn typescript_sdk_server_is_discovered_and_called() {
    let Some((_child, port)) = start("server.mjs").await else {
        return;
    };
    let client = loopback_client();
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
