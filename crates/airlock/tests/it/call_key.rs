//! MCP-22 over HTTP on the real gateway: a client whose stream broke re-sends its `tools/call`
//! with a new JSON-RPC id on a new request, under the same `_meta["io.airlock/call_key"]`, and
//! gets the same invocation; the ledger holds one call. A bad key is -32602.

use serde_json::{Value, json};

use crate::mcp::{CLAUDE, OTHER, admin_get, deployment, page, start};

/// A 2026-07-28 `tools/call` (per-request `_meta` and headers) with JSON-RPC id `id`.
async fn call_2026(base: &str, token: &str, id: u64, params: Value) -> Value {
    let mut params = params;
    let meta = params["_meta"].as_object().cloned().unwrap_or_default();
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}
    });
    for (k, v) in meta {
        params["_meta"][k] = v;
    }
    let response = reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {token}"))
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", params["name"].as_str().unwrap_or_default())
        .body(
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
                .to_string(),
        )
        .send()
        .await
        .unwrap();
    serde_json::from_str(&response.text().await.unwrap()).unwrap()
}

async fn pending(base: &str) -> Vec<Value> {
    let reply = admin_get(base, "/v1/approvals").await;
    reply["approvals"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn a_resent_call_with_a_new_json_rpc_id_is_the_same_invocation() {
    let dir = deployment();
    let url = page().await;
    let base = start(dir.path()).await;
    let params = json!({"name": "fetch", "arguments": {"url": url}, "_meta": {"io.airlock/call_key": "c0ffee-1"}});
    let first = call_2026(&base, CLAUDE, 11, params.clone()).await;
    let parked = &first["result"]["structuredContent"];
    assert_eq!(parked["status"], "awaiting_approval", "{first}");
    let again = call_2026(&base, CLAUDE, 12, params.clone()).await;
    assert_eq!(again["id"], 12, "{again}");
    assert_eq!(
        again["result"]["structuredContent"]["invocation_id"], parked["invocation_id"],
        "{again}"
    );
    assert_eq!(pending(&base).await.len(), 1);
    // Another principal's key is another call.
    let other = call_2026(&base, OTHER, 13, params).await;
    assert_ne!(
        other["result"]["structuredContent"]["invocation_id"], parked["invocation_id"],
        "{other}"
    );
    assert_eq!(pending(&base).await.len(), 2);
}

#[tokio::test]
async fn a_bad_call_key_is_invalid_params_and_records_nothing() {
    let dir = deployment();
    let base = start(dir.path()).await;
    let url = page().await;
    for key in [
        json!(""),
        json!("with space"),
        json!(42),
        json!("k".repeat(129)),
    ] {
        let params = json!({"name": "fetch", "arguments": {"url": url}, "_meta": {"io.airlock/call_key": key}});
        let reply = call_2026(&base, CLAUDE, 21, params).await;
        assert_eq!(reply["error"]["code"], -32602, "{key}: {reply}");
    }
    assert!(pending(&base).await.is_empty());
}
