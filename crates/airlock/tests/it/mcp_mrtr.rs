//! Input requests on the real gateway (docs/rules.md MCP-46..MCP-50, LEDGER-46): a 2026-07-28
//! client that declares elicitation confirms an `approval: caller` call, or answers
//! `ask_human`, through its own person; the sealed `requestState` is refused when tampered,
//! replayed (also concurrently), used by another principal or with other arguments; a client
//! without the capability gets the parked payload as before.

use serde_json::{Value, json};

use crate::mcp::{ADMIN, CLAUDE, OTHER, admin_get, call, page, start};
use crate::support::{deployment_with, modern_tools_call};

/// The MCP test deployment, with `fetch` confirmed by the caller.
pub(crate) fn deployment() -> tempfile::TempDir {
    let toml = "[[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"alice\"\n[[mcp.tokens]]\ncredential = \"airlock.claude\"\nprincipal = \"claude\"\n[[mcp.tokens]]\ncredential = \"airlock.other\"\nprincipal = \"other\"\n[egress]\nallow = [\"127.0.0.1/32\"]\nallow_fetch = true\n[credentials]\nfile = \"creds.yml\"\n[builtins.ask_human]\n[builtins.fetch]\napproval = \"caller\"\n";
    deployment_with(
        toml,
        &format!("airlock:\n  admin: {ADMIN}\n  claude: {CLAUDE}\n  other: {OTHER}\n"),
    )
}

/// A 2026-07-28 `tools/call` declaring elicitation; the JSON-RPC reply.
async fn call_2026(base: &str, token: &str, params: Value) -> Value {
    let url = format!("{base}/mcp");
    modern_tools_call(&url, token, params, json!({"elicitation": {}})).await
}

/// Round 1: the call, answered with an input request; its `requestState`.
pub(crate) async fn asked(base: &str, tool: &str, arguments: &Value) -> (Value, String) {
    let reply = call_2026(base, CLAUDE, json!({"name": tool, "arguments": arguments})).await;
    let result = reply["result"].clone();
    assert_eq!(result["resultType"], "input_required", "{reply}");
    let state = result["requestState"].as_str().unwrap().to_owned();
    (result, state)
}

/// Round 2: the retry with the person's elicitation result and the state.
pub(crate) async fn retry(
    base: &str,
    token: &str,
    tool: &str,
    arguments: &Value,
    state: &str,
    content: Value,
) -> Value {
    let params = json!({
        "name": tool,
        "arguments": arguments,
        "inputResponses": {"airlock_person": {"action": "accept", "content": content}},
        "requestState": state,
    });
    call_2026(base, token, params).await
}

pub(crate) fn reason(reply: &Value) -> &str {
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    reply["error"]["data"]["reason"]
        .as_str()
        .unwrap_or_default()
}

/// MCP-46, MCP-49: the person confirms the exact call; it runs once, decided in the caller's
/// name, and its result is the retry's answer.
#[tokio::test]
async fn the_person_at_the_client_confirms_the_exact_call_and_it_runs() {
    let dir = deployment();
    let base = start(dir.path()).await;
    let arguments = json!({"url": page().await});
    let (result, state) = asked(&base, "fetch", &arguments).await;
    let request = &result["inputRequests"]["airlock_person"];
    assert_eq!(request["method"], "elicitation/create", "{result}");
    let message = request["params"]["message"].as_str().unwrap();
    assert!(
        message.contains("Tool: fetch") && message.contains(arguments["url"].as_str().unwrap()),
        "{message}"
    );
    assert!(
        !state.contains("claude") && !state.contains("fetch"),
        "the state is sealed: {state}"
    );
    let pending = admin_get(&base, "/v1/approvals").await;
    let id = pending["approvals"][0]["id"].as_str().unwrap().to_owned();

    let done = retry(
        &base,
        CLAUDE,
        "fetch",
        &arguments,
        &state,
        json!({"approve": true}),
    )
    .await;
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert_eq!(
        done["result"]["structuredContent"]["body"], "hello",
        "{done}"
    );
    let row = admin_get(&base, &format!("/v1/invocations/{id}")).await;
    assert_eq!(row["state"], "succeeded", "{row}");
    assert_eq!(row["decision"]["by"], "claude", "{row}");
}

/// MCP-47: `ask_human` puts its question to the person at the client; the answer is the result.
#[tokio::test]
async fn ask_human_asks_the_person_at_the_client() {
    let dir = deployment();
    let base = start(dir.path()).await;
    let arguments = json!({"question": "Which day\u{202E}?"});
    let (result, state) = asked(&base, "ask_human", &arguments).await;
    let params = &result["inputRequests"]["airlock_person"]["params"];
    assert_eq!(params["message"], "Which day\\u{202E}?", "{result}");
    assert_eq!(params["requestedSchema"]["required"][0], "answer");
    let answered = retry(
        &base,
        CLAUDE,
        "ask_human",
        &arguments,
        &state,
        json!({"answer": "Friday"}),
    )
    .await;
    assert_eq!(
        answered["result"]["structuredContent"]["answer"], "Friday",
        "{answered}"
    );
}

/// MCP-46: a declined confirmation is a denial in the caller's name; nothing runs.
#[tokio::test]
async fn a_declined_confirmation_denies_the_call() {
    let dir = deployment();
    let base = start(dir.path()).await;
    let arguments = json!({"url": page().await});
    let (_, state) = asked(&base, "fetch", &arguments).await;
    let declined = retry(
        &base,
        CLAUDE,
        "fetch",
        &arguments,
        &state,
        json!({"approve": false}),
    )
    .await;
    assert_eq!(declined["result"]["isError"], true, "{declined}");
    assert_eq!(
        declined["result"]["structuredContent"]["denied"],
        "declined by the person at the client"
    );
}

/// MCP-46: a client that does not declare elicitation (here a 2025 one) gets the parked
/// payload and the await tool, as before.
#[tokio::test]
async fn a_client_without_the_capability_gets_the_parked_payload() {
    let dir = deployment();
    let base = start(dir.path()).await;
    let result = call(&base, CLAUDE, "fetch", json!({"url": page().await})).await;
    assert_eq!(
        result["structuredContent"]["status"], "awaiting_approval",
        "{result}"
    );
    assert_eq!(
        result["structuredContent"]["await_with"]["tool"],
        "airlock_await_decision"
    );
}

/// MCP-48: a tampered, foreign-principal or other-arguments state is refused, each with its
/// own reason, and decides nothing: the genuine retry still works afterwards.
#[tokio::test]
async fn a_tampered_foreign_or_mismatched_state_is_refused_with_its_reason() {
    let dir = deployment();
    let base = start(dir.path()).await;
    let arguments = json!({"url": page().await});
    let (_, state) = asked(&base, "fetch", &arguments).await;
    let yes = || json!({"approve": true});

    let mut tampered = state.clone().into_bytes();
    let at = tampered.len() / 2;
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    let reply = retry(&base, CLAUDE, "fetch", &arguments, &tampered, yes()).await;
    assert_eq!(reason(&reply), "tampered");

    let reply = retry(&base, OTHER, "fetch", &arguments, &state, yes()).await;
    assert_eq!(reason(&reply), "other_principal");

    let other = json!({"url": format!("{}?x=1", arguments["url"].as_str().unwrap())});
    let reply = retry(&base, CLAUDE, "fetch", &other, &state, yes()).await;
    assert_eq!(reason(&reply), "other_arguments");

    let reply = retry(&base, CLAUDE, "ask_human", &arguments, &state, yes()).await;
    assert_eq!(reason(&reply), "other_tool");

    // Without the response, the same question again, with the same state.
    let again = call_2026(
        &base,
        CLAUDE,
        json!({"name": "fetch", "arguments": arguments, "requestState": state}),
    )
    .await;
    assert_eq!(again["result"]["resultType"], "input_required", "{again}");
    assert_eq!(again["result"]["requestState"], state.as_str());

    let done = retry(&base, CLAUDE, "fetch", &arguments, &state, yes()).await;
    assert_eq!(
        done["result"]["structuredContent"]["body"], "hello",
        "{done}"
    );
}

/// MCP-49, LEDGER-46: a state is used once — a replay after the call ran, and all but one of
/// eight concurrent retries, are refused as `replayed`; the call runs once.
#[tokio::test]
async fn a_replayed_state_is_refused_also_concurrently() {
    let dir = deployment();
    let base = start(dir.path()).await;
    let arguments = json!({"url": page().await});
    let (_, state) = asked(&base, "fetch", &arguments).await;
    let mut retries = Vec::new();
    for _ in 0..8 {
        let (base, arguments, state) = (base.clone(), arguments.clone(), state.clone());
        retries.push(tokio::spawn(async move {
            retry(
                &base,
                CLAUDE,
                "fetch",
                &arguments,
                &state,
                json!({"approve": true}),
            )
            .await
        }));
    }
    let mut ran = 0;
    for reply in retries {
        let reply = reply.await.unwrap();
        if reply.get("result").is_some() {
            assert_eq!(
                reply["result"]["structuredContent"]["body"], "hello",
                "{reply}"
            );
            ran += 1;
        } else {
            assert_eq!(reason(&reply), "replayed");
        }
    }
    assert_eq!(ran, 1, "exactly one of the concurrent retries decides");
    let late = retry(
        &base,
        CLAUDE,
        "fetch",
        &arguments,
        &state,
        json!({"approve": true}),
    )
    .await;
    assert_eq!(reason(&late), "replayed");
}

/// POLICY-54: the person at the client confirming a call is a decision like any other — a
/// freeze made after the call parked refuses it, and the call stays parked, unrun.
#[tokio::test]
async fn a_confirmation_under_a_freeze_is_refused_and_nothing_runs() {
    let dir = deployment();
    let base = start(dir.path()).await;
    let arguments = json!({"url": page().await});
    let (_, state) = asked(&base, "fetch", &arguments).await;
    let pending = admin_get(&base, "/v1/approvals").await;
    let id = pending["approvals"][0]["id"].as_str().unwrap().to_owned();
    let frozen = reqwest::Client::new()
        .post(format!("{base}/v1/freezes"))
        .bearer_auth(ADMIN)
        .json(&json!({"kind": "principal", "name": "claude", "reason": "token leaked"}))
        .send()
        .await
        .unwrap();
    assert_eq!(frozen.status().as_u16(), 201);
    let refused = retry(
        &base,
        CLAUDE,
        "fetch",
        &arguments,
        &state,
        json!({"approve": true}),
    )
    .await;
    let text = refused.to_string();
    assert!(
        text.contains("principal `claude` is frozen by alice (token leaked)"),
        "{refused}"
    );
    let row = admin_get(&base, &format!("/v1/invocations/{id}")).await;
    assert_eq!(row["state"], "awaiting_approval", "{row}");
}
