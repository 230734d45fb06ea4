//! Every endpoint rule, on the wire: literal requests, asserted replies.

use std::time::Duration;

use airlock_spec::ScopeId;
use secrecy::SecretString;
use serde_json::{Value, json};

use super::{Asked, Endpoint, TOKEN};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
const TOOLS_LIST: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
const V2025: &str = "MCP-Protocol-Version: 2025-06-18";

fn call(name: &str, arguments: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"{name}","arguments":{arguments}}}}}"#
    )
}

async fn call_result(server: &Endpoint, name: &str, arguments: &str) -> Value {
    let reply = server.post("/mcp", &[V2025], &call(name, arguments)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    reply.json()["result"].clone()
}

#[tokio::test]
async fn no_tokens_configured_refuses_everything() {
    let server = Endpoint::start_with(vec![], vec![]).await;
    let reply = server.post("/mcp", &[], INITIALIZE).await;
    assert_eq!(reply.status, 401);
    assert!(
        reply
            .header("www-authenticate")
            .unwrap()
            .starts_with("Bearer")
    );
}

#[tokio::test]
async fn missing_or_wrong_token_is_401_with_a_bearer_challenge() {
    let server = Endpoint::start().await;
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json",
        server.port
    );
    let reply = server.raw(&head, INITIALIZE).await;
    assert_eq!(reply.status, 401);
    assert_eq!(
        reply.header("www-authenticate"),
        Some(r#"Bearer realm="airlock""#)
    );

    let wrong = format!("{head}\r\nAuthorization: Bearer {TOKEN}x");
    let reply = server.raw(&wrong, INITIALIZE).await;
    assert_eq!(reply.status, 401);
    assert!(
        reply
            .header("www-authenticate")
            .unwrap()
            .contains("invalid_token")
    );
    assert!(server.asked().is_empty());
}

/// MCP-24: a client that shows only the body still tells its user which header is expected;
/// the presented token is never repeated.
#[tokio::test]
async fn a_401_names_the_expected_header_in_a_json_rpc_body() {
    let server = Endpoint::start().await;
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json",
        server.port
    );
    let cases = [
        (
            "",
            r#"Bearer realm="airlock""#,
            "send the header `Authorization: Bearer <token>`",
        ),
        (
            "\r\nAuthorization: Basic czNjcmV0",
            r#"Bearer realm="airlock""#,
            "must be `Bearer <token>`",
        ),
        (
            "\r\nAuthorization: Bearer wr0ng-t0ken",
            r#"Bearer realm="airlock", error="invalid_token""#,
            "not one of [[mcp.tokens]]",
        ),
    ];
    for (authorization, challenge, says) in cases {
        let reply = server
            .raw(&format!("{head}{authorization}"), INITIALIZE)
            .await;
        assert_eq!(reply.status, 401, "{authorization}");
        assert_eq!(reply.header("www-authenticate"), Some(challenge));
        assert_eq!(reply.header("content-type"), Some("application/json"));
        let body = reply.json();
        assert_eq!(body["jsonrpc"], "2.0");
        assert_eq!(body["id"], Value::Null);
        assert_eq!(body["error"]["code"], -32001);
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("Unauthorized: ") && message.contains(says),
            "{message}"
        );
        assert!(message.contains("[[mcp.tokens]]"), "{message}");
        assert!(!reply.body.contains("wr0ng") && !reply.body.contains("czNjcmV0"));
    }
    assert!(server.asked().is_empty());
}

/// MCP-26: a client that answers the 401 with OAuth discovery learns there is none (404) and
/// which header to send instead.
#[tokio::test]
async fn oauth_discovery_is_a_404_naming_the_header_to_send() {
    let server = Endpoint::start().await;
    let paths = [
        ("GET", "/.well-known/oauth-protected-resource/mcp"),
        ("GET", "/.well-known/oauth-protected-resource"),
        ("GET", "/.well-known/oauth-authorization-server"),
        ("GET", "/.well-known/openid-configuration"),
        ("POST", "/register"),
    ];
    for (method, path) in paths {
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}",
            server.port
        );
        let reply = server.raw(&head, "{}").await;
        assert_eq!(reply.status, 404, "{path}");
        assert_eq!(reply.header("content-type"), Some("application/json"));
        let description = reply.json()["error_description"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            description.contains("does not use OAuth")
                && description.contains("`Authorization: Bearer <token>`"),
            "{path}: {description}"
        );
    }
}

#[tokio::test]
async fn each_token_names_its_principal() {
    let tokens = vec![
        (SecretString::from("tok-a"), "alice".to_owned()),
        (SecretString::from("tok-b"), "bob".to_owned()),
    ];
    let server = Endpoint::start_with(tokens, vec![]).await;
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: localhost:{}\r\nAuthorization: Bearer tok-b\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\n{V2025}",
        server.port
    );
    let reply = server.raw(&head, &call("echo", "{}")).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let Asked::Call { principal, .. } = &server.asked()[0] else {
        panic!()
    };
    assert_eq!(principal, "bob");
}

#[tokio::test]
async fn get_and_delete_are_405() {
    let server = Endpoint::start().await;
    for method in ["GET", "DELETE"] {
        let head = format!(
            "{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nAccept: text/event-stream"
        );
        let reply = server.raw(&head, "").await;
        assert_eq!(reply.status, 405, "{method}");
        assert_eq!(reply.header("allow"), Some("POST"));
    }
}

#[tokio::test]
async fn bad_json_is_400_with_a_parse_error() {
    let server = Endpoint::start().await;
    let reply = server
        .post("/mcp", &[], r#"{"jsonrpc":"2.0","id":1,"method":"#)
        .await;
    assert_eq!(reply.status, 400);
    assert_eq!(
        reply.json(),
        json!({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the body is not JSON"}})
    );
    let reply = server.post("/mcp", &[], r#"{"hello":"world"}"#).await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.json()["error"]["code"], -32600);
}

#[tokio::test]
async fn unknown_method_is_32601() {
    let server = Endpoint::start().await;
    let body = r#"{"jsonrpc":"2.0","id":7,"method":"resources/frobnicate","params":{}}"#;
    let reply = server.post("/mcp", &[V2025], body).await;
    let reply = reply.json();
    assert_eq!(reply["id"], 7);
    assert_eq!(reply["error"]["code"], -32601, "{reply}");
}

#[tokio::test]
async fn unknown_tool_is_32602() {
    let server = Endpoint::start().await;
    let reply = server
        .post("/mcp", &[V2025], &call("nope", "{}"))
        .await
        .json();
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    assert!(reply["error"]["message"].as_str().unwrap().contains("nope"));
}

#[tokio::test]
async fn foreign_host_or_origin_is_403() {
    let server = Endpoint::start().await;
    let head = |host: &str, origin: Option<&str>| {
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json"
        );
        if let Some(origin) = origin {
            head.push_str(&format!("\r\nOrigin: {origin}"));
        }
        head
    };
    let reply = server.raw(&head("evil.example:80", None), INITIALIZE).await;
    assert_eq!(reply.status, 403);
    // MCP-24: the refusal is also a JSON-RPC error naming the setting that would allow it.
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(reply.json()["error"]["code"], -32003);
    let message = reply.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains("Host") && message.contains("allowed_hosts"),
        "{message}"
    );
    let reply = server
        .raw(&head("localhost", Some("http://evil.example")), INITIALIZE)
        .await;
    assert_eq!(reply.status, 403);
    let reply = server
        .raw(
            &head("localhost", Some("http://localhost:3000")),
            INITIALIZE,
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);

    let named = Endpoint::start_with(
        vec![(SecretString::from(TOKEN), "alice".into())],
        vec!["mcp.example.com".into()],
    )
    .await;
    let reply = named.raw(&head("mcp.example.com", None), INITIALIZE).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let reply = named.raw(&head("127.0.0.1", None), INITIALIZE).await;
    assert_eq!(reply.status, 403, "loopback is only the default");
}

#[tokio::test]
async fn initialize_then_initialized_keeps_no_session() {
    let server = Endpoint::start().await;
    let reply = server.post("/mcp", &[], INITIALIZE).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.header("mcp-session-id"), None);
    let result = &reply.json()["result"];
    assert_eq!(result["protocolVersion"], "2025-06-18");
    assert_eq!(
        result["capabilities"],
        json!({"tools": {}, "logging": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}})
    );
    assert_eq!(result["serverInfo"]["name"], "airlock");

    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let reply = server.post("/mcp", &[V2025], initialized).await;
    assert_eq!(reply.status, 202);

    let ping = r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#;
    let reply = server.post("/mcp", &[V2025], ping).await.json();
    assert_eq!(reply, json!({"jsonrpc":"2.0","id":9,"result":{}}));
}

#[tokio::test]
async fn tools_list_has_the_await_tool_and_airlocks_hints() {
    let server = Endpoint::start().await;
    let reply = server.post("/mcp", &[V2025], TOOLS_LIST).await.json();
    let tools = reply["result"]["tools"].as_array().unwrap().clone();
    let names: Vec<_> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["echo", "deploy", "airlock_await_decision"]);
    assert_eq!(
        tools[0]["annotations"],
        json!({"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true})
    );
    assert_eq!(tools[1]["annotations"]["destructiveHint"], true);
    assert_eq!(
        tools[2]["inputSchema"]["required"],
        json!(["invocation_id"])
    );

    let reply = server
        .post("/agents/ops/mcp", &[V2025], TOOLS_LIST)
        .await
        .json();
    let tools = reply["result"]["tools"].as_array().unwrap().clone();
    assert_eq!(tools[0]["description"], "echo for ops");
    assert_eq!(tools.len(), 2);
    let reply = server
        .post("/agents/nope/mcp", &[V2025], TOOLS_LIST)
        .await
        .json();
    assert_eq!(reply["error"]["code"], -32602);
}

#[tokio::test]
async fn completed_calls_carry_text_and_structured_content() {
    let server = Endpoint::start().await;
    let result = call_result(&server, "echo", r#"{"msg":"hi"}"#).await;
    assert_eq!(
        result,
        json!({
            "content": [{"type": "text", "text": r#"{"msg":"hi"}"#}],
            "structuredContent": {"echo": {"msg": "hi"}},
            "isError": false
        })
    );
    let reply = server
        .post("/agents/ops/mcp", &[V2025], &call("echo", "{}"))
        .await;
    assert_eq!(reply.status, 200);
    let asked = server.asked();
    assert_eq!(
        asked[1],
        Asked::Call {
            scope: ScopeId::Agent("ops".into()),
            principal: "alice".into(),
            name: "echo".into(),
            arguments: json!({}),
        }
    );
}

#[tokio::test]
async fn failures_are_is_error_never_success() {
    let server = Endpoint::start().await;
    let result = call_result(&server, "fail", "{}").await;
    assert_eq!(result["isError"], true);
    assert_eq!(result["content"][0]["text"], "upstream said 500");

    let result = call_result(&server, "wipe", "{}").await;
    assert_eq!(result["isError"], true);
    assert_eq!(
        result["structuredContent"],
        json!({"denied": "policy: never on Fridays"})
    );
    assert_eq!(
        result["content"][0]["text"],
        r#"{"denied":"policy: never on Fridays"}"#
    );

    let result = call_result(&server, "propose", "{}").await;
    assert_eq!(result["isError"], true);
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("proposals")
    );

    let reply = server
        .post("/mcp", &[V2025], &call("broken", "{}"))
        .await
        .json();
    assert_eq!(reply["error"]["code"], -32603);
    assert!(
        !reply.to_string().contains("hunter2"),
        "internals never leak"
    );
}

#[tokio::test]
async fn a_parked_call_says_it_did_not_run() {
    let server = Endpoint::start().await;
    let result = call_result(&server, "deploy", r#"{"env":"prod"}"#).await;
    let mut payload = result["structuredContent"].clone();
    let message = payload["message"].take();
    assert!(
        message.as_str().unwrap().starts_with(
            "NOT EXECUTED YET: this call is waiting for a person's approval; nothing has run. \
             This is not the tool's result. To get the result, call airlock_await_decision"
        ),
        "{message}"
    );
    payload.as_object_mut().unwrap().remove("message");
    assert_eq!(
        payload,
        json!({
            "status": "awaiting_approval",
            "invocation_id": "inv-1",
            "tool": "deploy",
            "expires_at": "2030-01-01T00:00:00Z",
            "await_with": {"tool": "airlock_await_decision", "arguments": {"invocation_id": "inv-1"}}
        })
    );
    assert_eq!(result["isError"], false);
    // The text is the same payload as JSON, so a client can parse it.
    let text = result["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap(),
        result["structuredContent"]
    );
}

#[tokio::test]
async fn await_tool_waits_at_most_25_seconds_and_maps_outcomes() {
    let server = Endpoint::start().await;
    let result = call_result(
        &server,
        "airlock_await_decision",
        r#"{"invocation_id":"inv-1"}"#,
    )
    .await;
    assert_eq!(result["isError"], false);
    assert_eq!(result["structuredContent"]["status"], "completed");
    assert_eq!(result["structuredContent"]["decided_by"], "bob");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap(),
        result["structuredContent"]
    );

    let args = r#"{"invocation_id":"inv-waiting","wait_seconds":0}"#;
    let result = call_result(&server, "airlock_await_decision", args).await;
    assert_eq!(result["structuredContent"]["status"], "awaiting_approval");
    assert_eq!(result["isError"], false);

    let args = r#"{"invocation_id":"inv-denied","wait_seconds":3600}"#;
    let result = call_result(&server, "airlock_await_decision", args).await;
    // Settled as `{status, decided_by, result}`, the reason also at the top level as
    // `{"denied": reason}`, text and structured content alike.
    let denied = json!({
        "status": "denied",
        "decided_by": null,
        "denied": "bob said no",
        "result": {"denied": "bob said no"}
    });
    assert_eq!(result["structuredContent"], denied);
    let text = result["content"][0]["text"].as_str().unwrap();
    assert_eq!(serde_json::from_str::<Value>(text).unwrap(), denied);
    assert_eq!(result["isError"], true);

    let result = call_result(
        &server,
        "airlock_await_decision",
        r#"{"invocation_id":"x9"}"#,
    )
    .await;
    assert_eq!(result["isError"], true);
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("x9")
    );

    let result = call_result(&server, "airlock_await_decision", "{}").await;
    assert_eq!(result["isError"], true);

    let waits: Vec<_> = server
        .asked()
        .into_iter()
        .filter_map(|a| match a {
            Asked::Await {
                wait, principal, ..
            } => Some((wait, principal)),
            Asked::Call { .. }
            | Asked::Withdraw { .. }
            | Asked::Decide { .. }
            | Asked::Round { .. } => None,
        })
        .collect();
    let secs = |s| (Duration::from_secs(s), "alice".to_owned());
    assert_eq!(waits, [secs(25), secs(0), secs(25), secs(25)]);
}

#[tokio::test]
async fn current_clients_discover_and_call_without_initialize() {
    let server = Endpoint::start().await;
    let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}"#;
    let discover =
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{{{meta}}}}}"#);
    let headers = [
        "MCP-Protocol-Version: 2026-07-28",
        "Mcp-Method: server/discover",
    ];
    let reply = server.post("/mcp", &headers, &discover).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let result = &reply.json()["result"];
    assert_eq!(result["resultType"], "complete");
    assert!(
        result["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2026-07-28"))
    );
    assert_eq!(result["capabilities"]["tools"], json!({}));

    let body = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"deploy","arguments":{{}},{meta}}}}}"#
    );
    let headers = [
        "MCP-Protocol-Version: 2026-07-28",
        "Mcp-Method: tools/call",
        "Mcp-Name: deploy",
    ];
    let reply = server.post("/mcp", &headers, &body).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let result = &reply.json()["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["structuredContent"]["status"], "awaiting_approval");

    // The per-request version is required: a 2026 request without its header is refused.
    let reply = server.post("/mcp", &[], &body).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
}

#[tokio::test]
async fn v2026_mcp_param_headers_must_match_the_arguments_they_mirror() {
    let server = Endpoint::start().await;
    let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}"#;
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{{"name":"echo","arguments":{{"msg":"Hello"}},{meta}}}}}"#
    );
    let send = |param: Option<&'static str>| {
        let body = body.clone();
        let server = &server;
        async move {
            let mut headers = vec![
                "MCP-Protocol-Version: 2026-07-28".to_owned(),
                "Mcp-Method: tools/call".to_owned(),
                "Mcp-Name: echo".to_owned(),
            ];
            if let Some(value) = param {
                headers.push(format!("Mcp-Param-Msg: {value}"));
            }
            let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
            server.post("/mcp", &headers, &body).await
        }
    };
    for ok in ["Hello", " Hello ", "=?base64?SGVsbG8=?="] {
        let reply = send(Some(ok)).await;
        assert_eq!(reply.status, 200, "{ok}: {}", reply.body);
        assert_eq!(reply.json()["result"]["isError"], false);
    }
    for bad in [
        None,
        Some("Goodbye"),
        Some("=?base64?SGVsbG8?="),
        Some("=?base64?SGVs!!!bG8=?="),
    ] {
        let reply = send(bad).await;
        assert_eq!(reply.status, 400, "{bad:?}: {}", reply.body);
        assert_eq!(reply.json()["error"]["code"], -32020, "{bad:?}");
    }
    let calls = server
        .asked()
        .iter()
        .filter(|a| matches!(a, Asked::Call { .. }))
        .count();
    assert_eq!(calls, 3, "a refused request never reaches the host");
}

/// A `tools/call` whose params do not fit the method — no `name`, a `name` that is not a
/// string, `arguments` that are not an object — is invalid params (-32602), on both protocol
/// revisions, and never reaches the host (docs/rules.md MCP-8).
#[tokio::test]
async fn tools_call_with_malformed_params_is_32602_on_both_revisions() {
    let server = Endpoint::start().await;
    let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}"#;
    let malformed = [
        r#""arguments":{}"#,
        r#""name":7,"arguments":{}"#,
        r#""name":"echo","arguments":"x""#,
        r#""name":"echo","arguments":[1]"#,
        r#""name":"echo","arguments":5"#,
    ];
    for params in malformed {
        let legacy =
            format!(r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{{params}}}}}"#);
        let reply = server.post("/mcp", &[V2025], &legacy).await;
        let body = reply.json();
        assert_eq!(
            body["error"]["code"], -32602,
            "legacy {params}: {}",
            reply.body
        );
        assert_eq!(body["id"], 9, "legacy {params}");

        let current = format!(
            r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{{params},{meta}}}}}"#
        );
        let headers = [
            "MCP-Protocol-Version: 2026-07-28",
            "Mcp-Method: tools/call",
            "Mcp-Name: echo",
        ];
        let reply = server.post("/mcp", &headers, &current).await;
        let body = reply.json();
        assert_eq!(
            body["error"]["code"], -32602,
            "2026-07-28 {params}: {}",
            reply.body
        );
        assert_eq!(body["id"], 9, "2026-07-28 {params}");
    }
    assert!(
        !server
            .asked()
            .iter()
            .any(|a| matches!(a, Asked::Call { .. })),
        "a malformed call never reaches the host"
    );
}

/// A plain session-era call is answered without rmcp's per-request service (MCP-85); its
/// answer is what rmcp sends for the same call. A progress token sends the call through rmcp
/// (the host relays nothing, so rmcp answers plain JSON too): both answers must be the same
/// bytes, for every kind of outcome and for a malformed call key.
#[tokio::test]
async fn a_plain_call_is_answered_as_rmcp_answers_the_same_call() {
    let server = Endpoint::start().await;
    let blocks = format!(r#"{{"content":{}}}"#, crate::sdk_upstream::every_block());
    let calls = [
        (
            "echo",
            r#"{"msg":"hi","n":[1,2.5,null,"\u00e9"]}"#.to_owned(),
            "",
        ),
        ("blocks", blocks, ""),
        ("fail", "{}".to_owned(), ""),
        ("deploy", r#"{"env":"prod"}"#.to_owned(), ""),
        ("ask", "{}".to_owned(), ""),
        ("wipe", "{}".to_owned(), ""),
        ("propose", "{}".to_owned(), ""),
        ("broken", "{}".to_owned(), ""),
        ("nope", "{}".to_owned(), ""),
        (
            "echo",
            "{}".to_owned(),
            r#","io.airlock/call_key":"not a key!""#,
        ),
    ];
    for (name, arguments, meta) in calls {
        let request = |extra: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":"r-7","method":"tools/call","params":{{"name":"{name}","arguments":{arguments},"_meta":{{"x":1{extra}{meta}}}}}}}"#
            )
        };
        let plain = server.post("/mcp", &[V2025], &request("")).await;
        let by_rmcp = server
            .post("/mcp", &[V2025], &request(r#","progressToken":"p""#))
            .await;
        assert_eq!(plain.status, by_rmcp.status, "{name}: {}", plain.body);
        assert_eq!(plain.header("content-type"), by_rmcp.header("content-type"));
        assert_eq!(plain.body, by_rmcp.body, "{name}");
    }
    // Both paths asked the host the same, once each per call (the bad key asks nothing).
    let asked = server.asked();
    assert_eq!(asked.len(), 18);
    for pair in asked.chunks(2) {
        assert_eq!(pair[0], pair[1]);
    }
}

/// A client that goes away loses the answer to a plain call, never the call (MCP-85, as on
/// rmcp's path): the host's call runs to its end after the connection is gone, so its row is
/// never left claimed with nobody running it.
#[tokio::test]
async fn a_plain_call_outlives_its_client() {
    use tokio::io::AsyncWriteExt;

    let server = Endpoint::start().await;
    let (tx, mut ended) = tokio::sync::oneshot::channel();
    *server.host.held.ended.lock().await = Some(tx);
    let body = call("held", "{}");
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {TOKEN}\r\n\
         Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
         {V2025}\r\nContent-Length: {}\r\n\r\n{body}",
        server.port,
        body.len()
    );
    let mut client = tokio::net::TcpStream::connect(("127.0.0.1", server.port))
        .await
        .unwrap();
    client.write_all(request.as_bytes()).await.unwrap();
    let started = server.host.held.started.notified();
    tokio::time::timeout(Duration::from_secs(10), started)
        .await
        .expect("the call reached the host");
    drop(client);
    // Time for the server to see the connection closed: a call tied to it is dropped then.
    let early = tokio::time::timeout(Duration::from_secs(1), &mut ended).await;
    assert!(early.is_err(), "the call ended with its client: {early:?}");
    server.host.held.release.notify_one();
    let end = tokio::time::timeout(Duration::from_secs(10), ended).await;
    assert_eq!(end.expect("the call ended").unwrap(), Ok(()));
}
