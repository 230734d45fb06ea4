//! `airlock check`: tables on success, every error and a non-zero exit on failure, offline.

use crate::support::deployment_with;
use serde_json::json;

use crate::{airlock, examples, text};

#[test]
fn quickstart_passes_and_prints_each_scope() {
    let out = airlock()
        .arg("check")
        .arg(examples().join("quickstart"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("gateway (/mcp)  digest "));
    assert!(stdout.contains("agent support (/agents/support/mcp)  digest "));
    assert!(
        stdout.contains(
            "erp_cliente_crear_pedido    api      never     at_most_once  propose  60/60s"
        ),
        "{stdout}"
    );
    assert!(
        !stdout.contains("connection crm"),
        "the quickstart loads no connection file: {stdout}"
    );
    assert!(
        stdout.contains("fetch      builtin  always"),
        "a tool waits for a person: {stdout}"
    );
}

#[test]
fn check_names_a_connection_file() {
    let dir = deployment_with(
        "[credentials]\nfile = \"creds.yml\"\n",
        "crm:\n  mcp_token: t\n",
    );
    std::fs::create_dir(dir.path().join("connections")).unwrap();
    std::fs::copy(
        examples().join("quickstart/optional/crm.yml"),
        dir.path().join("connections/crm.yml"),
    )
    .unwrap();
    let out = airlock().arg("check").arg(dir.path()).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("connection crm: tools crm__* are discovered at boot (approval once, effect at_most_once)"), "{stdout}");
}

#[test]
fn quickstart_json_lists_tools() {
    let out = airlock()
        .args(["check", "--json"])
        .arg(examples().join("quickstart"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(
        v["scopes"][2]["tools"][1]["name"],
        "erp_cliente_crear_pedido"
    );
    assert_eq!(v["scopes"][2]["tools"][1]["mode"], "propose");
}

#[test]
fn invalid_fails_listing_every_error() {
    let out = airlock()
        .arg("check")
        .arg(examples().join("invalid"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    let golden = std::fs::read_to_string(examples().join("invalid/expected-errors.txt")).unwrap();
    for line in golden.lines() {
        assert!(stderr.contains(line), "missing from output: {line}");
    }
    assert!(stderr.starts_with(&format!("{} problems in ", golden.lines().count())));
}

/// Loading makes no network system call at all (no socket, no DNS), proven with strace.
#[test]
fn check_does_no_network_io() {
    let strace = std::path::Path::new("/usr/bin/strace");
    if !strace.exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "strace is required in CI (.ci/run installs it)"
        );
        eprintln!("strace not installed; skipping outside CI");
        return;
    }
    let log = tempfile::NamedTempFile::new().unwrap();
    let out = std::process::Command::new(strace)
        .args([
            "-f",
            "-qq",
            "-e",
            "trace=%network",
            "-e",
            "signal=none",
            "-o",
        ])
        .arg(log.path())
        .arg(env!("CARGO_BIN_EXE_airlock"))
        .arg("check")
        .arg(examples().join("quickstart"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let calls = std::fs::read_to_string(log.path()).unwrap();
    let network: Vec<&str> = calls
        .lines()
        .filter(|l| !l.contains("exited with") && !l.trim().is_empty())
        .collect();
    assert!(
        network.is_empty(),
        "network syscalls during check: {network:#?}"
    );
}

/// POLICY-13: `confirm:` on an api or mcp tool is not read there; the deployment loads, and
/// the warning names the file, the line and the key — in the text output and in `--json`.
#[test]
fn confirm_on_an_api_tool_is_a_warning_naming_its_line() {
    let toml = "[connections.erp_main]\nbase_url = \"https://erp.example.com\"\n";
    let dir = deployment_with(toml, "");
    std::fs::create_dir(dir.path().join("agents")).unwrap();
    let manifest = "apiVersion: airlock/v1\nkind: Agent\nmetadata:\n  name: erp\nspec:\n  model: { provider: openai, model: gpt-4o-mini }\n  prompts: { system: test }\n  tools:\n    - name: erp-cliente\n      type: api\n      connection: erp_main\n      auth: { scheme: bearer }\n      confirm: true\n      operations:\n        - name: buscar\n          description: Find.\n          writes: false\n          request: { method: GET, path: /clientes }\n";
    std::fs::write(dir.path().join("agents/erp.yml"), manifest).unwrap();
    let expected =
        "agents/erp.yml:13:7: spec.tools[0].confirm: `confirm` is not read on `type: api` tools";

    let out = airlock().arg("check").arg(dir.path()).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains(&format!("warning: {expected}")), "{stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("erp_cliente_buscar"), "{stdout}");

    let out = airlock()
        .args(["check", "--json"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], true);
    let warning = &v["warnings"][0];
    assert_eq!(
        (&warning["file"], &warning["line"], &warning["key"]),
        (
            &json!("agents/erp.yml"),
            &json!(13),
            &json!("spec.tools[0].confirm")
        ),
        "{v}"
    );
}
