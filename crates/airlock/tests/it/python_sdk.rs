//! A real client: the official MCP Python SDK (PyPI `mcp`, pinned in `tests/python`) lists
//! tools, calls an ungated tool, calls a gated one, has it approved over the API and awaits the
//! result. Needs the venv that `.ci/run` installs; skipped without it outside CI.

use std::path::PathBuf;

use airlock_testkit::Needs;
use serde_json::Value;

use crate::support::{deployment_with, hello_upstream, installed, serve_in_process};

const ADMIN: &str = "admin-5d41402abc4b2a76b9719d911017c592";
const CLAUDE: &str = "mcp-7d793037a0760186574b0282f2f435e7";

const READER: &str = "apiVersion: airlock/v1\nkind: Agent\nmetadata:\n  name: reader\nspec:\n  model:\n    provider: openai\n    model: gpt-4o-mini\n  prompts:\n    system: Read pages.\n  tools:\n    - type: builtin\n      name: fetch\n";

fn python_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python")
}

#[tokio::test]
async fn the_python_sdk_lists_calls_and_awaits_an_approved_call() {
    let dir = python_dir();
    let python = dir.join(".venv/bin/python");
    if !installed(&python, Needs::PythonSdk) {
        return;
    }
    let toml = "[[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"alice\"\n[[mcp.tokens]]\ncredential = \"airlock.claude\"\nprincipal = \"claude\"\n[egress]\nallow = [\"127.0.0.1/32\"]\nallow_fetch = true\n[credentials]\nfile = \"creds.yml\"\n[builtins.fetch]\napproval = \"always\"\n";
    let deployment = deployment_with(
        toml,
        &format!("airlock:\n  admin: {ADMIN}\n  claude: {CLAUDE}\n"),
    );
    std::fs::create_dir(deployment.path().join("agents")).unwrap();
    std::fs::write(deployment.path().join("agents/reader.yml"), READER).unwrap();
    let (addr, _) = serve_in_process(deployment.path()).await;
    let base = format!("http://127.0.0.1:{}", addr.port());
    let page = format!("http://{}/", hello_upstream().await);

    let out = tokio::process::Command::new(&python)
        .arg(dir.join("client.py"))
        .args([
            format!("{base}/mcp"),
            format!("{base}/agents/reader/mcp"),
            CLAUDE.to_owned(),
            ADMIN.to_owned(),
            page,
        ])
        .output()
        .await
        .unwrap();
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{log}");
    let summary: Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    let tools = summary["tools"].as_array().unwrap();
    assert!(
        tools.contains(&"fetch".into()) && tools.contains(&"airlock_await_decision".into()),
        "{summary}"
    );
    assert_eq!(summary["ungated"]["is_error"], false, "{summary}");
    assert_eq!(summary["ungated"]["body"], "hello", "{summary}");
    assert_eq!(
        summary["parked"]["status"], "awaiting_approval",
        "{summary}"
    );
    assert_eq!(summary["approve_status"], 200, "{summary}");
    assert_eq!(summary["awaited"]["is_error"], false, "{summary}");
    assert_eq!(summary["awaited"]["status"], "completed", "{summary}");
    assert_eq!(summary["awaited"]["decided_by"], "alice", "{summary}");
    assert_eq!(summary["awaited"]["body"], "hello", "{summary}");
}
