//! Relayed input rounds on the real gateway (docs/rules.md MCP-68..MCP-75, LEDGER-61..LEDGER-63),
//! against a 2026-07-28 upstream built with the official TypeScript SDK v2
//! (`crates/airlock/tests/upstream-v2/mrtr.mjs`): its elicitation, sampling and roots
//! requests reach the client under the upstream's own keys with airlock's sealed state, the
//! client's answers reach the upstream as sent, several rounds chain, and a state is refused when
//! tampered, replayed (also concurrently: exactly one retry proceeds), or used by another
//! principal or with other arguments; a client is asked only what it declared it can answer,
//! and a round needing more is refused with -32021 (MCP-80). The upstream's prompt asking for
//! input is relayed the same way (MCP-81, LEDGER-67).

use serde_json::{Value, json};

use crate::mcp::{CLAUDE, OTHER, start};
use crate::support::{
    deployment_with, modern_request, modern_tools_call, modern_tools_call_status, mrtr_fixture,
};

/// The tools of the fixture; the `relay` agent's scope serves them with the prefix `up_`.
const TOOLS: [&str; 8] = [
    "elicitation",
    "sampling",
    "list_roots",
    "request_state",
    "multiple_inputs",
    "multi_round",
    "tampered_state",
    "capabilities",
];

/// A deployment whose agent `relay` serves the fixture's tools, on the upstream at `port`,
/// reached on 2026-07-28.
fn deployment(port: u16) -> tempfile::TempDir {
    let toml = format!(
        "[[mcp.tokens]]\ncredential = \"airlock.claude\"\nprincipal = \"claude\"\n[[mcp.tokens]]\ncredential = \"airlock.other\"\nprincipal = \"other\"\n[egress]\nallow = [\"127.0.0.1/32\"]\n[connections.up]\nuse_egress_allow = true\nbase_url = \"http://127.0.0.1:{port}\"\n[credentials]\nfile = \"creds.yml\"\n"
    );
    let dir = deployment_with(
        &toml,
        &format!("airlock:\n  claude: {CLAUDE}\n  other: {OTHER}\n"),
    );
    let tools: String = TOOLS
        .iter()
        .map(|t| {
            format!(
                "        - name: {t}\n          description: Asks its client.\n          writes: false\n          input_schema: {{ type: object }}\n"
            )
        })
        .collect();
    let agent = format!(
        "apiVersion: airlock/v1\nkind: Agent\nmetadata:\n  name: relay\n  description: Relayed input rounds.\nspec:\n  model: {{ provider: openai, model: unused }}\n  prompts: {{ system: Unused. }}\n  tools:\n    - name: up\n      type: mcp\n      connection: up\n      path: /mcp\n      protocol: 2026-07-28\n      offers: true\n      tools:\n{tools}    - name: gated\n      type: mcp\n      connection: up\n      path: /mcp\n      protocol: 2026-07-28\n      approval: caller\n      tools:\n        - name: elicitation\n          description: Asks its client once confirmed.\n          writes: false\n          input_schema: {{ type: object }}\n"
    );
    std::fs::create_dir(dir.path().join("agents")).unwrap();
    std::fs::write(dir.path().join("agents/relay.yml"), agent).unwrap();
    dir
}

/// The gateway on a fresh deployment in front of a fresh fixture; `None` without the SDK.
async fn gateway() -> Option<(tokio::process::Child, tempfile::TempDir, String)> {
    let (upstream, port) = mrtr_fixture().await?;
    let dir = deployment(port);
    let base = start(dir.path()).await;
    Some((upstream, dir, format!("{base}/agents/relay/mcp")))
}

/// A 2026-07-28 `tools/call` of `up_<tool>` (or of `tool` itself when it names its
/// declaration, `gated_…`) declaring `capabilities`; the JSON-RPC reply.
async fn call(url: &str, token: &str, tool: &str, extra: Value, capabilities: Value) -> Value {
    let name = if tool.starts_with("gated_") {
        tool.to_owned()
    } else {
        format!("up_{tool}")
    };
    let mut params = json!({"name": name, "arguments": {}});
    if let Value::Object(extra) = extra {
        params.as_object_mut().unwrap().extend(extra);
    }
    modern_tools_call(url, token, params, capabilities).await
}

fn every_capability() -> Value {
    json!({"elicitation": {}, "sampling": {}, "roots": {"listChanged": true}})
}

/// Round 1 of `tool` for a client that can answer anything: the result asking for input.
async fn asked(url: &str, tool: &str) -> Value {
    let reply = call(url, CLAUDE, tool, json!({}), every_capability()).await;
    let result = reply["result"].clone();
    assert_eq!(result["resultType"], "input_required", "{reply}");
    assert!(
        result["requestState"].as_str().unwrap().starts_with("al1."),
        "airlock's own sealed state: {result}"
    );
    result
}

/// The retry of a round with `responses` and the state it was given.
async fn answer(url: &str, token: &str, tool: &str, asked: &Value, responses: Value) -> Value {
    let extra = json!({"inputResponses": responses, "requestState": asked["requestState"]});
    call(url, token, tool, extra, every_capability()).await
}

fn accept(content: Value) -> Value {
    let mut accepted = json!({"action": "accept"});
    accepted["content"] = content;
    accepted
}

fn text(reply: &Value) -> &str {
    reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

fn reason(reply: &Value) -> &str {
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    reply["error"]["data"]["reason"]
        .as_str()
        .unwrap_or_default()
}

/// MCP-68, MCP-70: the upstream's elicitation reaches the client under its own key; the answer
/// reaches the upstream as sent, and the retry gets the upstream's result.
#[tokio::test]
async fn mcp_68_an_upstream_elicitation_is_relayed_and_answered() {
    let Some((_up, _dir, url)) = gateway().await else {
        return;
    };
    let result = asked(&url, "elicitation").await;
    let request = &result["inputRequests"]["user_name"];
    assert_eq!(request["method"], "elicitation/create", "{result}");
    assert_eq!(
        request["params"]["message"], "What is your name?",
        "{result}"
    );
    let responses = json!({"user_name": accept(json!({"name": "Alice"}))});
    let done = answer(&url, CLAUDE, "elicitation", &result, responses.clone()).await;
    assert_eq!(text(&done), "Hello, Alice!", "{done}");
    let seen = &done["result"]["structuredContent"];
    assert_eq!(
        seen["inputResponses"], responses,
        "sent as the client sent them: {done}"
    );
}

/// MCP-87: an answer not matching the elicitation's `requestedSchema` is refused with -32602
/// naming the field, and goes nowhere: the state stays unused (a matching answer then
/// continues the round) and the upstream sees only that answer.
#[tokio::test]
async fn mcp_87_an_answer_not_matching_the_requested_schema_is_refused() {
    let Some((_up, _dir, url)) = gateway().await else {
        return;
    };
    let result = asked(&url, "elicitation").await;
    for (content, field) in [(json!({"name": 7}), "name"), (json!({}), "name")] {
        let wrong = json!({"user_name": accept(content)});
        let refused = answer(&url, CLAUDE, "elicitation", &result, wrong).await;
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
        assert_eq!(refused["error"]["data"]["field"], field, "{refused}");
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("inputResponses.user_name.content.name: "),
            "{refused}"
        );
    }
    let responses = json!({"user_name": accept(json!({"name": "Alice"}))});
    let done = answer(&url, CLAUDE, "elicitation", &result, responses.clone()).await;
    assert_eq!(text(&done), "Hello, Alice!", "{done}");
    assert_eq!(
        done["result"]["structuredContent"]["inputResponses"],
        responses
    );

    let (_, first) = get_prompt(&url, CLAUDE, json!({}), every_capability()).await;
    let wrong = json!({
        "inputResponses": {"user_context": accept(json!({"context": true}))},
        "requestState": first["result"]["requestState"],
    });
    let (_, refused) = get_prompt(&url, CLAUDE, wrong, every_capability()).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert_eq!(refused["error"]["data"]["field"], "context", "{refused}");
}

/// MCP-68: sampling and roots requests are relayed too, and so are several in one round.
#[tokio::test]
async fn mcp_68_sampling_roots_and_several_requests_are_relayed() {
    let Some((_up, _dir, url)) = gateway().await else {
        return;
    };
    let sampled = json!({"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m", "stopReason": "endTurn"});
    let roots = json!({"roots": [{"uri": "file:///work", "name": "work"}]});

    let result = asked(&url, "sampling").await;
    let request = &result["inputRequests"]["capital_question"];
    assert_eq!(request["method"], "sampling/createMessage", "{result}");
    let done = answer(
        &url,
        CLAUDE,
        "sampling",
        &result,
        json!({"capital_question": sampled}),
    )
    .await;
    assert_eq!(text(&done), "The model said: Paris", "{done}");

    let result = asked(&url, "list_roots").await;
    assert_eq!(
        result["inputRequests"]["client_roots"]["method"],
        "roots/list"
    );
    let done = answer(
        &url,
        CLAUDE,
        "list_roots",
        &result,
        json!({"client_roots": roots}),
    )
    .await;
    assert_eq!(text(&done), "Roots: file:///work", "{done}");

    let result = asked(&url, "multiple_inputs").await;
    let keys: Vec<&String> = result["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(keys, ["client_roots", "greeting", "user_name"], "{result}");
    let all = json!({
        "user_name": accept(json!({"name": "Bo"})),
        "greeting": sampled,
        "client_roots": roots,
    });
    let done = answer(&url, CLAUDE, "multiple_inputs", &result, all).await;
    assert_eq!(text(&done), "Hello, Bo! (1 roots)", "{done}");
}

/// MCP-70, MCP-71: several rounds chain, each with a new sealed state; the upstream's own
/// state goes back to it inside airlock's and never reaches the client bare.
#[tokio::test]
async fn mcp_70_several_rounds_chain_with_the_upstream_state_sealed() {
    let Some((_up, _dir, url)) = gateway().await else {
        return;
    };
    let first = asked(&url, "multi_round").await;
    let step1 = json!({"step1": accept(json!({"name": "Cy"}))});
    let second = answer(&url, CLAUDE, "multi_round", &first, step1).await["result"].clone();
    assert_eq!(second["resultType"], "input_required", "{second}");
    assert!(second["inputRequests"]["step2"].is_object(), "{second}");
    assert_ne!(second["requestState"], first["requestState"]);
    let state = second["requestState"].as_str().unwrap();
    assert!(
        state.starts_with("al1.") && !state.contains("v1."),
        "{state}"
    );
    let step2 = json!({"step2": accept(json!({"color": "blue"}))});
    let done = answer(&url, CLAUDE, "multi_round", &second, step2).await;
    assert_eq!(text(&done), "Cy likes blue", "{done}");

    let result = asked(&url, "request_state").await;
    let done = answer(
        &url,
        CLAUDE,
        "request_state",
        &result,
        json!({"confirm": accept(json!({"ok": true}))}),
    )
    .await;
    assert!(text(&done).starts_with("state-ok"), "{done}");
    let upstream = done["result"]["structuredContent"]["requestState"].clone();
    assert_eq!(
        upstream,
        json!({"step": "confirm"}),
        "its own state came back: {done}"
    );
}

/// MCP-72: a relayed round's state is refused when tampered, used by another principal, with
/// other arguments, or used again.
#[tokio::test]
async fn mcp_72_a_relayed_state_is_refused_when_misused() {
    let Some((_up, _dir, url)) = gateway().await else {
        return;
    };
    let result = asked(&url, "tampered_state").await;
    let ok = json!({"confirm": accept(json!({"ok": true}))});
    let state = result["requestState"].as_str().unwrap();
    let tampered = json!({"requestState": format!("{state}-TAMPERED")});
    let reply = answer(&url, CLAUDE, "tampered_state", &tampered, ok.clone()).await;
    assert_eq!(reason(&reply), "tampered");
    let reply = answer(&url, OTHER, "tampered_state", &result, ok.clone()).await;
    assert_eq!(reason(&reply), "other_principal");
    let other = json!({"arguments": {"x": 1}, "inputResponses": ok, "requestState": state});
    let reply = call(&url, CLAUDE, "tampered_state", other, every_capability()).await;
    assert_eq!(reason(&reply), "other_arguments");
    let done = answer(&url, CLAUDE, "tampered_state", &result, ok.clone()).await;
    assert_eq!(text(&done), "confirmed", "{done}");
    let again = answer(&url, CLAUDE, "tampered_state", &result, ok).await;
    assert_eq!(reason(&again), "replayed");
}

/// MCP-72, LEDGER-62: of concurrent retries with one state, exactly one runs the next round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_72_of_concurrent_retries_with_one_state_exactly_one_proceeds() {
    let Some((_up, _dir, url)) = gateway().await else {
        return;
    };
    let result = asked(&url, "elicitation").await;
    let responses = json!({"user_name": accept(json!({"name": "Di"}))});
    let retries = (0..4).map(|_| answer(&url, CLAUDE, "elicitation", &result, responses.clone()));
    let replies = futures::future::join_all(retries).await;
    let done = replies.iter().filter(|r| text(r) == "Hello, Di!").count();
    let replayed = replies
        .iter()
        .filter(|r| r["error"]["data"]["reason"] == "replayed")
        .count();
    assert_eq!((done, replayed), (1, 3), "{replies:?}");
}

/// MCP-69: the upstream is told only what the client declared, so it asks nothing else.
#[tokio::test]
async fn mcp_69_a_client_is_asked_only_what_it_declared() {
    let Some((_up, _dir, url)) = gateway().await else {
        return;
    };
    let sampling_only = json!({"sampling": {}});
    let reply = call(&url, CLAUDE, "capabilities", json!({}), sampling_only).await;
    let requests = reply["result"]["inputRequests"].as_object().unwrap();
    let keys: Vec<&String> = requests.keys().collect();
    assert_eq!(keys, ["greeting"], "{reply}");
}

/// MCP-80: told that this client did not declare what its round needs, the upstream refuses to
/// ask (-32021, as the SDK does); the client gets airlock's own -32021 naming the capability,
/// HTTP 400, never a tool error. (A round asking for it anyway is refused alike: `relayed`'s
/// unit test.) Declared, the same tool's round is relayed.
#[tokio::test]
async fn mcp_80_a_round_needing_an_undeclared_capability_is_refused_with_32021() {
    let Some((_up, _dir, url)) = gateway().await else {
        return;
    };
    let params = json!({"name": "up_sampling", "arguments": {}});
    let elicitation_only = json!({"elicitation": {}});
    let (status, reply) = modern_tools_call_status(&url, CLAUDE, params, elicitation_only).await;
    assert_eq!(status, 400, "{reply}");
    assert_eq!(reply["error"]["code"], -32021, "{reply}");
    let required = &reply["error"]["data"]["requiredCapabilities"];
    assert_eq!(required, &json!({"sampling": {}}), "{reply}");

    let (status, reply) = modern_tools_call_status(
        &url,
        CLAUDE,
        json!({"name": "up_elicitation", "arguments": {}}),
        json!({}),
    )
    .await;
    assert_eq!(
        (status, &reply["error"]["code"]),
        (400, &json!(-32021)),
        "{reply}"
    );
    let asked = call(&url, CLAUDE, "sampling", json!({}), json!({"sampling": {}})).await;
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
}

/// MCP-74: a call the person at the client confirms (`approval: caller`) is asked under
/// airlock's own key first; once it runs, its upstream's own requests are relayed under theirs,
/// and the next round is not gated again.
#[tokio::test]
async fn mcp_74_a_confirmed_call_then_relays_its_upstreams_requests() {
    let Some((_up, _dir, url)) = gateway().await else {
        return;
    };
    let tool = "gated_elicitation";
    let first = call(&url, CLAUDE, tool, json!({}), every_capability()).await["result"].clone();
    let keys: Vec<&String> = first["inputRequests"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["airlock_person"], "{first}");
    let approve = json!({"airlock_person": accept(json!({"approve": true}))});
    let relayed = answer(&url, CLAUDE, tool, &first, approve).await["result"].clone();
    assert_eq!(relayed["resultType"], "input_required", "{relayed}");
    assert!(
        relayed["inputRequests"]["user_name"].is_object(),
        "{relayed}"
    );
    assert_ne!(relayed["requestState"], first["requestState"]);
    let name = json!({"user_name": accept(json!({"name": "Eve"}))});
    let done = answer(&url, CLAUDE, tool, &relayed, name).await;
    assert_eq!(text(&done), "Hello, Eve!", "{done}");
}

/// A 2026-07-28 `prompts/get` of `up_prompt` as `token`, declaring `capabilities`.
async fn get_prompt(url: &str, token: &str, extra: Value, capabilities: Value) -> (u16, Value) {
    let mut params = json!({"name": "up_prompt"});
    if let Value::Object(extra) = extra {
        params.as_object_mut().unwrap().extend(extra);
    }
    modern_request(url, token, "prompts/get", params, capabilities).await
}

/// MCP-81, LEDGER-67: an upstream's `prompts/get` asking for input is relayed as a tool's round
/// is: its request under its own key with airlock's sealed state; the retry's answer reaches the
/// upstream, which then answers the prompt. The state is used once, bound to the prompt (a
/// tool's state does not continue it) and to its principal; a client that did not declare what
/// the round needs is refused with -32021 (MCP-80).
#[tokio::test]
async fn mcp_81_a_prompts_input_requests_are_relayed() {
    let Some((_up, _dir, url)) = gateway().await else {
        return;
    };
    let (_, first) = get_prompt(&url, CLAUDE, json!({}), every_capability()).await;
    let asked = first["result"].clone();
    assert_eq!(asked["resultType"], "input_required", "{first}");
    let request = &asked["inputRequests"]["user_context"];
    assert_eq!(request["method"], "elicitation/create", "{first}");
    let state = asked["requestState"].as_str().unwrap();
    assert!(
        state.starts_with("al1."),
        "airlock's own sealed state: {first}"
    );
    let retry = json!({
        "inputResponses": {"user_context": accept(json!({"context": "the ledger"}))},
        "requestState": state,
    });
    let (_, done) = get_prompt(&url, CLAUDE, retry.clone(), every_capability()).await;
    let text = &done["result"]["messages"][0]["content"]["text"];
    assert_eq!(text, "Use this context: the ledger", "{done}");

    let (_, replayed) = get_prompt(&url, CLAUDE, retry.clone(), every_capability()).await;
    assert_eq!(reason(&replayed), "replayed", "{replayed}");
    let (_, fresh) = get_prompt(&url, CLAUDE, json!({}), every_capability()).await;
    let mut other = retry.clone();
    other["requestState"] = fresh["result"]["requestState"].clone();
    let (_, stranger) = get_prompt(&url, OTHER, other, every_capability()).await;
    assert_eq!(reason(&stranger), "other_principal", "{stranger}");
    let tool_state = crate::mcp_relay::asked(&url, "elicitation").await["requestState"].clone();
    let mut crossed = retry;
    crossed["requestState"] = tool_state;
    let (_, crossed) = get_prompt(&url, CLAUDE, crossed, every_capability()).await;
    assert_eq!(reason(&crossed), "other_tool", "{crossed}");

    let (status, refused) = get_prompt(&url, CLAUDE, json!({}), json!({})).await;
    assert_eq!(
        (status, &refused["error"]["code"]),
        (400, &json!(-32021)),
        "{refused}"
    );
}

/// LEDGER-67: of concurrent retries of a prompt's round with one state, exactly one gets the
/// prompt; the others are `replayed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ledger_67_of_concurrent_prompt_retries_with_one_state_exactly_one_proceeds() {
    let Some((_up, _dir, url)) = gateway().await else {
        return;
    };
    let (_, first) = get_prompt(&url, CLAUDE, json!({}), every_capability()).await;
    let retry = json!({
        "inputResponses": {"user_context": accept(json!({"context": "once"}))},
        "requestState": first["result"]["requestState"],
    });
    let retries = (0..4).map(|_| get_prompt(&url, CLAUDE, retry.clone(), every_capability()));
    let replies = futures::future::join_all(retries).await;
    let done = replies
        .iter()
        .filter(|(_, r)| r["result"]["messages"][0]["content"]["text"] == "Use this context: once")
        .count();
    let replayed = replies
        .iter()
        .filter(|(_, r)| r["error"]["data"]["reason"] == "replayed")
        .count();
    assert_eq!((done, replayed), (1, 3), "{replies:?}");
}

/// MCP-81: a resource read whose upstream asks for input is relayed as a prompt's is, its state
/// bound to the read (a prompt's state does not continue it), used once.
#[tokio::test]
async fn mcp_81_a_resources_input_requests_are_relayed() {
    let Some((_up, _dir, url)) = gateway().await else {
        return;
    };
    let read = |token, extra: Value| {
        let mut params = json!({"uri": "up://confirmed"});
        params
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let url = url.clone();
        async move {
            let params = params.clone();
            modern_request(&url, token, "resources/read", params, every_capability()).await
        }
    };
    let (_, first) = read(CLAUDE, json!({})).await;
    let asked = &first["result"];
    assert_eq!(asked["resultType"], "input_required", "{first}");
    assert_eq!(
        asked["inputRequests"]["confirm"]["method"],
        "elicitation/create"
    );
    let retry = json!({
        "inputResponses": {"confirm": accept(json!({"ok": true}))},
        "requestState": asked["requestState"],
    });
    let (_, done) = read(CLAUDE, retry.clone()).await;
    assert_eq!(done["result"]["contents"][0]["text"], "confirmed", "{done}");
    let (_, replayed) = read(CLAUDE, retry).await;
    assert_eq!(reason(&replayed), "replayed", "{replayed}");

    let (_, prompt) = get_prompt(&url, CLAUDE, json!({}), every_capability()).await;
    let crossed = json!({
        "inputResponses": {"confirm": accept(json!({"ok": true}))},
        "requestState": prompt["result"]["requestState"],
    });
    let (_, crossed) = read(CLAUDE, crossed).await;
    assert_eq!(reason(&crossed), "other_tool", "{crossed}");
}
