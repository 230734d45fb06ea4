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
    for name in ["ask_human", "billing_get_invoice", "billing_refund"] {
        assert!(names.contains(&name), "{name} not in {names:?}");
    }
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
