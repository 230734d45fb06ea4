//! Input requests on the wire (docs/rules.md MCP-46, MCP-48, MCP-49) in front of the scripted
//! host: what reaches the host on a confirmation, and an expired state refused before it does.

use std::time::Duration;

use airlock_mcp::{CallerDecision, RequestStateKey, RequestStates};
use serde_json::{Value, json};

use super::{Asked, Endpoint};

/// A 2026-07-28 `tools/call` declaring elicitation; the JSON-RPC reply.
async fn call(server: &Endpoint, params: Value) -> Value {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}
    });
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params});
    let headers = [
        "MCP-Protocol-Version: 2026-07-28",
        "Mcp-Method: tools/call",
        "Mcp-Name: deploy",
    ];
    server
        .post("/mcp", &headers, &body.to_string())
        .await
        .json()
}

fn confirmed(state: &Value) -> Value {
    json!({
        "name": "deploy",
        "arguments": {"env": "prod"},
        "inputResponses": {"airlock_person": {"action": "accept", "content": {"approve": true}}},
        "requestState": state,
    })
}

fn states(ttl: Duration) -> RequestStates {
    RequestStates::new(RequestStateKey::generate(), ttl)
}

#[tokio::test]
async fn a_confirmation_reaches_the_host_as_the_callers_approval_of_that_invocation() {
    let server = Endpoint::start_asking(states(Duration::from_secs(60))).await;
    let first = call(
        &server,
        json!({"name": "deploy", "arguments": {"env": "prod"}}),
    )
    .await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let done = call(&server, confirmed(&first["result"]["requestState"])).await;
    assert_eq!(done["result"]["content"][0]["text"], "deployed", "{done}");
    let decided: Vec<_> = server
        .asked()
        .into_iter()
        .filter_map(|a| match a {
            Asked::Decide { principal, used } => Some((principal, used)),
            _ => None,
        })
        .collect();
    assert_eq!(decided.len(), 1, "{decided:?}");
    let (principal, used) = &decided[0];
    assert_eq!(principal, "alice");
    assert_eq!(
        (used.invocation_id.as_str(), used.tool.as_str()),
        ("inv-1", "deploy")
    );
    assert_eq!(used.decision, CallerDecision::Approve);
    assert_eq!(used.state_id.len(), 48, "the nonce, hex: {}", used.state_id);
}

/// MCP-48: a state whose time ran out is refused as `expired`, and nothing is decided.
#[tokio::test]
async fn an_expired_state_is_refused_before_the_host_is_asked() {
    // A lifetime of zero: every state has expired by the time it comes back.
    let server = Endpoint::start_asking(states(Duration::ZERO)).await;
    let first = call(
        &server,
        json!({"name": "deploy", "arguments": {"env": "prod"}}),
    )
    .await;
    let late = call(&server, confirmed(&first["result"]["requestState"])).await;
    assert_eq!(late["error"]["code"], -32602, "{late}");
    assert_eq!(late["error"]["data"]["reason"], "expired", "{late}");
    let decided = server
        .asked()
        .into_iter()
        .any(|a| matches!(a, Asked::Decide { .. }));
    assert!(!decided, "an expired state decides nothing");
}

/// MCP-46: an endpoint without a request-state key sends no input request, and a presented
/// state is not one of its own.
#[tokio::test]
async fn without_a_key_nothing_is_asked_and_no_state_is_accepted() {
    let server = Endpoint::start().await;
    let first = call(
        &server,
        json!({"name": "deploy", "arguments": {"env": "prod"}}),
    )
    .await;
    assert_eq!(
        first["result"]["structuredContent"]["status"], "awaiting_approval",
        "{first}"
    );
    let forged = call(&server, confirmed(&json!("al1.AAAA"))).await;
    assert_eq!(forged["error"]["data"]["reason"], "tampered", "{forged}");
}

/// A 2026-07-28 `tools/call` of `ask` declaring elicitation, with `extra` params.
async fn ask(server: &Endpoint, extra: Value) -> Value {
    let mut params = json!({"name": "ask", "arguments": {}});
    if let Value::Object(extra) = extra {
        params.as_object_mut().unwrap().extend(extra);
    }
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}
    });
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params});
    let headers = [
        "MCP-Protocol-Version: 2026-07-28",
        "Mcp-Method: tools/call",
        "Mcp-Name: ask",
    ];
    server
        .post("/mcp", &headers, &body.to_string())
        .await
        .json()
}

fn rounds(server: &Endpoint) -> Vec<airlock_mcp::RoundCall> {
    let asked = server.asked().into_iter();
    asked
        .filter_map(|a| match a {
            Asked::Round { round, .. } => Some(round),
            _ => None,
        })
        .collect()
}

/// MCP-68, MCP-71: a round's input requests reach the client with airlock's sealed state,
/// never the upstream's; the retry reaches the host as the next round of that invocation.
#[tokio::test]
async fn mcp_71_a_relayed_round_is_sealed_and_continued() {
    let server = Endpoint::start_asking(states(Duration::from_secs(60))).await;
    let first = ask(&server, json!({})).await;
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    assert_eq!(result["inputRequests"]["q"]["method"], "elicitation/create");
    let state = result["requestState"].as_str().unwrap();
    assert!(
        !first.to_string().contains("upstream-secret-state"),
        "{first}"
    );
    let answer = json!({"q": {"action": "accept", "content": {}}});
    let extra = json!({"inputResponses": answer, "requestState": state});
    let done = ask(&server, extra).await;
    assert_eq!(done["result"]["content"][0]["text"], "answered", "{done}");
    let rounds = rounds(&server);
    assert_eq!(rounds.len(), 1, "{rounds:?}");
    assert_eq!(
        (rounds[0].previous.as_str(), rounds[0].tool.as_str()),
        ("inv-1", "ask")
    );
}

/// MCP-72: a relayed round's state past its time is refused as `expired`; no round runs.
#[tokio::test]
async fn mcp_72_an_expired_relayed_state_runs_no_round() {
    let server = Endpoint::start_asking(states(Duration::ZERO)).await;
    let first = ask(&server, json!({})).await;
    let state = first["result"]["requestState"].clone();
    let late = ask(
        &server,
        json!({"inputResponses": {}, "requestState": state}),
    )
    .await;
    assert_eq!(late["error"]["data"]["reason"], "expired", "{late}");
    assert!(rounds(&server).is_empty());
}
