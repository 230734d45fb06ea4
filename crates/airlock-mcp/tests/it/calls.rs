//! Short sessions and discovery, end to end over real HTTP on 127.0.0.1.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use airlock_egress::{EgressPolicy, GuardedClient, StaticResolver};
use airlock_mcp::{CallErrorKind, McpClient, McpCredential, McpTarget, ToolCall};
use serde_json::json;

use airlock_testkit::{Script, Server};

pub(crate) fn client_with(deadline: Duration, cap: u64) -> McpClient {
    let policy = EgressPolicy {
        allow_cidrs: vec!["127.0.0.1/32".parse().unwrap()],
        deadline,
        max_body_bytes: cap,
        ..EgressPolicy::default()
    };
    let resolver = StaticResolver::new()
        .with("mcp.upstream.io", [IpAddr::from([127, 0, 0, 1])])
        .with("internal.upstream.io", [IpAddr::from([10, 0, 0, 5])]);
    let guard = GuardedClient::builder(policy)
        .resolver(Arc::new(resolver))
        .build()
        .unwrap();
    McpClient::new(guard)
}

pub(crate) fn client() -> McpClient {
    client_with(Duration::from_secs(30), 5 * 1024 * 1024)
}

async fn call(
    script: Script,
    tool: &str,
) -> (
    Server,
    Result<airlock_mcp::ToolResult, airlock_mcp::McpCallError>,
) {
    let server = Server::start(script).await;
    let target = McpTarget::new(server.url());
    let out = client()
        .call_tool(&target, &ToolCall::new(tool, json!({"numero": "42"})))
        .await;
    (server, out)
}

pub(crate) const SHORT_SESSION: [&str; 3] =
    ["initialize", "notifications/initialized", "tools/call"];

#[tokio::test]
async fn a_call_is_a_short_session_with_name_and_arguments_as_given_json() {
    let (server, out) = call(Script::default(), "echo").await;
    let out = out.unwrap();
    assert_eq!(server.methods(), SHORT_SESSION);
    let seen = server.seen();
    assert_eq!(seen[2].body["params"]["name"], "echo");
    assert_eq!(seen[2].body["params"]["arguments"], json!({"numero": "42"}));
    assert_eq!(out.structured, Some(json!({"received": {"numero": "42"}})));
    assert_eq!(out.text, r#"{"numero":"42"}"#);
    // Host carries the name, not the pinned address.
    assert_eq!(
        seen[0].headers["host"],
        format!("mcp.upstream.io:{}", server.port).as_str()
    );
}

#[tokio::test]
async fn calls_to_one_upstream_reuse_one_connection() {
    let server = Server::start(Script::default()).await;
    let target = McpTarget::new(server.url());
    let client = client();
    for _ in 0..3 {
        client
            .call_tool(&target, &ToolCall::new("echo", json!({})))
            .await
            .unwrap();
    }
    let seen = server.seen();
    assert_eq!(seen.len(), 9);
    assert!(
        seen.iter().all(|s| s.peer == seen[0].peer),
        "every request of three sessions on the first connection: {:?}",
        seen.iter().map(|s| s.peer).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn sse_replies_work_the_same() {
    let script = Script {
        sse: true,
        ..Script::default()
    };
    let (server, out) = call(script, "echo").await;
    assert_eq!(
        out.unwrap().structured,
        Some(json!({"received": {"numero": "42"}}))
    );
    assert_eq!(server.methods(), SHORT_SESSION);
}

#[tokio::test]
async fn bearer_and_header_auth_arrive_on_every_request() {
    let server = Server::start(Script::default()).await;
    let bearer = McpTarget::new(server.url())
        .with_credential(McpCredential::Bearer("tok-1".to_owned().into()));
    client()
        .call_tool(&bearer, &ToolCall::new("echo", json!({})))
        .await
        .unwrap();
    for seen in server.seen() {
        assert_eq!(seen.headers["authorization"], "Bearer tok-1");
    }

    let server = Server::start(Script::default()).await;
    let header = McpTarget::new(server.url()).with_credential(McpCredential::Header {
        name: "X-Api-Key".into(),
        value: "key-2".to_owned().into(),
    });
    client()
        .call_tool(&header, &ToolCall::new("echo", json!({})))
        .await
        .unwrap();
    for seen in server.seen() {
        assert_eq!(seen.headers["x-api-key"], "key-2");
        assert!(seen.headers.get("authorization").is_none());
    }
}

#[tokio::test]
async fn the_idempotency_key_travels_in_meta() {
    let server = Server::start(Script::default()).await;
    let call = ToolCall::new("echo", json!({})).with_idempotency_key("inv-7");
    client()
        .call_tool(&McpTarget::new(server.url()), &call)
        .await
        .unwrap();
    let seen = server.seen();
    assert_eq!(
        seen[2].body["params"]["_meta"]["airlock/idempotency_key"],
        "inv-7"
    );
}

#[tokio::test]
async fn is_error_is_a_tool_error_with_its_text() {
    let (_, out) = call(Script::default(), "fail").await;
    let err = out.unwrap_err();
    assert_eq!(err.kind, CallErrorKind::ToolError);
    assert_eq!(err.message, "ticket 42 does not exist");
}

#[tokio::test]
async fn a_jsonrpc_error_is_its_message() {
    let (_, out) = call(Script::default(), "reject").await;
    let err = out.unwrap_err();
    assert_eq!(err.kind, CallErrorKind::JsonRpc);
    assert_eq!(err.message, "unknown ticket number");
}

#[tokio::test]
async fn a_jsonrpc_error_wins_over_a_swallowed_redirect() {
    let script = Script {
        notification_status: Some(302),
        ..Script::default()
    };
    let (server, out) = call(script, "reject").await;
    let err = out.unwrap_err();
    assert_eq!(err.kind, CallErrorKind::JsonRpc, "{err:?}");
    assert_eq!(err.message, "unknown ticket number");
    assert_eq!(server.methods(), SHORT_SESSION);
}

#[tokio::test]
async fn a_redirect_is_reported_and_not_followed() {
    let script = Script {
        status: Some(302),
        ..Script::default()
    };
    let (server, out) = call(script, "echo").await;
    let err = out.unwrap_err();
    assert_eq!(err.kind, CallErrorKind::Redirect);
    assert!(err.message.contains("the MCP server answered 302"), "{err}");
    // One request, to the upstream; the internal Location was never requested.
    assert_eq!(server.methods(), ["initialize"]);
}

#[tokio::test]
async fn a_same_host_redirect_is_not_followed_either() {
    let script = Script {
        status: Some(307),
        location: Some("/elsewhere/mcp".into()),
        ..Script::default()
    };
    let (server, out) = call(script, "echo").await;
    let err = out.unwrap_err();
    assert_eq!(err.kind, CallErrorKind::Redirect);
    assert!(err.message.contains("the MCP server answered 307"), "{err}");
    // The same host's other path was never requested.
    let paths: Vec<_> = server.seen().into_iter().map(|s| s.path).collect();
    assert_eq!(paths, ["/mcp"]);
}

#[tokio::test]
async fn http_statuses_name_the_status_and_no_address() {
    for status in [401, 500] {
        let script = Script {
            status: Some(status),
            ..Script::default()
        };
        let (_, out) = call(script, "echo").await;
        let err = out.unwrap_err();
        assert_eq!(err.kind, CallErrorKind::HttpStatus);
        assert_eq!(err.message, format!("the MCP server answered {status}"));
        assert!(!err.message.contains("127.0.0.1"));
    }
}

#[tokio::test]
async fn a_silent_server_times_out_with_the_configured_deadline() {
    let server = Server::start(Script::default()).await;
    let out = client_with(Duration::from_millis(300), 64 * 1024)
        .call_tool(
            &McpTarget::new(server.url()),
            &ToolCall::new("silent", json!({})),
        )
        .await;
    let err = out.unwrap_err();
    assert_eq!(err.kind, CallErrorKind::Timeout);
    assert_eq!(err.message, "no answer in 300 ms");
}

#[tokio::test]
async fn one_deadline_covers_the_whole_session() {
    // Each answer takes 0.6 s: either step alone fits in 1 s, both do not.
    let script = Script {
        delay: Some(Duration::from_millis(600)),
        ..Script::default()
    };
    let server = Server::start(script).await;
    let out = client_with(Duration::from_secs(1), 64 * 1024)
        .call_tool(
            &McpTarget::new(server.url()),
            &ToolCall::new("echo", json!({})),
        )
        .await;
    let err = out.unwrap_err();
    assert_eq!(err.kind, CallErrorKind::Timeout);
    assert_eq!(err.message, "no answer in 1 s");
}

/// The cap bounds each reply, as for every guarded response: a session whose replies are each
/// under it passes, though together they are over it.
#[tokio::test]
async fn the_cap_applies_to_each_reply_not_to_the_session() {
    let script = Script {
        instructions_bytes: 40 * 1024,
        ..Script::default()
    };
    let server = Server::start(script).await;
    let text = "a".repeat(15 * 1024);
    // The echo reply carries the arguments twice (text and structured): ~30 KiB.
    let out = client_with(Duration::from_secs(30), 64 * 1024)
        .call_tool(
            &McpTarget::new(server.url()),
            &ToolCall::new("echo", json!({ "text": text })),
        )
        .await
        .unwrap();
    assert_eq!(out.structured, Some(json!({"received": {"text": text}})));
    // One reply over the cap still fails the call.
    let out = client_with(Duration::from_secs(30), 32 * 1024)
        .call_tool(
            &McpTarget::new(server.url()),
            &ToolCall::new("echo", json!({})),
        )
        .await;
    assert_eq!(out.unwrap_err().kind, CallErrorKind::TooLarge);
}

/// Each reply is capped on its own, and a session's replies together at four caps: a server
/// whose tool list never ends fails discovery instead of filling memory until the deadline.
#[tokio::test]
async fn a_tool_list_that_never_ends_fails_discovery() {
    let script = Script {
        endless_pages: true,
        ..Script::default()
    };
    let server = Server::start(script).await;
    let err = client_with(Duration::from_secs(30), 64 * 1024)
        .discover(&McpTarget::new(server.url()))
        .await
        .unwrap_err();
    assert_eq!(err.kind, CallErrorKind::TooLarge, "{err:?}");
    assert!(err.message.contains("in one session"), "{err}");
    // About 256 KiB of ~1 KiB pages: bounded, far short of the deadline.
    let pages = server
        .methods()
        .iter()
        .filter(|m| *m == "tools/list")
        .count();
    assert!((200..300).contains(&pages), "{pages} pages");
}

#[tokio::test]
async fn an_sse_reply_over_the_cap_is_refused() {
    let script = Script {
        sse: true,
        ..Script::default()
    };
    let server = Server::start(script).await;
    let out = client_with(Duration::from_secs(30), 64 * 1024)
        .call_tool(
            &McpTarget::new(server.url()),
            &ToolCall::new("huge", json!({})),
        )
        .await;
    let err = out.unwrap_err();
    assert_eq!(err.kind, CallErrorKind::TooLarge, "{err:?}");
    assert!(err.message.contains("65536"), "{err}");
}

#[tokio::test]
async fn a_private_destination_is_blocked_with_no_request() {
    let server = Server::start(Script::default()).await;
    let target = McpTarget::new(format!("http://internal.upstream.io:{}/mcp", server.port));
    let err = client()
        .call_tool(&target, &ToolCall::new("echo", json!({})))
        .await
        .unwrap_err();
    assert_eq!(err.kind, CallErrorKind::Blocked);
    // EGRESS-39: the name, never what it resolved to.
    assert!(err.message.contains("internal.upstream.io"), "{err}");
    assert!(!err.message.contains("10.0.0.5"), "{err}");
    assert!(server.methods().is_empty());
}

#[tokio::test]
async fn structured_content_is_kept_and_images_become_placeholders() {
    let (_, out) = call(Script::default(), "chart").await;
    let out = out.unwrap();
    assert_eq!(out.text, "the chart:\n[image: image/png, 927 bytes]");
    assert_eq!(out.structured, None);
}

#[tokio::test]
async fn discovery_lists_every_page_and_defaults_the_schema() {
    for sse in [false, true] {
        let server = Server::start(Script {
            sse,
            ..Script::default()
        })
        .await;
        let tools = client()
            .discover(&McpTarget::new(server.url()))
            .await
            .unwrap();
        let names: Vec<_> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["search", "create_note"]);
        assert_eq!(tools[0].description, "Search the CRM.");
        assert_eq!(tools[1].description, "");
        assert_eq!(tools[1].input_schema, json!({"type": "object"}));
        assert_eq!(
            server.methods(),
            [
                "initialize",
                "notifications/initialized",
                "tools/list",
                "tools/list"
            ]
        );
    }
}

#[tokio::test]
async fn discovery_failures_are_call_errors() {
    let server = Server::start(Script {
        status: Some(401),
        ..Script::default()
    })
    .await;
    let err = client()
        .discover(&McpTarget::new(server.url()))
        .await
        .unwrap_err();
    assert_eq!(err.message, "the MCP server answered 401");
}

#[tokio::test]
async fn a_declared_credential_that_is_missing_sends_nothing() {
    let err = McpCredential::from_spec(&airlock_spec::McpAuth::Bearer, None).unwrap_err();
    assert_eq!(err.kind, CallErrorKind::Config);
}

#[tokio::test]
async fn non_object_arguments_are_refused_before_any_request() {
    let server = Server::start(Script::default()).await;
    let err = client()
        .call_tool(
            &McpTarget::new(server.url()),
            &ToolCall::new("echo", json!([1])),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind, CallErrorKind::Config);
    assert!(server.methods().is_empty());
}

#[tokio::test]
async fn a_compressed_reply_is_refused() {
    let script = Script {
        gzip: true,
        ..Script::default()
    };
    let (_, out) = call(script, "echo").await;
    let err = out.unwrap_err();
    assert_eq!(err.kind, CallErrorKind::BadReply, "{err:?}");
    assert!(err.message.contains("identity"), "{err}");
}

#[tokio::test]
async fn auto_probes_once_and_remembers_a_legacy_upstream() {
    let server = Server::start(Script::default()).await;
    let client = client();
    let target = McpTarget::new(server.url()).with_protocol(airlock_spec::McpProtocol::Auto);
    assert_eq!(client.remembered_protocol(&server.url()), None);
    client
        .call_tool(&target, &ToolCall::new("echo", json!({})))
        .await
        .unwrap();
    assert_eq!(
        client.remembered_protocol(&server.url()),
        Some(airlock_spec::McpProtocol::Legacy)
    );
    let first = server.methods();
    assert_eq!(first[0], "server/discover");
    assert_eq!(first[1..], SHORT_SESSION);
    client
        .call_tool(&target, &ToolCall::new("echo", json!({})))
        .await
        .unwrap();
    // The second session goes straight to initialize.
    assert_eq!(server.methods()[first.len()..], SHORT_SESSION);
}

#[tokio::test]
async fn a_legacy_upstream_asked_for_2026_07_28_is_a_protocol_error() {
    let server = Server::start(Script::default()).await;
    let target = McpTarget::new(server.url()).with_protocol(airlock_spec::McpProtocol::Rev20260728);
    let err = client()
        .call_tool(&target, &ToolCall::new("echo", json!({})))
        .await
        .unwrap_err();
    assert_eq!(err.kind, CallErrorKind::Protocol, "{err:?}");
    assert!(err.message.contains("2026-07-28"), "{err}");
}

/// MCP-23: how far the call got. A connection that breaks after `tools/call` was written, or
/// a deadline passing while the server holds it, leaves the call's outcome unknown
/// (`Unanswered`); a break during the handshake, or a refused connection, sent nothing of the
/// call (`NotSent`).
#[tokio::test]
async fn a_break_after_the_call_was_sent_is_unanswered_and_before_it_is_not() {
    use airlock_egress::Delivery;
    use airlock_testkit::{Cue, RawServer};
    let cases = [
        (
            "tools/call",
            Cue::Hangup,
            CallErrorKind::ConnectionLost,
            Delivery::Unanswered,
        ),
        (
            "tools/call",
            Cue::Hold,
            CallErrorKind::Timeout,
            Delivery::Unanswered,
        ),
        (
            "initialize",
            Cue::Hangup,
            CallErrorKind::ConnectionLost,
            Delivery::NotSent,
        ),
        (
            "initialize",
            Cue::Hold,
            CallErrorKind::Timeout,
            Delivery::NotSent,
        ),
    ];
    for (on, cue, kind, delivery) in cases {
        let server = RawServer::start(Some(on), cue).await;
        let target = McpTarget::new(format!("http://mcp.upstream.io:{}/mcp", server.port));
        let err = client_with(Duration::from_millis(500), 1024 * 1024)
            .call_tool(&target, &ToolCall::new("echo", json!({})))
            .await
            .unwrap_err();
        assert_eq!(
            (err.kind, err.delivery),
            (kind, delivery),
            "{on} {cue:?}: {err}"
        );
        assert_eq!(server.seen().last().map(String::as_str), Some(on));
    }
    let refused = RawServer::refusing_port().await;
    let target = McpTarget::new(format!("http://mcp.upstream.io:{refused}/mcp"));
    let err = client()
        .call_tool(&target, &ToolCall::new("echo", json!({})))
        .await
        .unwrap_err();
    assert_eq!(
        (err.kind, err.delivery),
        (CallErrorKind::Unreachable, Delivery::NotSent),
        "{err}"
    );
    // The server's own answers are answers, whatever they say.
    let (_, out) = call(Script::default(), "fail").await;
    assert_eq!(out.unwrap_err().delivery, Delivery::Answered);
    let (_, out) = call(Script::default(), "reject").await;
    assert_eq!(out.unwrap_err().delivery, Delivery::Answered);
}
