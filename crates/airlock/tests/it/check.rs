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
    let support = v["scopes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["scope"] == "agent support (/agents/support/mcp)")
        .unwrap();
    assert_eq!(support["tools"][1]["name"], "erp_cliente_crear_pedido");
    assert_eq!(support["tools"][1]["mode"], "propose");
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
        airlock_testkit::skip(airlock_testkit::Needs::Strace);
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
    let manifest = "apiVersion: airlock/v1\nkind: Agent\nmetadata:\n  name: erp\nspec:\n  model: { provider: openai, model: gpt-4o-mini }\n  prompts: { system: test }\n  tools:\n    - name: erp-cliente\n      type: api\n      connection: erp_main\n      auth: { scheme: none }\n      confirm: true\n      operations:\n        - name: buscar\n          description: Find.\n          writes: false\n          request: { method: GET, path: /clientes }\n";
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

/// DECL-38: what boot or a call would refuse, `check` refuses offline, each at file:line:key.
#[test]
fn check_reports_missing_credentials_and_blocked_urls_offline() {
    let dir = deployment_with(
        "[[mcp.tokens]]\ncredential = \"airlock.mcp_token\"\nprincipal = \"cc\"\n\n\
         [connections.erp]\nbase_url = \"http://10.0.0.5/\"\n\n\
         [connections.svc]\nbase_url = \"https://svc.internal/\"\ncredential = \"svc.token\"\n\n\
         [credentials]\nfile = \"creds.yml\"\n",
        "airlock:\n  mcp_token: t\n",
    );
    let out = airlock()
        .arg("check")
        .arg(dir.path())
        .env_remove("AIRLOCK_CREDENTIALS__SVC__TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.starts_with("3 problems in "), "{stderr}");
    assert!(
        stderr.contains("airlock.toml:6:1: connections.erp.base_url: the egress guard refuses `http://10.0.0.5/` (blocked_address)"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "airlock.toml:10:1: connections.svc.credential: credential `svc.token` is missing"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("airlock.toml:9:1: connections.svc.base_url: the egress guard refuses `https://svc.internal/` (blocked_name)"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("mcp_token"),
        "a resolved path is not reported: {stderr}"
    );
}

/// DECL-38: the deployment's `[egress]` allowances and the environment count, as at boot; a
/// connection file's URL and credential are checked too.
#[test]
fn check_honours_egress_allowances_and_env_credentials() {
    let dir = deployment_with(
        "[egress]\nallow = [\"10.0.0.0/8\", \"svc.internal\"]\n\n\
         [connections.erp]\nbase_url = \"http://10.0.0.5/\"\nuse_egress_allow = true\n\n\
         [connections.svc]\nbase_url = \"https://svc.internal/\"\ncredential = \"svc.token\"\nuse_egress_allow = true\n",
        "",
    );
    std::fs::create_dir(dir.path().join("connections")).unwrap();
    std::fs::write(
        dir.path().join("connections/crm.yml"),
        "url: https://crm.internal/mcp\nauth: { type: bearer, credential: crm.token }\n",
    )
    .unwrap();
    let run = |env: &[(&str, &str)]| {
        airlock()
            .arg("check")
            .arg(dir.path())
            .envs(env.iter().copied())
            .output()
            .unwrap()
    };
    let out = run(&[("AIRLOCK_CREDENTIALS__SVC__TOKEN", "s")]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.starts_with("2 problems in "), "{stderr}");
    assert!(
        stderr.contains("connections/crm.yml:1:1: url: the egress guard refuses"),
        "{stderr}"
    );
    assert!(stderr.contains("connections/crm.yml:2:"), "{stderr}");
    std::fs::write(
        dir.path().join("airlock.toml"),
        "[egress]\nallow = [\"10.0.0.0/8\", \"svc.internal\", \"crm.internal\"]\n\n\
         [connections.erp]\nbase_url = \"http://10.0.0.5/\"\nuse_egress_allow = true\n\n\
         [connections.svc]\nbase_url = \"https://svc.internal/\"\ncredential = \"svc.token\"\nuse_egress_allow = true\n",
    )
    .unwrap();
    let env = [
        ("AIRLOCK_CREDENTIALS__SVC__TOKEN", "s"),
        ("AIRLOCK_CREDENTIALS__CRM__TOKEN", "c"),
    ];
    let out = run(&env);
    assert!(out.status.success(), "{}", text(&out));
    // EGRESS-38: `allow` covers the operator's own destinations; a tenant connection the
    // operator did not vouch for reaches public addresses only, and check says so.
    std::fs::write(
        dir.path().join("airlock.toml"),
        "[egress]\nallow = [\"10.0.0.0/8\", \"svc.internal\", \"crm.internal\"]\n\n\
         [connections.erp]\nbase_url = \"http://10.0.0.5/\"\n\n\
         [connections.svc]\nbase_url = \"https://svc.internal/\"\ncredential = \"svc.token\"\nuse_egress_allow = true\n",
    )
    .unwrap();
    let out = run(&env);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.starts_with("1 problem in "), "{stderr}");
    assert!(
        stderr.contains("connections.erp.base_url: the egress guard refuses `http://10.0.0.5/`")
            && stderr.contains("use_egress_allow = true"),
        "{stderr}"
    );
}

/// DECL-38: an encrypted credentials file without its key is said once, not per credential.
#[test]
fn check_says_once_that_the_credentials_cannot_be_opened() {
    let dir = deployment_with(
        "[[mcp.tokens]]\ncredential = \"a.one\"\nprincipal = \"p\"\n\n\
         [[admin.tokens]]\ncredential = \"a.two\"\nprincipal = \"q\"\n",
        "",
    );
    let sealed = airlock_spec::MasterKey::generate()
        .encrypt("a:\n  one: x\n  two: y\n")
        .unwrap();
    std::fs::write(dir.path().join("credentials.yml.enc"), sealed).unwrap();
    let out = airlock()
        .args(["check", "--json"])
        .arg(dir.path())
        .env_remove("AIRLOCK_MASTER_KEY")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let errors = v["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{v}");
    assert_eq!(errors[0]["file"], "credentials.yml.enc");
    assert!(
        errors[0]["reason"].as_str().unwrap().contains("master key"),
        "{v}"
    );
}

/// POLICY-57: `check` lists each tool's declared limits, in text and in JSON.
#[test]
fn check_lists_each_tools_limits() {
    let dir = crate::support::deployment_with(
        "[connections.billing]\nbase_url = \"https://billing.example.com\"\n",
        "airlock: {}\n",
    );
    std::fs::create_dir(dir.path().join("apis")).unwrap();
    let pay = "name: pay\nconnection: billing\nauth: { scheme: none }\nlimits:\n  - { name: daily, sum: /amount, unit: EUR, max: 100, per: 1d, by: principal, over: approval }\noperations:\n  - name: send\n    description: Send money.\n    writes: false\n    request: { method: GET, path: /pay }\n";
    std::fs::write(dir.path().join("apis/pay.yml"), pay).unwrap();
    let out = airlock()
        .arg("check")
        .arg(dir.path())
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let tools = v["scopes"][0]["tools"].as_array().unwrap();
    let pay = tools.iter().find(|t| t["name"] == "pay_send").unwrap();
    let expected = "daily sum /amount 100 EUR/86400s per principal, over: approval";
    assert_eq!(pay["limits"], expected);
    let text = airlock().arg("check").arg(dir.path()).output().unwrap();
    assert!(String::from_utf8_lossy(&text.stdout).contains(expected));
}

/// POLICY-51: once the deployment has a ledger, `check` lists the freezes in force beside the
/// declarations, in text and in JSON; before, it says nothing of them.
#[test]
fn check_lists_the_freezes_in_force() {
    let dir = crate::support::deployment_with("", "airlock: {}\n");
    let json = |dir: &std::path::Path| -> serde_json::Value {
        let out = airlock()
            .args(["check", "--json", "--dir"])
            .arg(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    assert_eq!(json(dir.path())["freezes"], serde_json::Value::Null);
    assert!(
        !dir.path().join("airlock.sqlite").exists(),
        "check creates no ledger"
    );
    let out = airlock()
        .args([
            "freeze",
            "tool",
            "pay",
            "--reason",
            "incident 7",
            "--as",
            "ops",
            "--dir",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let freezes = json(dir.path())["freezes"].clone();
    assert_eq!(freezes.as_array().map(Vec::len), Some(1), "{freezes}");
    assert_eq!(
        (
            &freezes[0]["kind"],
            &freezes[0]["name"],
            &freezes[0]["reason"]
        ),
        (&json!("tool"), &json!("pay"), &json!("incident 7"))
    );
    let out = airlock().arg("check").arg(dir.path()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("frozen: tool `pay` by ops at ") && stdout.contains(": incident 7"),
        "{stdout}"
    );
}
