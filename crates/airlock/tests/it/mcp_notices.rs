//! Progress and log messages relayed end to end (docs/rules.md MCP-63..MCP-67): the upstream is
//! built with the official TypeScript SDK (`crates/airlock-mcp/tests/sdk/fixture.mjs`, tool
//! `notices`), reached through a connection file (one request, no handshake) and through a
//! tenant's `type: mcp` tool with a bearer credential (a short session). Needs
//! `npm ci --prefix crates/airlock-mcp/tests/sdk`.

use serde_json::{Value, json};

use crate::support::{deployment_with, mcp_request, sdk_fixture, serve_in_process};

const TOKEN: &str = "mcp-7c1e9a4b2d8f4a6e9b3c5d7e1f2a4b6c";
const OTHER: &str = "mcp-2e4f6a8c0b1d3e5f7a9c1e3b5d7f9a1c";
const FIXTURE_TOKEN: &str = "fixture-9d3b7e1a5c2f4e8a";

/// Connection `media` and agent `watch` (tool `watch_notices`, with the fixture's bearer token,
/// and `confirmed_notices`, confirmed by the caller) on the fixture at `port`.
fn deployment(port: u16) -> tempfile::TempDir {
    let toml = format!(
        "[[mcp.tokens]]\ncredential = \"airlock.mcp\"\nprincipal = \"claude\"\n[[mcp.tokens]]\ncredential = \"airlock.other\"\nprincipal = \"other\"\n[egress]\nallow = [\"127.0.0.1/32\"]\n[connections.fixture]\nuse_egress_allow = true\nbase_url = \"http://127.0.0.1:{port}\"\ncredential = \"fixture.token\"\n[credentials]\nfile = \"creds.yml\"\n"
    );
    let creds =
        format!("airlock:\n  mcp: {TOKEN}\n  other: {OTHER}\nfixture:\n  token: {FIXTURE_TOKEN}\n");
    let dir = deployment_with(&toml, &creds);
    let path = dir.path();
    std::fs::create_dir(path.join("connections")).unwrap();
    let media = format!("url: http://127.0.0.1:{port}/mcp\n");
    std::fs::write(path.join("connections/media.yml"), media).unwrap();
    std::fs::create_dir(path.join("agents")).unwrap();
    let watch = "apiVersion: airlock/v1\nkind: Agent\nmetadata:\n  name: watch\nspec:\n  model: { provider: openai, model: unused }\n  prompts: { system: Unused. }\n  tools:\n    - name: watch\n      type: mcp\n      connection: fixture\n      path: /mcp\n      auth: { scheme: bearer }\n      tools:\n        - name: notices\n          description: Sends progress and log messages.\n          writes: false\n          input_schema: { type: object }\n    - name: confirmed\n      type: mcp\n      connection: fixture\n      path: /mcp\n      auth: { scheme: bearer }\n      approval: caller\n      tools:\n        - name: notices\n          description: Sends progress and log messages once confirmed.\n          writes: false\n          input_schema: { type: object }\n";
    std::fs::write(path.join("agents/watch.yml"), watch).unwrap();
    dir
}

/// A session-era request to `url` with `token`: the reply's content type and its JSON-RPC
/// messages (one for a JSON body, every event's data for a stream), in order.
async fn post(url: &str, token: &str, method: &str, params: Value) -> (String, Vec<Value>) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let reply = mcp_request(url)
        .bearer_auth(token)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    read(reply).await
}

async fn read(reply: reqwest::Response) -> (String, Vec<Value>) {
    let kind = reply.headers()["content-type"].to_str().unwrap().to_owned();
    let text = reply.text().await.unwrap();
    let messages = if kind.starts_with("text/event-stream") {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter(|d| !d.trim().is_empty())
            .map(|d| serde_json::from_str(d.trim()).unwrap())
            .collect()
    } else {
        vec![serde_json::from_str(&text).unwrap()]
    };
    (kind, messages)
}

fn of(messages: &[Value], method: &str) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| m["method"] == method)
        .map(|m| m["params"].clone())
        .collect()
}

/// MCP-63: the client's token on every progress message, in the upstream's order, before the
/// result on the same stream — through both upstream paths; no log message without a level.
#[tokio::test]
async fn mcp_63_progress_is_relayed_in_order_with_the_clients_token() {
    let Some((_upstream, port)) = sdk_fixture().await else {
        return;
    };
    let dir = deployment(port);
    let (addr, _) = serve_in_process(dir.path()).await;
    for (url, tool) in [
        (format!("http://{addr}"), "media__notices"),
        (format!("http://{addr}/agents/watch"), "watch_notices"),
    ] {
        let params = json!({"name": tool, "arguments": {}, "_meta": {"progressToken": "client-7"}});
        let (kind, messages) = post(&url, TOKEN, "tools/call", params).await;
        assert!(kind.starts_with("text/event-stream"), "{tool}: {kind}");
        let progress = of(&messages, "notifications/progress");
        assert_eq!(
            progress,
            [
                json!({"progressToken": "client-7", "progress": 1.0, "total": 2.0, "message": "half way"}),
                json!({"progressToken": "client-7", "progress": 2.0, "total": 2.0, "message": "done"}),
            ],
            "{tool}: {messages:?}"
        );
        assert!(
            of(&messages, "notifications/message").is_empty(),
            "{messages:?}"
        );
        let last = messages.last().unwrap();
        assert_eq!(last["id"], 1, "the result comes last: {messages:?}");
        assert_eq!(last["result"]["content"][0]["text"], "notices sent");
    }
}

/// MCP-63: a call without a progress token (and no log level) is answered with plain JSON.
#[tokio::test]
async fn mcp_63_a_call_without_a_token_is_plain_json() {
    let Some((_upstream, port)) = sdk_fixture().await else {
        return;
    };
    let dir = deployment(port);
    let (addr, _) = serve_in_process(dir.path()).await;
    let params = json!({"name": "watch_notices", "arguments": {}});
    let url = format!("http://{addr}/agents/watch");
    let (kind, messages) = post(&url, TOKEN, "tools/call", params).await;
    assert!(kind.starts_with("application/json"), "{kind}");
    assert_eq!(messages[0]["result"]["content"][0]["text"], "notices sent");
}

/// MCP-64, MCP-65, MCP-66: a session-era `logging/setLevel` holds for its principal on the
/// scope; messages below it are dropped, and so is the one quoting the upstream's credential;
/// another principal, who set none, gets no log message.
#[tokio::test]
async fn mcp_64_a_level_set_by_a_principal_filters_its_calls_and_no_credential_is_relayed() {
    let Some((_upstream, port)) = sdk_fixture().await else {
        return;
    };
    let dir = deployment(port);
    let (addr, _) = serve_in_process(dir.path()).await;
    let url = format!("http://{addr}/agents/watch");
    let (_, set) = post(&url, TOKEN, "logging/setLevel", json!({"level": "warning"})).await;
    assert_eq!(set[0]["result"], json!({}), "{set:?}");
    let params = json!({"name": "watch_notices", "arguments": {}});
    let (kind, messages) = post(&url, TOKEN, "tools/call", params.clone()).await;
    assert!(kind.starts_with("text/event-stream"), "{kind}");
    let logs = of(&messages, "notifications/message");
    assert_eq!(
        logs,
        [
            json!({"level": "warning", "logger": "fixture", "data": {"level": "warning"}}),
            json!({"level": "error", "logger": "fixture", "data": {"level": "error"}}),
        ],
        "{messages:?}"
    );
    let everything = serde_json::to_string(&messages).unwrap();
    assert!(!everything.contains(FIXTURE_TOKEN), "{everything}");
    assert!(of(&messages, "notifications/progress").is_empty());

    let (kind, _) = post(&url, OTHER, "tools/call", params).await;
    assert!(kind.starts_with("application/json"), "{kind}");
}

/// MCP-64: on 2026-07-28 the level comes with each request, and `logging/setLevel` is not a
/// method (404, -32601).
#[tokio::test]
async fn mcp_64_a_2026_request_carries_its_own_level() {
    let Some((_upstream, port)) = sdk_fixture().await else {
        return;
    };
    let dir = deployment(port);
    let (addr, _) = serve_in_process(dir.path()).await;
    let meta = |level: Option<&str>| {
        let mut meta = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        if let Some(level) = level {
            meta["io.modelcontextprotocol/logLevel"] = json!(level);
        }
        meta
    };
    let send = |method: &'static str, name: Option<&'static str>, params: Value| {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut request = reqwest::Client::new()
            .post(format!("http://{addr}/agents/watch/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .bearer_auth(TOKEN)
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method);
        if let Some(name) = name {
            request = request.header("mcp-name", name);
        }
        request.body(body.to_string()).send()
    };
    let reply = send(
        "logging/setLevel",
        None,
        json!({"level": "debug", "_meta": meta(None)}),
    )
    .await
    .unwrap();
    let status = reply.status();
    let (_, refused) = read(reply).await;
    assert_eq!(status, 404, "{refused:?}");
    assert_eq!(refused[0]["error"]["code"], -32601, "{refused:?}");

    let call = |level| json!({"name": "watch_notices", "arguments": {}, "_meta": meta(level)});
    let reply = send("tools/call", Some("watch_notices"), call(Some("info")));
    let (kind, messages) = read(reply.await.unwrap()).await;
    assert!(kind.starts_with("text/event-stream"), "{kind}");
    let levels: Vec<_> = of(&messages, "notifications/message")
        .into_iter()
        .map(|m| m["level"].clone())
        .collect();
    assert_eq!(levels, ["info", "warning", "error"], "{messages:?}");
    let reply = send("tools/call", Some("watch_notices"), call(None));
    let (kind, _) = read(reply.await.unwrap()).await;
    assert!(kind.starts_with("application/json"), "{kind}");
}

/// MCP-63 with MCP-49: a call confirmed by the person at the client runs in the retry, and the
/// retry that asks for progress gets it before the result.
#[tokio::test]
async fn mcp_63_a_confirming_retry_relays_the_progress_of_the_call_it_runs() {
    let Some((_upstream, port)) = sdk_fixture().await else {
        return;
    };
    let dir = deployment(port);
    let (addr, _) = serve_in_process(dir.path()).await;
    let send = |mut params: Value| {
        params["name"] = json!("confirmed_notices");
        params["arguments"] = json!({});
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
            "progressToken": 42,
        });
        let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params});
        reqwest::Client::new()
            .post(format!("http://{addr}/agents/watch/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "confirmed_notices")
            .bearer_auth(TOKEN)
            .body(body.to_string())
            .send()
    };
    let (kind, asked) = read(send(json!({})).await.unwrap()).await;
    assert!(
        kind.starts_with("application/json"),
        "nothing ran yet: {asked:?}"
    );
    let result = &asked[0]["result"];
    assert_eq!(result["resultType"], "input_required", "{asked:?}");
    let state = result["requestState"].clone();
    let confirm = json!({
        "requestState": state,
        "inputResponses": {"airlock_person": {"action": "accept", "content": {"approve": true}}},
    });
    let (kind, messages) = read(send(confirm).await.unwrap()).await;
    assert!(
        kind.starts_with("text/event-stream"),
        "{kind}: {messages:?}"
    );
    let tokens: Vec<_> = of(&messages, "notifications/progress")
        .into_iter()
        .map(|p| (p["progressToken"].clone(), p["progress"].clone()))
        .collect();
    assert_eq!(tokens, [(json!(42), json!(1.0)), (json!(42), json!(2.0))]);
    let last = messages.last().unwrap();
    assert_eq!(
        last["result"]["content"][0]["text"], "notices sent",
        "{messages:?}"
    );
}
