//! MCP Tasks on the wire, both shapes: the 2026-07-28 extension (SEP-2663, opted into per
//! request) and the 2025-11-25 experimental one (`params.task`, `tasks/result`).

use serde_json::{Value, json};

use super::{Asked, Endpoint};
use airlock_spec::ScopeId;

const TASKS: &str = "io.modelcontextprotocol/tasks";

/// A 2026-07-28 request's `_meta`, declaring the tasks extension or not.
fn meta(tasks: bool) -> Value {
    let extensions = if tasks {
        json!({ TASKS: {} })
    } else {
        json!({})
    };
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": extensions},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}
    })
}

/// Sends a 2026-07-28 request and returns the JSON-RPC reply.
pub(super) async fn v2026(
    server: &Endpoint,
    method: &str,
    mut params: Value,
    tasks: bool,
) -> Value {
    params["_meta"] = meta(tasks);
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let method_header = format!("Mcp-Method: {method}");
    let mut headers = vec!["MCP-Protocol-Version: 2026-07-28".to_owned(), method_header];
    // `Mcp-Name` carries the tool's name, or a task method's task id.
    if let Some(name) = params["name"].as_str().or(params["taskId"].as_str()) {
        headers.push(format!("Mcp-Name: {name}"));
    }
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    let reply = server.post("/mcp", &headers, &body.to_string()).await;
    let json = reply.json();
    // rmcp answers a missing capability with HTTP 400 and the JSON-RPC error.
    assert!(
        reply.status == 200 || json["error"].is_object(),
        "{}",
        reply.body
    );
    json
}

/// Sends a 2025-11-25 request and returns the JSON-RPC reply.
async fn v2025(server: &Endpoint, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 8, "method": method, "params": params});
    let reply = server
        .post(
            "/mcp",
            &["MCP-Protocol-Version: 2025-11-25"],
            &body.to_string(),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.json()
}

#[tokio::test]
async fn v2026_a_parked_call_is_a_task_only_for_a_request_that_opts_in() {
    let server = Endpoint::start().await;
    let discover = v2026(&server, "server/discover", json!({}), false).await;
    assert_eq!(
        discover["result"]["capabilities"]["extensions"][TASKS],
        json!({})
    );

    let call = json!({"name": "deploy", "arguments": {}});
    let plain = v2026(&server, "tools/call", call.clone(), false).await;
    assert_eq!(plain["result"]["resultType"], "complete");
    assert_eq!(
        plain["result"]["structuredContent"]["status"],
        "awaiting_approval"
    );

    let task = v2026(&server, "tools/call", call, true).await["result"].clone();
    assert_eq!(task["resultType"], "task", "{task}");
    assert_eq!(task["taskId"], "inv-1");
    assert_eq!(task["status"], "working");
    assert!(
        task["statusMessage"].as_str().unwrap().contains("approval"),
        "{task}"
    );
    assert_eq!(task["createdAt"], "2026-11-30T10:00:00Z");
    assert_eq!(
        task["ttlMs"],
        Value::Null,
        "kept as long as the row: {task}"
    );
    assert!(task["pollIntervalMs"].as_u64().unwrap() > 0);
    assert!(task.get("task").is_none() && task.get("result").is_none());

    // A call that completes at once is a plain result even when tasks are declared.
    let echo = json!({"name": "echo", "arguments": {}});
    let done = v2026(&server, "tools/call", echo, true).await;
    assert_eq!(done["result"]["resultType"], "complete");
}

#[tokio::test]
async fn v2026_tasks_get_inlines_the_result_and_denials_are_completed_errors() {
    let server = Endpoint::start().await;
    let get = |id: &str| json!({ "taskId": id });
    let done = v2026(&server, "tasks/get", get("inv-1"), true).await["result"].clone();
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["isError"], false);
    // The call's own result, exactly as `tools/call` would have returned it.
    assert_eq!(
        done["result"]["structuredContent"],
        json!({"deployed": "prod"})
    );
    assert!(done["result"].get("_meta").is_none(), "{done}");

    let waiting = v2026(&server, "tasks/get", get("inv-waiting"), true).await["result"].clone();
    assert_eq!(waiting["status"], "working");
    assert!(waiting.get("result").is_none(), "{waiting}");

    let denied = v2026(&server, "tasks/get", get("inv-denied"), true).await["result"].clone();
    assert_eq!(denied["status"], "completed");
    assert_eq!(denied["result"]["isError"], true);
    assert_eq!(
        denied["result"]["structuredContent"],
        json!({"denied": "bob said no"})
    );

    let gone = v2026(&server, "tasks/get", get("inv-withdrawn"), true).await["result"].clone();
    assert_eq!(gone["status"], "cancelled");

    let unknown = v2026(&server, "tasks/get", get("nope"), true).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");

    let undeclared = v2026(&server, "tasks/get", get("inv-1"), false).await;
    assert_eq!(undeclared["error"]["code"], -32021, "{undeclared}");
}

#[tokio::test]
async fn v2026_cancel_withdraws_and_acknowledges_even_a_settled_task() {
    let server = Endpoint::start().await;
    for id in ["inv-waiting", "inv-running"] {
        let ack = v2026(&server, "tasks/cancel", json!({ "taskId": id }), true).await;
        assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    }
    let unknown = v2026(&server, "tasks/cancel", json!({"taskId": "nope"}), true).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let withdrawn: Vec<_> = server
        .asked()
        .into_iter()
        .filter_map(|a| match a {
            Asked::Withdraw {
                scope,
                principal,
                invocation_id,
            } => Some((scope, principal, invocation_id)),
            _ => None,
        })
        .collect();
    let by_alice = |id: &str| (ScopeId::Gateway, "alice".to_owned(), id.to_owned());
    assert_eq!(
        withdrawn,
        [
            by_alice("inv-waiting"),
            by_alice("inv-running"),
            by_alice("nope")
        ]
    );
}

#[tokio::test]
async fn v2025_initialize_and_tools_list_advertise_tasks() {
    let server = Endpoint::start().await;
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}});
    let reply = v2025(&server, "initialize", init).await;
    assert_eq!(reply["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(
        reply["result"]["capabilities"]["tasks"],
        json!({"cancel": {}, "requests": {"tools": {"call": {}}}})
    );
    let list = v2025(&server, "tools/list", json!({})).await;
    let support: Vec<_> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].clone(), t["execution"]["taskSupport"].clone()))
        .collect();
    assert_eq!(
        support,
        [
            (json!("echo"), json!("optional")),
            (json!("deploy"), json!("optional")),
            (json!("airlock_await_decision"), Value::Null),
        ]
    );
}

#[tokio::test]
async fn v2025_task_augmented_call_get_result_and_cancel() {
    let server = Endpoint::start().await;
    let call = json!({"name": "deploy", "arguments": {"env": "prod"}, "task": {"ttl": 60000}});
    let created = v2025(&server, "tools/call", call).await;
    let task = &created["result"]["task"];
    assert_eq!(task["taskId"], "inv-1", "{created}");
    assert_eq!(task["status"], "working");
    assert_eq!(task["ttl"], Value::Null);
    assert_eq!(task["pollInterval"], 2000);
    assert!(
        matches!(&server.asked()[0], Asked::Call { name, .. } if name == "deploy"),
        "the task-augmented call went through the host like any other"
    );

    let got = v2025(&server, "tasks/get", json!({"taskId": "inv-waiting"})).await;
    assert_eq!(got["result"]["status"], "working", "{got}");
    assert_eq!(got["result"]["taskId"], "inv-waiting");

    let result = v2025(&server, "tasks/result", json!({"taskId": "inv-1"})).await;
    assert_eq!(result["result"]["isError"], false, "{result}");
    assert_eq!(
        result["result"]["structuredContent"],
        json!({"deployed": "prod"})
    );
    assert_eq!(
        result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        "inv-1"
    );

    let denied = v2025(&server, "tasks/get", json!({"taskId": "inv-denied"})).await;
    assert_eq!(denied["result"]["status"], "failed", "{denied}");
    assert_eq!(denied["result"]["statusMessage"], "denied: bob said no");

    let cancelled = v2025(&server, "tasks/cancel", json!({"taskId": "inv-waiting"})).await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    let settled = v2025(&server, "tasks/cancel", json!({"taskId": "inv-1"})).await;
    assert_eq!(settled["error"]["code"], -32602, "{settled}");
    assert!(
        settled["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already \"completed\""),
        "{settled}"
    );
    let unknown = v2025(&server, "tasks/get", json!({"taskId": "nope"})).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
}

#[tokio::test]
async fn v2025_shape_is_only_for_that_revision() {
    let server = Endpoint::start().await;
    // A 2025-06-18 client knows no tasks: `task` is ignored and the call answers as usual.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "deploy", "arguments": {}, "task": {}}});
    let reply = server
        .post(
            "/mcp",
            &["MCP-Protocol-Version: 2025-06-18"],
            &body.to_string(),
        )
        .await
        .json();
    assert_eq!(
        reply["result"]["structuredContent"]["status"], "awaiting_approval",
        "{reply}"
    );
    assert!(reply["result"].get("task").is_none());
}
