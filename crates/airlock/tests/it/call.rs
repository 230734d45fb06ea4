//! `airlock call`: an api tool through the gateway and the guard, against a loopback upstream.

use crate::support::{deployment_with, json_once};
use crate::{airlock, text};

fn deployment(port: u16) -> tempfile::TempDir {
    let toml = format!(
        "[egress]\nallow = [\"127.0.0.1/32\"]\n[connections.erp]\nuse_egress_allow = true\nbase_url = \"http://127.0.0.1:{port}/api\"\ncredential = \"erp.token\"\n[credentials]\nfile = \"creds.yml\"\n"
    );
    let dir = deployment_with(
        &toml,
        "erp:\n  token: tok-cli-3b5d5c3712955042212316173ccf37be\n",
    );
    std::fs::create_dir(dir.path().join("agents")).unwrap();
    let agent = "apiVersion: airlock/v1\nkind: Agent\nmetadata: { name: erp-agent }\nspec:\n  model: { provider: openai, model: m }\n  prompts: { system: s }\n  tools:\n    - name: erp\n      type: api\n      connection: erp\n      auth: { scheme: bearer }\n      operations:\n        - name: cliente\n          description: Find a customer.\n          writes: false\n          parameters: { cuit: { type: string, required: true }, limit: { type: integer, default: 25 } }\n          request: { method: GET, path: '/clientes/{cuit}', query: { limit: '{limit}' } }\n          response: { select: data.name }\n";
    std::fs::write(dir.path().join("agents/erp-agent.yml"), agent).unwrap();
    dir
}

#[test]
fn an_api_tool_runs_through_the_ledger_and_the_guard() {
    let (port, head) = json_once(r#"{"data":{"name":"ACME SA"}}"#);
    let dir = deployment(port);
    let out = airlock()
        .args([
            "call",
            "erp_cliente",
            "--agent",
            "erp-agent",
            "--as",
            "tenant-admin",
            "--args",
            r#"{"cuit":"30-1"}"#,
            "--dir",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed["state"], "succeeded");
    assert_eq!(printed["result"], "ACME SA");
    let head = head.join().unwrap();
    assert!(
        head.starts_with("GET /api/clientes/30-1?limit=25 HTTP/1.1"),
        "{head}"
    );
    assert!(
        !text(&out).contains("tok-cli-3b5d5c3712955042212316173ccf37be"),
        "the credential never shows"
    );
}

#[test]
fn bad_arguments_fail_without_a_request() {
    let dir = deployment(9);
    let out = airlock()
        .args([
            "call",
            "erp_cliente",
            "--agent",
            "erp-agent",
            "--as",
            "tester",
            "--args",
            r#"{"cuit":5}"#,
            "--dir",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    // A failed call (recorded, with a tool error) is 5, not 1: 1 is the command's own error.
    assert_eq!(out.status.code(), Some(5), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("bad_arguments"),
        "{}",
        text(&out)
    );
}
