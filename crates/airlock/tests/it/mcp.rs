//! The MCP endpoint on the real gateway: deny-by-default auth, tools/list, a gated call parks
//! as rows, a person decides over the API, and the client comes back — even after a restart —
//! through `airlock_await_decision`, seeing only its own calls.

use serde_json::{Value, json};

use crate::support::{deployment_with, hello_upstream, mcp_request, serve_in_process};

pub(crate) const ADMIN: &str = "admin-2c26b46b68ffc68ff99b453c1d304134";
pub(crate) const CLAUDE: &str = "mcp-fcde2b2edba56bf408601fb721fe9b5c";
pub(crate) const OTHER: &str = "mcp-9b74c9897bac770ffc029102a200c5de";

pub(crate) fn deployment() -> tempfile::TempDir {
    let toml = "[[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"alice\"\n[[mcp.tokens]]\ncredential = \"airlock.claude\"\nprincipal = \"claude\"\n[[mcp.tokens]]\ncredential = \"airlock.other\"\nprincipal = \"other\"\n[egress]\nallow = [\"127.0.0.1/32\"]\nallow_fetch = true\n[credentials]\nfile = \"creds.yml\"\n[builtins.ask_human]\n[builtins.fetch]\napproval = \"always\"\n";
    deployment_with(
        toml,
        &format!("airlock:\n  admin: {ADMIN}\n  claude: {CLAUDE}\n  other: {OTHER}\n"),
    )
}

/// Boots the deployment and serves it on 127.0.0.1:0; returns the base URL.
pub(crate) async fn start(dir: &std::path::Path) -> String {
    let (addr, _) = serve_in_process(dir).await;
    format!("http://127.0.0.1:{}", addr.port())
}

pub(crate) async fn rpc(base: &str, token: Option<&str>, body: Value) -> (u16, Value) {
    let mut request = mcp_request(base).body(body.to_string());
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

pub(crate) async fn call(base: &str, token: &str, name: &str, arguments: Value) -> Value {
    let (status, reply) = rpc(base, Some(token), json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": name, "arguments": arguments}})).await;
    assert_eq!(status, 200, "{reply}");
    reply["result"].clone()
}

pub(crate) async fn approve(base: &str, id: &str) {
    let response = reqwest::Client::new()
        .post(format!("{base}/v1/approvals/{id}/decision"))
        .header("authorization", format!("Bearer {ADMIN}"))
        .header("content-type", "application/json")
        .body(r#"{"decision":"approve"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
}

/// A GET of `path` by the admin; the JSON body.
pub(crate) async fn admin_get(base: &str, path: &str) -> Value {
    reqwest::Client::new()
        .get(format!("{base}{path}"))
        .header("authorization", format!("Bearer {ADMIN}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// An upstream page for `fetch`.
pub(crate) async fn page() -> String {
    format!("http://{}/", hello_upstream().await)
}

#[tokio::test]
async fn the_endpoint_is_deny_by_default() {
    let dir = deployment();
    let base = start(dir.path()).await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    assert_eq!(rpc(&base, None, init.clone()).await.0, 401);
    assert_eq!(rpc(&base, Some("mcp-wrong"), init.clone()).await.0, 401);
    let (status, reply) = rpc(&base, Some(CLAUDE), init).await;
    assert_eq!(status, 200, "{reply}");
    assert!(
        reply["result"]["capabilities"]["tools"].is_object(),
        "{reply}"
    );
    let (_, list) = rpc(
        &base,
        Some(CLAUDE),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ask_human", "fetch", "airlock_await_decision"]);
    let fetch = &list["result"]["tools"][1];
    assert_eq!(fetch["annotations"]["readOnlyHint"], true, "{fetch}");
    let (_, unknown) = rpc(&base, Some(CLAUDE), json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "nope", "arguments": {}}})).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
}

#[tokio::test]
async fn a_gated_call_parks_and_the_client_comes_back_after_a_restart() {
    let dir = deployment();
    let url = page().await;
    let first = start(dir.path()).await;
    let parked = call(&first, CLAUDE, "fetch", json!({"url": url})).await;
    assert_eq!(parked["isError"], false, "{parked}");
    let status = &parked["structuredContent"];
    assert_eq!(status["status"], "awaiting_approval", "{parked}");
    assert_eq!(status["await_with"]["tool"], "airlock_await_decision");
    assert!(
        status["expires_at"].is_string(),
        "a parked call says when it expires: {parked}"
    );
    let id = status["invocation_id"].as_str().unwrap().to_owned();
    assert!(
        !parked["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("success")
    );

    // A redeploy: a new process over the same ledger file.
    let second = start(dir.path()).await;
    let still = call(
        &second,
        CLAUDE,
        "airlock_await_decision",
        json!({"invocation_id": id, "wait_seconds": 0}),
    )
    .await;
    assert_eq!(
        still["structuredContent"]["status"], "awaiting_approval",
        "{still}"
    );

    approve(&second, &id).await;
    let done = call(
        &second,
        CLAUDE,
        "airlock_await_decision",
        json!({"invocation_id": id, "wait_seconds": 10}),
    )
    .await;
    assert_eq!(done["isError"], false, "{done}");
    let settled = &done["structuredContent"];
    assert_eq!(settled["status"], "completed", "{done}");
    assert_eq!(settled["decided_by"], "alice", "{done}");
    assert_eq!(settled["result"]["body"], "hello", "{done}");

    let foreign = call(
        &second,
        OTHER,
        "airlock_await_decision",
        json!({"invocation_id": id, "wait_seconds": 0}),
    )
    .await;
    assert_eq!(
        foreign["isError"], true,
        "another principal must not see the call: {foreign}"
    );
}

#[tokio::test]
async fn a_question_waits_for_a_person_and_a_failure_is_an_error() {
    let dir = deployment();
    let base = start(dir.path()).await;
    let parked = call(&base, CLAUDE, "ask_human", json!({"question": "Ship it?"})).await;
    assert_eq!(
        parked["structuredContent"]["status"], "awaiting_answer",
        "{parked}"
    );
    let bad = call(&base, CLAUDE, "fetch", json!({})).await;
    assert_eq!(bad["isError"], true, "{bad}");
    assert!(
        bad["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("bad_arguments"),
        "{bad}"
    );
}

/// `scopes` on an MCP token: it reaches the endpoints it names and gets 403 on the others; a
/// token without `scopes` reaches every scope.
#[tokio::test]
async fn a_token_reaches_only_its_scopes() {
    let toml = "[[mcp.tokens]]\ncredential = \"airlock.claude\"\nprincipal = \"claude\"\nscopes = [\"agent:support\"]\n[[mcp.tokens]]\ncredential = \"airlock.other\"\nprincipal = \"other\"\n[egress]\nallow = [\"127.0.0.1/32\"]\nallow_fetch = true\n[credentials]\nfile = \"creds.yml\"\n[builtins.fetch]\n";
    let dir = deployment_with(
        toml,
        &format!("airlock:\n  claude: {CLAUDE}\n  other: {OTHER}\n"),
    );
    std::fs::create_dir(dir.path().join("agents")).unwrap();
    let agent = "apiVersion: airlock/v1\nkind: Agent\nmetadata: { name: support }\nspec:\n  model: { provider: openai, model: m }\n  prompts: { system: s }\n  tools:\n    - { name: fetch, type: builtin }\n";
    std::fs::write(dir.path().join("agents/support.yml"), agent).unwrap();
    let base = start(dir.path()).await;
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let post = |path: &str, token: &str| {
        reqwest::Client::new()
            .post(format!("{base}{path}"))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2025-11-25")
            .header("authorization", format!("Bearer {token}"))
            .body(list.to_string())
            .send()
    };
    let agent_reply = post("/agents/support/mcp", CLAUDE).await.unwrap();
    assert_eq!(agent_reply.status().as_u16(), 200);
    let refused = post("/mcp", CLAUDE).await.unwrap();
    assert_eq!(refused.status().as_u16(), 403);
    // MCP-24: a JSON-RPC error body naming the scope, for clients that show only the body.
    let content_type = refused.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(content_type, "application/json");
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32003, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("POST /mcp") && message.contains("\"gateway\""),
        "{message}"
    );
    for path in ["/mcp", "/agents/support/mcp"] {
        assert_eq!(
            post(path, OTHER).await.unwrap().status().as_u16(),
            200,
            "{path}"
        );
    }
}

/// A scope naming an agent that is not deployed stops boot with the principal and the name.
#[tokio::test]
async fn a_scope_of_an_unknown_agent_stops_boot() {
    let toml = "[[mcp.tokens]]\ncredential = \"airlock.claude\"\nprincipal = \"claude\"\nscopes = [\"agent:nobody\"]\n[credentials]\nfile = \"creds.yml\"\n";
    let dir = deployment_with(toml, &format!("airlock:\n  claude: {CLAUDE}\n"));
    let error = format!("{:#}", airlock::boot::boot(dir.path()).await.err().unwrap());
    assert!(
        error.contains("principal claude") && error.contains("agent:nobody"),
        "{error}"
    );
}
