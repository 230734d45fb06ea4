//! Calls without a handshake (docs/rules.md MCP-27, MCP-28), counted at a loopback upstream.

use std::time::Duration;

use airlock_egress::Delivery;
use airlock_mcp::{CallErrorKind, McpClient, McpTarget, ToolCall};
use airlock_spec::McpProtocol;
use serde_json::json;

use airlock_testkit::{Script, Server};

use crate::calls::{SHORT_SESSION, client, client_with};

async fn echo(client: &McpClient, target: &McpTarget, n: u32) -> airlock_mcp::ToolResult {
    client
        .call_tool(target, &ToolCall::new("echo", json!({ "n": n })))
        .await
        .unwrap()
}

/// MCP-27: once a 2026-07-28 upstream was seen (its `server/discover`), each call is one
/// `tools/call` carrying the client's context, and the answer is read as before.
#[tokio::test]
async fn a_2026_07_28_upstream_gets_one_request_per_call() {
    let server = Server::start(Script {
        modern: true,
        ..Script::default()
    })
    .await;
    let client = client();
    let target = McpTarget::new(server.url()).with_protocol(McpProtocol::Rev20260728);
    echo(&client, &target, 1).await;
    assert_eq!(server.methods(), ["server/discover", "tools/call"]);
    let call = ToolCall::new("echo", json!({"n": 2})).with_idempotency_key("k-2");
    let out = client.call_tool(&target, &call).await.unwrap();
    assert_eq!(out.structured, Some(json!({"received": {"n": 2}})));
    assert_eq!(
        server.methods(),
        ["server/discover", "tools/call", "tools/call"]
    );
    let seen = &server.seen()[2];
    assert_eq!(seen.headers["mcp-protocol-version"], "2026-07-28");
    let meta = &seen.body["params"]["_meta"];
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientInfo"]["name"],
        "airlock"
    );
    assert!(meta["io.modelcontextprotocol/clientCapabilities"].is_object());
    assert_eq!(meta["airlock/idempotency_key"], "k-2");
    assert_eq!(seen.body["params"]["arguments"], json!({"n": 2}));
}

/// MCP-28: a connection file's session-less server is called with `tools/call` alone once a
/// handshake succeeded, stating the revision that handshake settled on.
#[tokio::test]
async fn a_kept_handshake_makes_later_calls_one_request() {
    for sse in [false, true] {
        let server = Server::start(Script {
            sse,
            ..Script::default()
        })
        .await;
        let client = client();
        let target = McpTarget::new(server.url()).keeping_handshake();
        echo(&client, &target, 1).await;
        assert_eq!(server.methods(), SHORT_SESSION);
        let out = echo(&client, &target, 2).await;
        assert_eq!(
            out.structured,
            Some(json!({"received": {"n": 2}})),
            "sse {sse}"
        );
        echo(&client, &target, 3).await;
        let later = &server.methods()[3..];
        assert_eq!(later, ["tools/call", "tools/call"], "sse {sse}");
        let seen = server.seen();
        let version = seen[0].body["params"]["protocolVersion"].as_str().unwrap();
        assert_eq!(seen[3].headers["mcp-protocol-version"], version);
    }
}

/// MCP-17 still holds where MCP-28 does not apply: a server that issues sessions, or a target
/// that may not keep a handshake (a tenant's inline tool), gets a short session every call.
#[tokio::test]
async fn sessions_and_unkept_targets_shake_hands_every_call() {
    let stateful = Server::start(Script {
        session_id: Some("s-1".to_owned()),
        ..Script::default()
    })
    .await;
    let plain = Server::start(Script::default()).await;
    let client = client();
    let kept = McpTarget::new(stateful.url()).keeping_handshake();
    let unkept = McpTarget::new(plain.url());
    for n in 0..2 {
        echo(&client, &kept, n).await;
        echo(&client, &unkept, n).await;
    }
    assert_eq!(stateful.methods(), [SHORT_SESSION, SHORT_SESSION].concat());
    assert_eq!(plain.methods(), [SHORT_SESSION, SHORT_SESSION].concat());
}

/// MCP-23 on a handshake-free call: the `tools/call` is the first request, so a deadline that
/// passes while the server holds it leaves the outcome unknown, and a JSON-RPC error is an
/// answer.
#[tokio::test]
async fn a_handshake_free_call_says_how_far_it_got() {
    let server = Server::start(Script::default()).await;
    let client = client_with(Duration::from_millis(400), 5 * 1024 * 1024);
    let target = McpTarget::new(server.url()).keeping_handshake();
    echo(&client, &target, 1).await;
    let silent = client
        .call_tool(&target, &ToolCall::new("silent", json!({})))
        .await
        .unwrap_err();
    assert_eq!(silent.kind, CallErrorKind::Timeout, "{silent:?}");
    assert_eq!(silent.delivery, Delivery::Unanswered);
    let rejected = client
        .call_tool(&target, &ToolCall::new("reject", json!({})))
        .await
        .unwrap_err();
    assert_eq!(rejected.kind, CallErrorKind::JsonRpc, "{rejected:?}");
    assert_eq!(rejected.delivery, Delivery::Answered);
    assert_eq!(
        &server.methods()[3..],
        ["tools/call", "tools/call"],
        "both calls went without a handshake"
    );
}
