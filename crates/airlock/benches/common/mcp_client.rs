//! An MCP client as the benches drive one: JSON-RPC POSTs over one keep-alive HTTP/1.1
//! connection, no `initialize` (airlock's endpoint and the testkit upstream are stateless).
//! Shared by the `mcp_endpoint` and `scale` benches (`#[path]`).

use serde_json::{Value, json};

/// Where an MCP client sends its calls.
pub(crate) struct Endpoint {
    pub(crate) url: String,
    pub(crate) token: Option<&'static str>,
}

/// One MCP client: one keep-alive connection (its calls are sequential), JSON-RPC ids counted.
pub(crate) struct Client {
    http: reqwest::Client,
    next_id: u64,
}

impl Client {
    pub(crate) fn new() -> Self {
        let http = reqwest::Client::builder()
            .http1_only()
            .pool_max_idle_per_host(1)
            .build()
            .unwrap();
        Self { http, next_id: 0 }
    }

    /// `tools/call` of `tool` with `arguments`; the JSON-RPC `result` (panics on anything else,
    /// a tool error included).
    pub(crate) async fn call(
        &mut self,
        endpoint: &Endpoint,
        tool: &str,
        arguments: Value,
    ) -> Value {
        let params = json!({"name": tool, "arguments": arguments});
        let result = self.rpc(endpoint, "tools/call", params).await;
        assert!(result["isError"] != true, "{tool}: {result}");
        result
    }

    /// Request `method` with `params`; the JSON-RPC `result` (panics on anything else).
    pub(crate) async fn rpc(&mut self, endpoint: &Endpoint, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let body =
            json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        let mut request = self
            .http
            .post(&endpoint.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2025-11-25")
            .body(body.to_string());
        if let Some(token) = endpoint.token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let bytes = response.bytes().await.unwrap();
        assert!(status.is_success(), "{status}: {bytes:?}");
        let mut reply: Value = serde_json::from_slice(&bytes).unwrap();
        let result = reply["result"].take();
        assert!(result.is_object(), "{method}: {reply}");
        result
    }
}
