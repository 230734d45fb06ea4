//! `apis/<slug>.yml` on the real gateway (DECL-40): its operations are listed and called on
//! `POST /mcp` beside the builtins, through the ledger and the egress guard, with the
//! credential of its `[connections]` entry.

use serde_json::json;

use crate::mcp::{ADMIN, CLAUDE, call, rpc, start};
use crate::support::{deployment_with, json_once};

const TOKEN: &str = "tok-billing-8d2f1c0e5b7a4e6f";

fn deployment(port: u16) -> tempfile::TempDir {
    let toml = format!(
        "[[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"alice\"\n[[mcp.tokens]]\ncredential = \"airlock.claude\"\nprincipal = \"claude\"\n[egress]\nallow = [\"127.0.0.1/32\"]\n[connections.billing]\nuse_egress_allow = true\nbase_url = \"http://127.0.0.1:{port}/api\"\ncredential = \"billing.token\"\n[credentials]\nfile = \"creds.yml\"\n[builtins.ask_human]\n"
    );
    let dir = deployment_with(
        &toml,
        &format!("airlock:\n  admin: {ADMIN}\n  claude: {CLAUDE}\nbilling:\n  token: {TOKEN}\n"),
    );
    std::fs::create_dir(dir.path().join("apis")).unwrap();
    let api = "name: billing\nconnection: billing\nauth: { scheme: bearer }\noperations:\n  - name: get_invoice\n    description: One invoice.\n    writes: false\n    parameters: { id: { type: string, required: true } }\n    request: { method: GET, path: '/invoices/{id}' }\n    response: { select: data.total }\n  - name: refund\n    description: Refund an invoice.\n    writes: true\n    mode: propose\n    approval: always\n    request: { method: POST, path: /refunds }\n";
    std::fs::write(dir.path().join("apis/billing.yml"), api).unwrap();
    dir
}

#[tokio::test]
async fn an_api_file_is_listed_and_called_on_the_gateway_endpoint() {
    let (port, head) = json_once(r#"{"data":{"total":"42.00"}}"#);
    let dir = deployment(port);
    let base = start(dir.path()).await;
    let (status, list) = rpc(
        &base,
        Some(CLAUDE),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .await;
    assert_eq!(status, 200, "{list}");
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for name in ["ask_human", "billing_get_invoice"] {
        assert!(names.contains(&name), "{name} not in {names:?}");
    }
    // POLICY-50: a proposing write cannot be called here, so it is not listed.
    assert!(!names.contains(&"billing_refund"), "{names:?}");
    let result = call(&base, CLAUDE, "billing_get_invoice", json!({"id": "F-7"})).await;
    assert_eq!(result["isError"], false, "{result}");
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("42.00"),
        "{result}"
    );
    let head = tokio::task::spawn_blocking(move || head.join().unwrap())
        .await
        .unwrap();
    assert!(head.starts_with("GET /api/invoices/F-7 HTTP/1.1"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains(&format!(
            "authorization: bearer {}",
            TOKEN.to_ascii_lowercase()
        )),
        "{head}"
    );
}

/// The names `tools/list` gives `token` on `path`.
async fn listed(base: &str, path: &str, token: &str) -> Vec<String> {
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let reply: serde_json::Value = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-11-25")
        .header("authorization", format!("Bearer {token}"))
        .body(list.to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let tools = reply["result"]["tools"].as_array().cloned();
    let tools = tools.unwrap_or_else(|| panic!("{reply}"));
    tools
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

/// POLICY-50: every listing of the endpoint leaves out what a call there is refused: the
/// gateway scope's proposing operation, and on an agent's endpoint its proposing operation and
/// its `confirm: true` catalog action; the reads of both stay listed. A call of the proposing
/// operation is still refused as before (POLICY-12), not mistaken for a missing tool.
#[tokio::test]
async fn tools_refused_on_the_endpoint_are_not_listed() {
    let dir = deployment(9);
    let catalog = dir.path().join("catalog/tickets");
    std::fs::create_dir_all(&catalog).unwrap();
    let integration = "base_url: https://tickets.example.com/api\nauth: { scheme: none }\nactions:\n  - name: show\n    description: Show a ticket.\n    request: { method: GET, path: /tickets }\n  - name: close\n    description: Close a ticket.\n    request: { method: POST, path: /tickets/close }\n    confirm: true\n";
    std::fs::write(catalog.join("integration.yaml"), integration).unwrap();
    std::fs::create_dir(dir.path().join("agents")).unwrap();
    let manifest = "apiVersion: airlock/v1\nkind: Agent\nmetadata: { name: desk }\nspec:\n  model: { provider: openai, model: m }\n  prompts: { system: s }\n  tools:\n    - type: integration\n      integration: tickets\n      actions: [show, close]\n    - name: erp\n      type: api\n      connection: billing\n      auth: { scheme: bearer }\n      operations:\n        - name: find\n          description: Find.\n          writes: false\n          request: { method: GET, path: /find }\n        - name: cancel\n          description: Cancel.\n          writes: true\n          mode: propose\n          request: { method: POST, path: /cancel }\n";
    std::fs::write(dir.path().join("agents/desk.yml"), manifest).unwrap();
    let base = start(dir.path()).await;

    let gateway = listed(&base, "/mcp", CLAUDE).await;
    assert!(
        gateway.contains(&"billing_get_invoice".to_owned()),
        "{gateway:?}"
    );
    assert!(
        !gateway.contains(&"billing_refund".to_owned()),
        "{gateway:?}"
    );
    let agent = listed(&base, "/agents/desk/mcp", CLAUDE).await;
    for name in ["tickets_show", "erp_find"] {
        assert!(agent.contains(&name.to_owned()), "{name} not in {agent:?}");
    }
    for name in ["tickets_close", "erp_cancel"] {
        assert!(!agent.contains(&name.to_owned()), "{name} in {agent:?}");
    }

    let refused = call(&base, CLAUDE, "billing_refund", json!({})).await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(
        refused
            .to_string()
            .contains("nobody on this channel receives proposals"),
        "{refused}"
    );
}

/// POLICY-57 … POLICY-60 end to end: `limits:` declared in an `apis/` file hold on the MCP
/// endpoint — over an `approval` limit a call waits with the figures on its inbox card, over a
/// `deny` one it is a tool error naming the limit, and `GET /v1/limits` shows what is left.
#[tokio::test]
async fn declared_limits_park_deny_and_are_listed() {
    let upstream = airlock_testkit::RawServer::start(
        Some("no-such-method"),
        airlock_testkit::Cue::Status(500),
    )
    .await;
    let dir = deployment(upstream.port);
    let pay = "name: pay\nconnection: billing\nauth: { scheme: bearer }\nlimits:\n  - { name: daily, sum: /amount, unit: EUR, max: 100, per: 1d, by: principal, over: approval }\n  - { name: sends, max: 3, per: 1h }\noperations:\n  - name: send\n    description: Send money.\n    writes: false\n    parameters: { amount: { type: integer, required: true } }\n    request: { method: GET, path: /pay, query: { amount: '{amount}' } }\n";
    std::fs::write(dir.path().join("apis/pay.yml"), pay).unwrap();
    let base = start(dir.path()).await;
    let first = call(&base, CLAUDE, "pay_send", json!({"amount": 60})).await;
    assert_eq!(first["isError"], false, "{first}");
    let parked = call(&base, CLAUDE, "pay_send", json!({"amount": 60})).await;
    let status = &parked["structuredContent"];
    assert_eq!(status["status"], "awaiting_approval", "{parked}");
    let id = status["invocation_id"].as_str().unwrap().to_owned();
    let mut inbox = crate::support::inbox_client::InboxClient::signed_in(&base, ADMIN).await;
    let card = inbox.get(&format!("/inbox/invocations/{id}")).await;
    assert!(
        card.body.contains("Over its limit: ")
            && card
                .body
                .contains("120 of 100 EUR in 1d (daily per principal claude)"),
        "{}",
        card.body
    );
    let third = call(&base, CLAUDE, "pay_send", json!({"amount": 1})).await;
    assert_eq!(
        third["structuredContent"]["status"], "awaiting_approval",
        "still over daily: {third}"
    );
    let fourth = call(&base, CLAUDE, "pay_send", json!({"amount": 0})).await;
    assert_eq!(fourth["isError"], true, "{fourth}");
    let text = fourth["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("over_limit") && text.contains("4 of 3 in 1h (sends)"),
        "{text}"
    );
    let client = reqwest::Client::new();
    let limits: serde_json::Value = client
        .get(format!("{base}/v1/limits"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let listed = limits["limits"].as_array().unwrap();
    let daily = listed
        .iter()
        .find(|l| l["label"] == "daily per principal claude")
        .unwrap();
    assert_eq!(
        (daily["used"].as_f64(), daily["max"].as_f64()),
        (Some(121.0), Some(100.0)),
        "{limits}"
    );
    assert_eq!(daily["left"].as_f64(), Some(0.0));
    let sends = listed.iter().find(|l| l["label"] == "sends").unwrap();
    assert_eq!(sends["used"].as_f64(), Some(3.0), "{limits}");
    let status = client
        .get(format!("{base}/v1/limits"))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 401, "an admin token is needed");
    assert_eq!(upstream.seen().len(), 1, "only the first call was sent");
}

/// POLICY-59: a call over an `approval` limit of an `approval: caller` tool waits for an
/// approver — the person at the client is not asked to confirm it, and the row says `always`;
/// a call within the limit is still the caller's to confirm.
#[tokio::test]
async fn over_an_approval_limit_the_caller_cannot_confirm_its_own_call() {
    let upstream = airlock_testkit::RawServer::start(
        Some("no-such-method"),
        airlock_testkit::Cue::Status(500),
    )
    .await;
    let dir = deployment(upstream.port);
    let pay = "name: pay\nconnection: billing\nauth: { scheme: bearer }\napproval: caller\nlimits:\n  - { name: daily, sum: /amount, unit: EUR, max: 100, per: 1d, over: approval }\noperations:\n  - name: send\n    description: Send money.\n    writes: false\n    parameters: { amount: { type: integer, required: true } }\n    request: { method: GET, path: /pay, query: { amount: '{amount}' } }\n";
    std::fs::write(dir.path().join("apis/pay.yml"), pay).unwrap();
    let base = start(dir.path()).await;
    let url = format!("{base}/mcp");
    let elicitation = json!({"elicitation": {}});
    let call_2026 = |amount: u32| {
        let params = json!({"name": "pay_send", "arguments": {"amount": amount}});
        crate::support::modern_tools_call(&url, CLAUDE, params, elicitation.clone())
    };
    let within = call_2026(60).await;
    assert_eq!(within["result"]["resultType"], "input_required", "{within}");
    let over = call_2026(50).await;
    let result = &over["result"];
    assert_ne!(result["resultType"], "input_required", "{over}");
    assert_eq!(
        result["structuredContent"]["status"], "awaiting_approval",
        "{over}"
    );
    let id = result["structuredContent"]["invocation_id"]
        .as_str()
        .unwrap();
    let row: serde_json::Value = reqwest::Client::new()
        .get(format!("{base}/v1/invocations/{id}"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(row["approval"], "always", "{row}");
    assert!(
        upstream.seen().is_empty(),
        "nothing ran: {:?}",
        upstream.seen()
    );
}

/// POLICY-61: `approvers:` — a decider off the list and the caller itself are refused, one
/// approval of a two-person quorum leaves the call waiting, the second runs it once.
#[tokio::test]
async fn a_quorum_of_named_deciders_approves_and_the_call_runs_once() {
    let (bob, own, eve) = ("tok-bob-1f2e3d4c", "tok-self-5a6b7c8d", "tok-eve-9e8f7a6b");
    let admins = [("bob", bob), ("claude", own), ("eve", eve)];
    let quorum = "{ quorum: 2, deciders: [alice, bob, claude] }";
    let ParkedPay {
        upstream,
        base,
        id,
        _dir,
    } = parked_pay(&admins, quorum).await;
    let (status, body) = approve_as(&base, &id, eve).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body.to_string().contains("not one of this call's deciders"),
        "{body}"
    );
    let (status, body) = approve_as(&base, &id, own).await;
    assert_eq!(status, 409, "{body}");
    assert!(body.to_string().contains("may not approve it"), "{body}");
    let edited = reqwest::Client::new()
        .post(format!("{base}/v1/invocations/{id}/approve"))
        .bearer_auth(ADMIN)
        .json(&json!({"arguments": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        edited.status(),
        409,
        "one person's edit cannot stand for a quorum"
    );
    let (status, body) = approve_as(&base, &id, ADMIN).await;
    assert_eq!(
        (status, body["state"].as_str()),
        (200, Some("awaiting_approval")),
        "{body}"
    );
    assert!(
        upstream.seen().is_empty(),
        "one approval of two runs nothing"
    );
    let (status, body) = approve_as(&base, &id, bob).await;
    assert_eq!(
        (status, body["state"].as_str()),
        (200, Some("approved")),
        "{body}"
    );
    assert_eq!(body["decision"]["by"], "alice, bob", "{body}");
    assert_eq!(requests_seen(&upstream).await, 1, "run once");
}

/// POLICY-64: a decider hands their role on — `dave` may not decide until `alice` (a named
/// decider) delegates to him, and then he may; the delegation is listed, and a bad one refused.
#[tokio::test]
async fn a_delegated_decider_may_decide_in_their_place() {
    let dave = "tok-dave-0a9b8c7d";
    let ParkedPay {
        upstream,
        base,
        id,
        _dir,
    } = parked_pay(&[("dave", dave)], "{ deciders: [alice] }").await;
    assert_eq!(
        approve_as(&base, &id, dave).await.0,
        409,
        "not a decider yet"
    );
    let client = reqwest::Client::new();
    let delegate = |body: serde_json::Value| {
        client
            .post(format!("{base}/v1/delegations"))
            .bearer_auth(ADMIN)
            .json(&body)
            .send()
    };
    let refused = delegate(json!({"to": "dave", "for": "90d"})).await.unwrap();
    assert_eq!(refused.status(), 422);
    let refused = delegate(json!({"to": "dave", "for": "1h", "from": "bob"}))
        .await
        .unwrap();
    assert_eq!(
        refused.status(),
        422,
        "the delegator is the token's principal"
    );
    let given = delegate(json!({"to": "dave", "for": "1h"})).await.unwrap();
    assert_eq!(given.status(), 201);
    let listed: serde_json::Value = client
        .get(format!("{base}/v1/delegations?to=dave"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["delegations"][0]["from"], "alice", "{listed}");
    assert_eq!(approve_as(&base, &id, dave).await.0, 200);
    assert_eq!(requests_seen(&upstream).await, 1, "run once");
}

/// A deployment whose admin tokens are `admins` (principal, token) beside `alice`'s, with
/// `pay.yml` declaring `pay_send` under `approvers` and an upstream on `port`.
fn approvers_deployment(port: u16, admins: &[(&str, &str)], approvers: &str) -> tempfile::TempDir {
    let mut toml =
        "[[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"alice\"\n".to_owned();
    let mut creds = format!("airlock:\n  admin: {ADMIN}\n  claude: {CLAUDE}\n");
    for (principal, token) in admins {
        toml.push_str(&format!(
            "[[admin.tokens]]\ncredential = \"airlock.admin_{principal}\"\nprincipal = \"{principal}\"\n"
        ));
        creds.push_str(&format!("  admin_{principal}: {token}\n"));
    }
    toml.push_str(&format!("[[mcp.tokens]]\ncredential = \"airlock.claude\"\nprincipal = \"claude\"\n[egress]\nallow = [\"127.0.0.1/32\"]\n[connections.billing]\nuse_egress_allow = true\nbase_url = \"http://127.0.0.1:{port}/api\"\ncredential = \"billing.token\"\n[credentials]\nfile = \"creds.yml\"\n"));
    creds.push_str(&format!("billing:\n  token: {TOKEN}\n"));
    let dir = deployment_with(&toml, &creds);
    std::fs::create_dir(dir.path().join("apis")).unwrap();
    let pay = format!(
        "name: pay\nconnection: billing\nauth: {{ scheme: bearer }}\napproval: always\napprovers: {approvers}\noperations:\n  - name: send\n    description: Send money.\n    writes: false\n    request: {{ method: GET, path: /pay }}\n"
    );
    std::fs::write(dir.path().join("apis/pay.yml"), pay).unwrap();
    dir
}

/// A served deployment of [`approvers_deployment`] and a call of `pay_send` by `claude`
/// parked in it.
struct ParkedPay {
    upstream: airlock_testkit::RawServer,
    base: String,
    id: String,
    _dir: tempfile::TempDir,
}

async fn parked_pay(admins: &[(&str, &str)], approvers: &str) -> ParkedPay {
    let upstream = airlock_testkit::RawServer::start(
        Some("no-such-method"),
        airlock_testkit::Cue::Status(200),
    )
    .await;
    let dir = approvers_deployment(upstream.port, admins, approvers);
    let base = start(dir.path()).await;
    let parked = call(&base, CLAUDE, "pay_send", json!({})).await;
    let id = parked["structuredContent"]["invocation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    ParkedPay {
        upstream,
        base,
        id,
        _dir: dir,
    }
}

/// `token`'s approval of `id` over the API: (status, body).
async fn approve_as(base: &str, id: &str, token: &str) -> (u16, serde_json::Value) {
    let answer = reqwest::Client::new()
        .post(format!("{base}/v1/invocations/{id}/approve"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap())
}

/// Waits (bounded) until `upstream` has seen a request; how many it saw.
async fn requests_seen(upstream: &airlock_testkit::RawServer) -> usize {
    for _ in 0..200 {
        if !upstream.seen().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    upstream.seen().len()
}

/// POLICY-65: two slots need two people — a stage waits for the one before it, a decider
/// fills one slot, and the call runs once both are filled.
#[tokio::test]
async fn two_slots_in_stages_need_two_people() {
    let (bob, carol) = ("tok-bob-5e4d3c2b", "tok-carol-1a2b3c4d");
    let slots = "{ stages: true, slots: [ { name: finance, deciders: [alice, bob] }, { name: legal, deciders: [bob, carol] } ] }";
    let ParkedPay {
        upstream,
        base,
        id,
        _dir,
    } = parked_pay(&[("bob", bob), ("carol", carol)], slots).await;
    let (status, body) = approve_as(&base, &id, carol).await;
    assert_eq!(status, 409, "legal waits for finance: {body}");
    assert!(body.to_string().contains("stage"), "{body}");
    let (status, body) = approve_as(&base, &id, bob).await;
    assert_eq!(
        (status, body["state"].as_str()),
        (200, Some("awaiting_approval")),
        "{body}"
    );
    let (status, body) = approve_as(&base, &id, bob).await;
    assert_eq!(status, 409, "one person, one slot: {body}");
    assert_eq!(upstream.seen().len(), 0);
    let (status, body) = approve_as(&base, &id, carol).await;
    assert_eq!(
        (status, body["state"].as_str()),
        (200, Some("approved")),
        "{body}"
    );
    assert_eq!(body["decision"]["by"], "bob, carol", "{body}");
    assert_eq!(requests_seen(&upstream).await, 1, "run once");
}

/// POLICY-61: an `approval: caller` tool that names its approvers is theirs to approve — the
/// person at the MCP client is not asked to confirm the call.
#[tokio::test]
async fn a_caller_tool_with_approvers_is_not_confirmed_by_its_caller() {
    let upstream = airlock_testkit::RawServer::start(
        Some("no-such-method"),
        airlock_testkit::Cue::Status(200),
    )
    .await;
    let dir = approvers_deployment(upstream.port, &[], "{ quorum: 1, deciders: [alice] }");
    let pay = dir.path().join("apis/pay.yml");
    let caller = std::fs::read_to_string(&pay)
        .unwrap()
        .replace("approval: always", "approval: caller");
    std::fs::write(&pay, caller).unwrap();
    let base = start(dir.path()).await;
    let params = json!({"name": "pay_send", "arguments": {}});
    let url = format!("{base}/mcp");
    let reply =
        crate::support::modern_tools_call(&url, CLAUDE, params, json!({"elicitation": {}})).await;
    let result = &reply["result"];
    assert_ne!(result["resultType"], "input_required", "{reply}");
    assert_eq!(
        result["structuredContent"]["status"], "awaiting_approval",
        "{reply}"
    );
}
