//! An upstream's own tasks relayed through airlock's (docs/rules.md MCP-76 to MCP-79, LEDGER-64
//! to LEDGER-66), end to end against a 2026-07-28 upstream built with the official TypeScript
//! SDK v2 (`crates/airlock/tests/upstream-v2/tasks.mjs`): the task is created only for a client
//! that opted in, its id is the invocation's, the row stays `running` under the relay's lease
//! with the upstream's task id stored, `tasks/get` follows the upstream and settles the row once,
//! `tasks/cancel` forwards; a tool the upstream runs only as a task is refused to a client that
//! did not opt in (MCP-80); an upstream's task waiting for input shows its requests on
//! `tasks/get` and resumes on the client's `tasks/update` (MCP-83, MCP-84). Needs `npm ci --prefix crates/airlock/tests/upstream-v2`.

use std::sync::Arc;
use std::time::Duration;

use airlock_ledger::{InvocationId, InvocationState, RELAY_OWNER};
use airlock_runtime::Gateway;
use serde_json::{Value, json};

use crate::support::{deployment_with, serve_in_process, tasks_fixture};

const TASKS: &str = "io.modelcontextprotocol/tasks";
const TOKEN: &str = "mcp-5d1b3f7a9c2e4a6b8d0f1e3c5a7b9d2f";

/// Agent `relay` serving the fixture's task tools under their own names (DECL-81).
fn deployment(port: u16) -> tempfile::TempDir {
    let toml = format!(
        "[[mcp.tokens]]\ncredential = \"airlock.mcp\"\nprincipal = \"claude\"\n[egress]\nallow = [\"127.0.0.1/32\"]\n[connections.tasks]\nuse_egress_allow = true\nbase_url = \"http://127.0.0.1:{port}\"\n[credentials]\nfile = \"creds.yml\"\n"
    );
    let dir = deployment_with(&toml, &format!("airlock:\n  mcp: {TOKEN}\n"));
    std::fs::create_dir(dir.path().join("agents")).unwrap();
    let tool = |name: &str, extra: &str| {
        format!(
            "        - {{ name: {name}, served_as: {name}, description: Runs {name}., writes: false,{extra} input_schema: {{ type: object }} }}\n"
        )
    };
    let agent = format!(
        "apiVersion: airlock/v1\nkind: Agent\nmetadata:\n  name: relay\nspec:\n  model: {{ provider: openai, model: unused }}\n  prompts: {{ system: Unused. }}\n  tools:\n    - name: tasks\n      type: mcp\n      connection: tasks\n      path: /mcp\n      protocol: 2026-07-28\n      tools:\n{}{}{}{}{}{}",
        tool("slow_compute", ""),
        tool("failing_job", " requires_tasks: true,"),
        tool("protocol_error_job", ""),
        tool("test_tool_with_task", ""),
        tool("confirm_delete", " requires_tasks: true,"),
        tool("multi_input", " requires_tasks: true,")
    );
    std::fs::write(dir.path().join("agents/relay.yml"), agent).unwrap();
    dir
}

/// A 2026-07-28 request to agent `relay`, declaring the tasks extension when `tasks`.
async fn request(base: &str, method: &str, params: Value, tasks: bool) -> Value {
    request_status(base, method, params, tasks).await.1
}

/// [`request`] with the reply's HTTP status.
async fn request_status(base: &str, method: &str, params: Value, tasks: bool) -> (u16, Value) {
    let extensions = if tasks {
        json!({ TASKS: {} })
    } else {
        json!({})
    };
    request_declaring(base, method, params, json!({ "extensions": extensions })).await
}

/// [`request_status`] declaring `capabilities`.
async fn request_declaring(
    base: &str,
    method: &str,
    mut params: Value,
    capabilities: Value,
) -> (u16, Value) {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}
    });
    let name = params["name"].as_str().or(params["taskId"].as_str());
    let mut request = reqwest::Client::new()
        .post(format!("{base}/agents/relay/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = name {
        request = request.header("mcp-name", name);
    }
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let response = request.body(body.to_string()).send().await.unwrap();
    let status = response.status().as_u16();
    (
        status,
        serde_json::from_str(&response.text().await.unwrap()).unwrap(),
    )
}

async fn call(base: &str, tool: &str, arguments: Value, tasks: bool) -> Value {
    let params = json!({"name": tool, "arguments": arguments});
    request(base, "tools/call", params, tasks).await["result"].clone()
}

/// Polls `tasks/get` until the task is no longer `working` (bounded).
async fn settled(base: &str, id: &str) -> Value {
    for _ in 0..300 {
        let got = request(base, "tasks/get", json!({ "taskId": id }), true).await;
        if got["result"]["status"] != "working" {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("task {id} did not settle");
}

async fn row(gateway: &Arc<Gateway>, id: &str) -> airlock_ledger::Invocation {
    let id: InvocationId = id.parse().unwrap();
    gateway.store().get(id).await.unwrap()
}

async fn serve(port: u16) -> (tempfile::TempDir, String, Arc<Gateway>) {
    let dir = deployment(port);
    let (addr, gateway) = serve_in_process(dir.path()).await;
    (dir, format!("http://{addr}"), gateway)
}

/// MCP-76, MCP-77, LEDGER-64: an opted-in call's upstream task becomes airlock's task (its id is
/// the invocation's, never the upstream's); the row stays running under the relay's lease with
/// the upstream's id stored; `tasks/get` inlines the upstream's result, byte-equal to the
/// result a client that did not opt in gets, and the row ends succeeded.
#[tokio::test]
async fn mcp_76_an_upstream_task_is_relayed_as_airlocks_task_and_settled() {
    let Some((_upstream, port)) = tasks_fixture().await else {
        return;
    };
    let (_dir, base, gateway) = serve(port).await;
    let arguments = json!({"seconds": 0, "label": "relay"});
    let created = call(&base, "slow_compute", arguments.clone(), true).await;
    assert_eq!(created["resultType"], "task", "{created}");
    let id = created["taskId"].as_str().unwrap().to_owned();
    let running = row(&gateway, &id).await;
    assert_eq!(running.state, InvocationState::Running);
    assert_eq!(running.lease.as_ref().unwrap().owner, RELAY_OWNER);
    let upstream = gateway.store().relayed_task(running.id).await.unwrap();
    let upstream = upstream.expect("the upstream's task id is stored");
    assert!(upstream.starts_with("upstream-task-"), "{upstream}");
    assert_ne!(upstream, id, "the client never sees the upstream's id");

    let done = settled(&base, &id).await;
    assert_eq!(done["result"]["status"], "completed", "{done}");
    let plain = call(&base, "slow_compute", arguments, false).await;
    assert_eq!(plain["resultType"], "complete", "{plain}");
    assert_eq!(
        done["result"]["result"]["content"], plain["content"],
        "{done}"
    );
    assert_eq!(
        plain["content"][0]["text"], "Computed relay in 0s",
        "{plain}"
    );
    assert_eq!(row(&gateway, &id).await.state, InvocationState::Succeeded);
}

/// MCP-77: a client that did not declare the extension gets the result at once, and the
/// upstream is not offered a task (its row never waits on one).
#[tokio::test]
async fn mcp_77_a_client_that_did_not_opt_in_gets_a_plain_result() {
    let Some((_upstream, port)) = tasks_fixture().await else {
        return;
    };
    let (_dir, base, gateway) = serve(port).await;
    let reply = request(
        &base,
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 0, "label": "sync"}, "_meta": {"io.airlock/call_key": "plain-1"}}),
        false,
    )
    .await;
    let result = &reply["result"];
    assert_eq!(result["resultType"], "complete", "{reply}");
    assert!(result.get("taskId").is_none(), "{reply}");
    assert_eq!(result["content"][0]["text"], "Computed sync in 0s");
    // Nothing waits on an upstream task: no row of this scope is running.
    let open = gateway.store().open_counts().await.unwrap();
    assert!(
        !open
            .iter()
            .any(|(state, n)| *state == InvocationState::Running && *n > 0),
        "{open:?}"
    );
}

/// MCP-80, DECL-82: a tool its upstream runs only as a task, called by a client that did not
/// declare the tasks extension, is refused by airlock with -32021 naming the extension (HTTP
/// 400) before anything is recorded; from a client that did, the same call is a task.
#[tokio::test]
async fn mcp_80_a_task_only_tool_is_refused_to_a_client_without_tasks() {
    let Some((_upstream, port)) = tasks_fixture().await else {
        return;
    };
    let (_dir, base, gateway) = serve(port).await;
    let params = json!({"name": "failing_job", "arguments": {}});
    let (status, reply) = request_status(&base, "tools/call", params, false).await;
    assert_eq!(status, 400, "{reply}");
    assert_eq!(reply["error"]["code"], -32021, "{reply}");
    let required = &reply["error"]["data"]["requiredCapabilities"];
    assert_eq!(required["extensions"][TASKS], json!({}), "{reply}");
    let recorded = || async { gateway.store().verify().await.unwrap().rows };
    assert_eq!(recorded().await, 0, "refused before anything is recorded");
    let created = call(&base, "failing_job", json!({}), true).await;
    assert_eq!(created["resultType"], "task", "{created}");
    assert!(recorded().await > 0);
}

/// The client capabilities of a client that follows tasks and answers elicitations.
fn answering() -> Value {
    json!({"elicitation": {}, "extensions": { TASKS: {} }})
}

/// Creates a task of `tool` for a client that answers elicitations; its task id.
async fn asking_task(base: &str, tool: &str) -> String {
    let params = json!({"name": tool, "arguments": {"filename": "a.txt"}});
    let (_, created) = request_declaring(base, "tools/call", params, answering()).await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    created["result"]["taskId"].as_str().unwrap().to_owned()
}

/// `tasks/get` of `id` from a client that answers elicitations.
async fn get(base: &str, id: &str) -> Value {
    let params = json!({ "taskId": id });
    request_declaring(base, "tasks/get", params, answering())
        .await
        .1
}

/// `tasks/update` of `id` with `responses`.
async fn update(base: &str, id: &str, responses: Value) -> (u16, Value) {
    let params = json!({ "taskId": id, "inputResponses": responses });
    request_declaring(base, "tasks/update", params, answering()).await
}

/// MCP-83, LEDGER-68: an upstream's task waiting for input is `input_required` on airlock's
/// `tasks/get`, with the upstream's input requests relayed (read as a round's) and nothing
/// naming the upstream's task; the row stays running under the relay's lease. A client that did
/// not declare what a request needs sees the task `working`.
#[tokio::test]
async fn mcp_83_an_upstream_task_waiting_for_input_shows_its_requests() {
    let Some((_upstream, port)) = tasks_fixture().await else {
        return;
    };
    let (_dir, base, gateway) = serve(port).await;
    let id = asking_task(&base, "confirm_delete").await;
    let got = get(&base, &id).await;
    let task = &got["result"];
    assert_eq!(task["status"], "input_required", "{got}");
    assert_eq!(task["taskId"], id.as_str(), "{got}");
    let ask = &task["inputRequests"]["confirm"];
    assert_eq!(ask["method"], "elicitation/create", "{got}");
    assert_eq!(ask["params"]["message"], "Delete a.txt?", "{got}");
    assert!(!got.to_string().contains("upstream-task-"), "{got}");
    let running = row(&gateway, &id).await;
    assert_eq!(running.state, InvocationState::Running);
    assert_eq!(running.lease.as_ref().unwrap().owner, RELAY_OWNER);

    let tasks_only = json!({"extensions": { TASKS: {} }});
    let params = json!({ "taskId": id });
    let (_, blind) = request_declaring(&base, "tasks/get", params, tasks_only).await;
    assert_eq!(blind["result"]["status"], "working", "{blind}");
    assert!(blind["result"].get("inputRequests").is_none(), "{blind}");
}

/// MCP-84, LEDGER-68: `tasks/update` relays the client's answers to the upstream's task and acks with
/// nothing of the task; a partial answer leaves only the unanswered request pending, and once
/// all are answered the task resumes and completes; the row stays running until a look finds
/// it settled, then ends succeeded.
#[tokio::test]
async fn mcp_84_tasks_update_resumes_the_upstream_task() {
    let Some((_upstream, port)) = tasks_fixture().await else {
        return;
    };
    let (_dir, base, gateway) = serve(port).await;
    let id = asking_task(&base, "multi_input").await;
    let asked = get(&base, &id).await;
    let keys: Vec<_> = asked["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(keys, ["confirm", "name"], "{asked}");

    let confirm = json!({"confirm": {"action": "accept", "content": {"confirm": true}}});
    let (status, ack) = update(&base, &id, confirm).await;
    assert_eq!(status, 200, "{ack}");
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    for field in ["taskId", "status", "result", "inputRequests"] {
        assert!(ack["result"].get(field).is_none(), "{ack}");
    }
    assert_eq!(row(&gateway, &id).await.state, InvocationState::Running);
    let partial = get(&base, &id).await;
    assert_eq!(partial["result"]["status"], "input_required", "{partial}");
    let pending = partial["result"]["inputRequests"].as_object().unwrap();
    assert_eq!(pending.keys().collect::<Vec<_>>(), ["name"], "{partial}");

    let name = json!({"name": {"action": "accept", "content": {"name": "Ada"}}});
    update(&base, &id, name).await;
    let done = settled(&base, &id).await;
    assert_eq!(done["result"]["status"], "completed", "{done}");
    let text = &done["result"]["result"]["content"][0]["text"];
    assert_eq!(text, "Answered confirm, name", "{done}");
    assert_eq!(row(&gateway, &id).await.state, InvocationState::Succeeded);
}

/// MCP-87: a `tasks/update` answer not matching the `requestedSchema` its upstream's task asked
/// with is -32602 naming the field, and is not relayed: the task still asks both questions.
#[tokio::test]
async fn mcp_87_a_task_update_not_matching_the_requested_schema_is_refused() {
    let Some((_upstream, port)) = tasks_fixture().await else {
        return;
    };
    let (_dir, base, _gateway) = serve(port).await;
    let id = asking_task(&base, "multi_input").await;
    get(&base, &id).await;
    let wrong = json!({"confirm": {"action": "accept", "content": {"confirm": "yes"}}});
    let (_, refused) = update(&base, &id, wrong).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert_eq!(refused["error"]["data"]["field"], "confirm", "{refused}");
    let still = get(&base, &id).await;
    let pending = still["result"]["inputRequests"].as_object().unwrap();
    assert_eq!(
        pending.keys().collect::<Vec<_>>(),
        ["confirm", "name"],
        "{still}"
    );
}

/// MCP-84: `tasks/update` of a task whose upstream runs no task of its own (here one already
/// settled) or of an unknown task is -32602; from a client without the extension, -32021.
#[tokio::test]
async fn mcp_84_tasks_update_of_a_task_not_waiting_is_refused() {
    let Some((_upstream, port)) = tasks_fixture().await else {
        return;
    };
    let (_dir, base, _gateway) = serve(port).await;
    let created = call(&base, "slow_compute", json!({"seconds": 0}), true).await;
    let id = created["taskId"].as_str().unwrap().to_owned();
    settled(&base, &id).await;
    let (_, refused) = update(&base, &id, json!({"k": {}})).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let unknown = "01890f6e-0000-7000-8000-000000000000";
    let (_, refused) = update(&base, unknown, json!({"k": {}})).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let params = json!({ "taskId": id, "inputResponses": {"k": {}} });
    let (_, refused) = request_status(&base, "tasks/update", params, false).await;
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
}

/// MCP-82: an input round before the task: the first call is a relayed `input_required` round
/// with no task id; the retry carrying the answer offers its upstream the task again, and the
/// client gets airlock's task (no `requestState`, no `inputRequests`), which completes with the
/// answer the round gathered.
#[tokio::test]
async fn mcp_82_a_round_before_the_task_is_relayed_then_the_task() {
    let Some((_upstream, port)) = tasks_fixture().await else {
        return;
    };
    let (_dir, base, gateway) = serve(port).await;
    let capabilities = json!({"elicitation": {}, "extensions": { TASKS: {} }});
    let params = json!({"name": "test_tool_with_task", "arguments": {}});
    let (_, first) = request_declaring(&base, "tools/call", params, capabilities.clone()).await;
    let asked = &first["result"];
    assert_eq!(asked["resultType"], "input_required", "{first}");
    assert!(asked.get("taskId").is_none(), "{first}");
    let retry = json!({
        "name": "test_tool_with_task",
        "arguments": {},
        "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Alice"}}},
        "requestState": asked["requestState"],
    });
    let (_, created) = request_declaring(&base, "tools/call", retry, capabilities).await;
    let task = &created["result"];
    assert_eq!(task["resultType"], "task", "{created}");
    assert!(task.get("requestState").is_none(), "{created}");
    assert!(task.get("inputRequests").is_none(), "{created}");
    let id = task["taskId"].as_str().unwrap().to_owned();
    let done = settled(&base, &id).await;
    assert_eq!(done["result"]["status"], "completed", "{done}");
    let text = &done["result"]["result"]["content"][0]["text"];
    assert_eq!(text, "Hello, Alice!", "{done}");
    assert_eq!(row(&gateway, &id).await.state, InvocationState::Succeeded);
}

/// MCP-78: a task that ends in a tool error is `completed` with `isError`; one that fails at the
/// protocol level is `failed` with the error inlined and no result; both rows end failed.
#[tokio::test]
async fn mcp_78_tool_errors_complete_and_protocol_errors_fail() {
    let Some((_upstream, port)) = tasks_fixture().await else {
        return;
    };
    let (_dir, base, gateway) = serve(port).await;
    let created = call(&base, "failing_job", json!({}), true).await;
    let id = created["taskId"].as_str().unwrap().to_owned();
    let done = settled(&base, &id).await;
    assert_eq!(done["result"]["status"], "completed", "{done}");
    assert_eq!(done["result"]["result"]["isError"], true, "{done}");
    assert_eq!(row(&gateway, &id).await.state, InvocationState::Failed);

    let created = call(&base, "protocol_error_job", json!({}), true).await;
    let id = created["taskId"].as_str().unwrap().to_owned();
    let failed = settled(&base, &id).await;
    let task = &failed["result"];
    assert_eq!(task["status"], "failed", "{failed}");
    assert_eq!(task["error"]["code"], -32603, "{failed}");
    let message = task["error"]["message"].as_str().unwrap();
    assert!(message.contains("protocol_error_job crashed"), "{failed}");
    assert!(task.get("result").is_none(), "{failed}");
    // The sub-state is the stored kind, not a prefix of the message.
    let stored = row(&gateway, &id).await;
    assert_eq!(stored.state, InvocationState::Failed);
    let error = stored.error.unwrap();
    assert_eq!(error.kind, airlock_ledger::ToolErrorKind::TaskFailed);
    assert!(
        error.message.contains("protocol_error_job crashed"),
        "{error:?}"
    );
}

/// MCP-79: cancelling a relayed task forwards the cancel to the upstream and acknowledges; the
/// next look records the upstream's cancellation on the row. An unknown task id is -32602.
#[tokio::test]
async fn mcp_79_cancel_is_forwarded_and_recorded() {
    let Some((_upstream, port)) = tasks_fixture().await else {
        return;
    };
    let (_dir, base, gateway) = serve(port).await;
    let created = call(&base, "slow_compute", json!({"seconds": 60}), true).await;
    let id = created["taskId"].as_str().unwrap().to_owned();
    let ack = request(&base, "tasks/cancel", json!({ "taskId": id }), true).await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    assert!(ack["result"].get("taskId").is_none(), "{ack}");
    let after = row(&gateway, &id).await;
    assert_eq!(after.state, InvocationState::Failed, "{after:?}");
    assert!(after.error.unwrap().message.contains("cancelled"));
    let done = settled(&base, &id).await;
    assert_eq!(done["result"]["status"], "completed", "{done}");
    assert_eq!(done["result"]["result"]["isError"], true, "{done}");

    let unknown = json!({"taskId": "01890000-0000-7000-8000-000000000000"});
    let unknown = request(&base, "tasks/get", unknown, true).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
}

/// LEDGER-64, LEDGER-65: the relayed task is durable — another process over the same ledger
/// follows it — and concurrent `tasks/get`s settle the row exactly once.
#[tokio::test]
async fn ledger_65_another_process_settles_a_relayed_task_once() {
    let Some((_upstream, port)) = tasks_fixture().await else {
        return;
    };
    let (dir, first, _) = serve(port).await;
    let created = call(
        &first,
        "slow_compute",
        json!({"seconds": 0, "label": "twice"}),
        true,
    )
    .await;
    let id = created["taskId"].as_str().unwrap().to_owned();
    let (addr, gateway) = serve_in_process(dir.path()).await;
    let second = format!("http://{addr}");
    let get = || request(&second, "tasks/get", json!({ "taskId": id }), true);
    let mut answers = Vec::new();
    for _ in 0..300 {
        let (a, b, c) = tokio::join!(get(), get(), get());
        answers = vec![a, b, c];
        if answers.iter().all(|a| a["result"]["status"] == "completed") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for answer in &answers {
        assert_eq!(answer["result"]["status"], "completed", "{answer}");
        assert_eq!(answer["result"]["result"], answers[0]["result"]["result"]);
    }
    let done = row(&gateway, &id).await;
    assert_eq!(done.state, InvocationState::Succeeded);
    // Claimed and run once; settled by a follower in the relay's name, whose lease it keeps.
    assert_eq!(done.attempts, 1);
    assert_eq!(done.lease.unwrap().owner, RELAY_OWNER);
    let audit = gateway.store().verify().await.unwrap();
    assert!(audit.first_break.is_none(), "{audit:?}");
}

/// LEDGER-66: the sweeper leaves a relayed row alone while its relay lease runs, however long
/// the task takes, and treats it as any call whose runner went away once nobody followed it for
/// the whole lease.
#[tokio::test]
async fn ledger_66_the_sweeper_waits_for_the_relay_lease() {
    let Some((_upstream, port)) = tasks_fixture().await else {
        return;
    };
    let (_dir, base, gateway) = serve(port).await;
    let created = call(&base, "slow_compute", json!({"seconds": 60}), true).await;
    let id = created["taskId"].as_str().unwrap().to_owned();
    let now = time::OffsetDateTime::now_utc();
    gateway
        .store()
        .sweep(now + Duration::from_secs(3600))
        .await
        .unwrap();
    assert_eq!(row(&gateway, &id).await.state, InvocationState::Running);
    let lapsed = now + Duration::from_secs(25 * 3600);
    let report = gateway.store().sweep(lapsed).await.unwrap();
    assert_eq!(row(&gateway, &id).await.state, InvocationState::InDoubt);
    assert_eq!(report.in_doubt.len(), 1, "{report:?}");
}
