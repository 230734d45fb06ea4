//! docs/rules.md MCP-33, MCP-34 end to end: an upstream built with the official TypeScript SDK
//! (`crates/airlock-mcp/tests/sdk/fixture.mjs`) returns every content block type; through a
//! connection file and a tenant `type: mcp` tool, `airlock serve`'s endpoint hands each block to
//! the client unchanged — also from the ledger alone, once the upstream is gone — and lists the
//! discovered `outputSchema`. Needs `npm ci --prefix crates/airlock-mcp/tests/sdk`.

use serde_json::{Value, json};

use airlock_testkit::{FakeCall, FakeModel, ModelReply};

use crate::support::{deployment_with, http, mcp_request, sdk_fixture, serve_in_process};

const TOKEN: &str = "mcp-0b9d2f6e4c8a4e1f9a7d3c5b2e8f1a6d";

/// Agent `rich` on the fake provider at `{model}`, with a tenant `type: mcp` tool on the fixture.
const RICH: &str = "apiVersion: airlock/v1\nkind: Agent\nmetadata:\n  name: rich\nspec:\n  model: { provider: openai, model: gpt-test, endpoint: \"{model}\", credential: openai.key }\n  prompts: { system: Help. }\n  tools:\n    - name: rich\n      type: mcp\n      connection: fixture\n      path: /mcp\n      tools:\n        - name: echo_blocks\n          description: Returns the blocks it is given.\n          writes: false\n          input_schema: { type: object }\n";

/// One block of every type, with the optional fields that must survive as well.
fn every_block() -> Value {
    json!([
        {"type": "text", "text": "héllo ✓\n\"quoted\"", "annotations": {"audience": ["user", "assistant"], "priority": 1.0}, "_meta": {"example.com/k": 1}},
        {"type": "image", "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC", "mimeType": "image/png"},
        {"type": "audio", "data": "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==", "mimeType": "audio/wav"},
        {"type": "resource_link", "uri": "file:///reports/q3.pdf", "name": "q3.pdf", "title": "Q3 report", "mimeType": "application/pdf", "size": 2048},
        {"type": "resource", "resource": {"uri": "test://notes/1", "mimeType": "text/markdown", "text": "# Notes\n"}},
        {"type": "resource", "resource": {"uri": "test://blob/1", "mimeType": "application/octet-stream", "blob": "AAECAwQF/w=="}}
    ])
}

/// A deployment with connection `media` and agent `rich` on the fixture at `port`, the agent's
/// model at `model`.
fn deployment(port: u16, model: &str) -> tempfile::TempDir {
    let toml = format!(
        "[[mcp.tokens]]\ncredential = \"airlock.mcp\"\nprincipal = \"claude\"\n[egress]\nallow = [\"127.0.0.1/32\"]\n[connections.fixture]\nuse_egress_allow = true\nbase_url = \"http://127.0.0.1:{port}\"\n[credentials]\nfile = \"creds.yml\"\n"
    );
    let creds = format!(
        "airlock:\n  mcp: {TOKEN}\nopenai:\n  key: {}\n",
        FakeModel::KEY
    );
    let dir = deployment_with(&toml, &creds);
    let path = dir.path();
    std::fs::create_dir(path.join("connections")).unwrap();
    let media = format!("url: http://127.0.0.1:{port}/mcp\n");
    std::fs::write(path.join("connections/media.yml"), media).unwrap();
    std::fs::create_dir(path.join("agents")).unwrap();
    let rich = RICH.replace("{model}", model);
    std::fs::write(path.join("agents/rich.yml"), rich).unwrap();
    dir
}

/// The result of one JSON-RPC request to `path` (`/mcp` or an agent's).
async fn rpc(base: &str, path: &str, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let reply = mcp_request(&format!("{base}{path}"))
        .bearer_auth(TOKEN)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let reply: Value = serde_json::from_str(&reply.text().await.unwrap()).unwrap();
    assert!(reply.get("error").is_none(), "{reply}");
    reply["result"].clone()
}

#[tokio::test]
async fn every_block_reaches_the_client_unchanged_also_from_the_ledger() {
    let Some((mut upstream, port)) = sdk_fixture().await else {
        return;
    };
    let dir = deployment(port, "http://127.0.0.1:9/v1");
    let (addr, _) = serve_in_process(dir.path()).await;
    let base = format!("http://{addr}");
    let blocks = every_block();
    let args = json!({"content": blocks, "structuredContent": {"n": 1}});
    let keyed = json!({"name": "media__echo_blocks", "arguments": args, "_meta": {"io.airlock/call_key": "blocks-1"}});

    let out = rpc(&base, "", "tools/call", keyed.clone()).await;
    // Equal JSON: every string (base64 payloads included) byte for byte, in order.
    assert_eq!(out["content"], blocks, "{out}");
    assert_eq!(out["structuredContent"], json!({"n": 1}));
    let inline = json!({"name": "rich_echo_blocks", "arguments": args});
    let out = rpc(&base, "/agents/rich", "tools/call", inline).await;
    assert_eq!(out["content"], blocks, "{out}");

    // The upstream is gone: the re-sent call is answered from its ledger row alone.
    upstream.kill().await.unwrap();
    let again = rpc(&base, "", "tools/call", keyed).await;
    assert_eq!(again["content"], blocks, "{again}");
    assert_eq!(again["structuredContent"], json!({"n": 1}));
}

#[tokio::test]
async fn a_discovered_output_schema_is_listed_and_its_structured_content_served() {
    let Some((_upstream, port)) = sdk_fixture().await else {
        return;
    };
    let dir = deployment(port, "http://127.0.0.1:9/v1");
    let (addr, _) = serve_in_process(dir.path()).await;
    let base = format!("http://{addr}");
    let list = rpc(&base, "", "tools/list", json!({})).await;
    let tool = |name: &str| {
        list["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .cloned()
            .unwrap()
    };
    assert_eq!(
        tool("media__weather")["outputSchema"],
        json!({"type": "object", "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}}, "required": ["city", "celsius"]})
    );
    assert!(tool("media__echo_blocks").get("outputSchema").is_none());
    let params = json!({"name": "media__weather", "arguments": {"city": "Oslo"}});
    let out = rpc(&base, "", "tools/call", params).await;
    assert_eq!(
        out["structuredContent"],
        json!({"city": "Oslo", "celsius": 21.5})
    );
}

/// MCP-33: an agent's model reads an upstream's media as placeholders next to the text and the
/// structured content — never the bytes — while the blocks stay in the ledger.
#[tokio::test]
async fn a_model_reads_placeholders_not_the_bytes() {
    let Some((_upstream, port)) = sdk_fixture().await else {
        return;
    };
    let blocks = every_block();
    let call = FakeCall::new("call_1", "rich_echo_blocks", &json!({"content": blocks}));
    let model = FakeModel::openai(vec![
        ModelReply::calls(vec![call]),
        ModelReply::text(&["done"]),
    ])
    .await;
    let dir = deployment(port, &model.endpoint());
    let (addr, _) = serve_in_process(dir.path()).await;
    let input = json!({"input": "show me"});
    let (status, run, _) = http(
        addr,
        "POST",
        "/v1/agents/rich/run",
        Some(TOKEN),
        Some(input),
    )
    .await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["status"], "completed", "{run}");
    // What the model was told the tool returned (its own arguments carry the bytes it sent).
    let bodies = model.bodies();
    let told = bodies[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .unwrap()
        .to_owned();
    let text = "héllo ✓\n\"quoted\"\n[image: image/png, 69 bytes]\n[audio: audio/wav, 52 bytes]\n[resource link: file:///reports/q3.pdf]\n[resource: test://notes/1]\n[resource: test://blob/1]";
    let told: Value = serde_json::from_str(&told).unwrap();
    assert_eq!(told, json!({"text": text, "structured": null}));
}
