//! docs/rules.md MCP-33, MCP-34: a result's content blocks reach the client as the host holds
//! them, and a tool's `outputSchema` is listed.

use serde_json::{Value, json};

use super::tasks::v2026;
use super::{Endpoint, output_schema};
use crate::sdk_upstream::every_block;

const V2025: &str = "MCP-Protocol-Version: 2025-11-25";

async fn result(server: &Endpoint, path: &str, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let reply = server.post(path, &[V2025], &body.to_string()).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.json()["result"].clone()
}

#[tokio::test]
async fn every_block_is_served_unchanged_in_order_on_both_revisions() {
    let server = Endpoint::start().await;
    let blocks = every_block();
    let params = json!({"name": "blocks", "arguments": {"content": blocks}});
    let v2025 = result(&server, "/mcp", "tools/call", params.clone()).await;
    let v2026 = v2026(&server, "tools/call", params, false).await["result"].clone();
    for out in [v2025, v2026] {
        // Equal JSON: every string (base64 payloads included) byte for byte, in order; the
        // order of an object's keys carries no meaning in JSON.
        assert_eq!(out["content"], blocks, "{out}");
        assert_eq!(out["structuredContent"], json!({"n": 1}));
        assert_eq!(out.get("isError"), Some(&json!(false)));
    }
}

/// A block of a type this revision does not define reaches the client as its placeholder text,
/// and the blocks around it unchanged.
#[tokio::test]
async fn an_unknown_block_type_becomes_its_placeholder() {
    let server = Endpoint::start().await;
    let blocks = json!([{"type": "hologram", "data": "x"}, {"type": "text", "text": "after"}]);
    let params = json!({"name": "blocks", "arguments": {"content": blocks}});
    let out = result(&server, "/mcp", "tools/call", params).await;
    assert_eq!(
        out["content"],
        json!([{"type": "text", "text": "[hologram content]"}, {"type": "text", "text": "after"}])
    );
}

#[tokio::test]
async fn a_tools_output_schema_is_listed() {
    let server = Endpoint::start().await;
    let list = result(&server, "/agents/rich/mcp", "tools/list", json!({})).await;
    let blocks = list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "blocks")
        .unwrap();
    assert_eq!(blocks["outputSchema"], Value::Object(output_schema()));
    let echo = result(&server, "/mcp", "tools/list", json!({})).await;
    assert!(echo["tools"][0].get("outputSchema").is_none(), "{echo}");
}

/// The await tool's settled payload keeps its shape (MCP-10) and the upstream's blocks follow
/// its JSON text block, unchanged.
#[tokio::test]
async fn the_await_tool_hands_on_the_blocks_after_its_payload() {
    let server = Endpoint::start().await;
    let params =
        json!({"name": "airlock_await_decision", "arguments": {"invocation_id": "inv-blocks"}});
    let out = result(&server, "/mcp", "tools/call", params).await;
    let content = out["content"].as_array().unwrap();
    let payload: Value = serde_json::from_str(content[0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(payload["status"], "completed");
    assert_eq!(payload["result"], "[image: image/png, 69 bytes]");
    assert_eq!(out["structuredContent"], payload);
    assert_eq!(Value::Array(content[1..].to_vec()), every_block());
}
