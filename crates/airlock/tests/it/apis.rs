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
