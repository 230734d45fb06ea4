//! MCP Tasks on the real gateway: the parked ledger row is the task, so a task created before a
//! restart is followed, decided and read after it; a cancelled task is a call withdrawn in the
//! caller's name, and nothing runs. Both wire shapes (2026-07-28 extension, 2025-11-25).

use serde_json::{Value, json};

use crate::mcp::{ADMIN, CLAUDE, OTHER, admin_get, approve, call, deployment, page, rpc, start};

const TASKS: &str = "io.modelcontextprotocol/tasks";

/// A 2026-07-28 request (per-request `_meta` and headers), declaring the tasks extension.
async fn v2026(base: &str, token: &str, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}
    });
    let name = params["name"].as_str().or(params["taskId"].as_str());
    let mut request = reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {token}"))
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = name {
        request = request.header("mcp-name", name);
    }
    let body = json!({"jsonrpc": "2.0", "id": 5, "method": method, "params": params});
    let response = request.body(body.to_string()).send().await.unwrap();
    serde_json::from_str(&response.text().await.unwrap()).unwrap()
}

#[tokio::test]
async fn a_2026_task_survives_a_restart_and_inlines_the_decided_result() {
    let dir = deployment();
    let url = page().await;
    let first = start(dir.path()).await;
    let created = v2026(
        &first,
        CLAUDE,
        "tools/call",
        json!({"name": "fetch", "arguments": {"url": url}}),
    )
    .await;
    let task = &created["result"];
    assert_eq!(task["resultType"], "task", "{created}");
    assert_eq!(task["status"], "working");
    let id = task["taskId"].as_str().unwrap().to_owned();

    // A redeploy: a new process over the same ledger file follows the same task.
    let second = start(dir.path()).await;
    let get = json!({ "taskId": id });
    let working = v2026(&second, CLAUDE, "tasks/get", get.clone()).await;
    assert_eq!(working["result"]["status"], "working", "{working}");
    let foreign = v2026(&second, OTHER, "tasks/get", get.clone()).await;
    assert_eq!(
        foreign["error"]["code"], -32602,
        "another principal's task: {foreign}"
    );

    approve(&second, &id).await;
    // Long-poll until it settles (the await tool wakes on the ledger's notification).
    let args = json!({"invocation_id": id, "wait_seconds": 10});
    let awaited = call(&second, CLAUDE, "airlock_await_decision", args).await;
    assert_eq!(awaited["isError"], false, "{awaited}");
    let done = v2026(&second, CLAUDE, "tasks/get", get).await;
    let result = &done["result"];
    assert_eq!(result["status"], "completed", "{done}");
    assert_eq!(
        awaited["structuredContent"]["decided_by"], "alice",
        "{awaited}"
    );
    // The task's result is the call's own, as `tools/call` would have returned it.
    assert_eq!(
        result["result"]["structuredContent"]["body"], "hello",
        "{done}"
    );
}

#[tokio::test]
async fn a_cancelled_2025_task_is_withdrawn_in_the_callers_name_and_never_runs() {
    let dir = deployment();
    let url = page().await;
    let base = start(dir.path()).await;
    let augmented = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "fetch", "arguments": {"url": url}, "task": {"ttl": 60000}}});
    let (status, created) = rpc(&base, Some(CLAUDE), augmented).await;
    assert_eq!(status, 200, "{created}");
    let id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(created["result"]["task"]["status"], "working");

    let request = |method: &str| json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": {"taskId": id}});
    let (_, cancelled) = rpc(&base, Some(CLAUDE), request("tasks/cancel")).await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    let (_, again) = rpc(&base, Some(CLAUDE), request("tasks/cancel")).await;
    assert_eq!(
        again["error"]["code"], -32602,
        "a settled task cannot be cancelled: {again}"
    );
    let (_, result) = rpc(&base, Some(CLAUDE), request("tasks/result")).await;
    assert_eq!(result["result"]["isError"], true, "{result}");
    assert_eq!(
        result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        id.as_str()
    );

    let row = admin_get(&base, &format!("/v1/invocations/{id}")).await;
    assert_eq!(row["state"], "denied", "{row}");
    assert_eq!(row["decision"]["by"], "claude", "{row}");
    let late = reqwest::Client::new()
        .post(format!("{base}/v1/invocations/{id}/approve"))
        .header("authorization", format!("Bearer {ADMIN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        late.status().as_u16(),
        409,
        "a withdrawn call cannot be approved"
    );
}
