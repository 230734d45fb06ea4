//! Boot = check (docs/rules.md OPS-70 to OPS-72, DECL-86, DECL-87): what `airlock check`
//! refuses, `airlock serve` refuses with the same problem lines; a tool's `auth` that its
//! connection cannot satisfy is refused by both; a model's key that does not resolve is only a
//! warning.

use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::deployment_with;
use crate::{airlock, text};

/// `airlock serve dir`, which must exit on its own (a refused boot) within a bound; a process
/// still running after it is killed and the test fails.
fn serve_refused(dir: &std::path::Path) -> Output {
    let mut child = airlock()
        .arg("serve")
        .arg(dir)
        .env_remove("AIRLOCK_CREDENTIALS__SVC__TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let bound = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > bound {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!("serve booted a deployment check refuses: {}", text(&out));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn check(dir: &std::path::Path) -> Output {
    airlock()
        .arg("check")
        .arg(dir)
        .env_remove("AIRLOCK_CREDENTIALS__SVC__TOKEN")
        .output()
        .unwrap()
}

/// The problem lines of a refusal: each `file:line:col: key: reason`, indented under the count.
fn problem_lines(out: &Output) -> Vec<String> {
    text(out)
        .lines()
        .filter_map(|l| l.strip_prefix("  "))
        .map(str::to_owned)
        .collect()
}

/// OPS-70: a connection whose credential is missing — `check` refuses it, and `serve`, which
/// booted it silently before, refuses it too with the very same problem line.
#[test]
fn check_and_serve_refuse_a_missing_credential_with_the_same_message() {
    let dir = deployment_with(
        "listen = \"127.0.0.1:0\"\n[connections.svc]\nbase_url = \"https://svc.example.com/\"\ncredential = \"svc.token\"\n[credentials]\nfile = \"creds.yml\"\n",
        "",
    );
    let checked = check(dir.path());
    assert_eq!(checked.status.code(), Some(1), "{}", text(&checked));
    let expected =
        "airlock.toml:4:1: connections.svc.credential: credential `svc.token` is missing";
    let from_check = problem_lines(&checked);
    assert!(
        from_check.iter().any(|l| l.starts_with(expected)),
        "{from_check:?}"
    );
    let served = serve_refused(dir.path());
    assert!(!served.status.success(), "{}", text(&served));
    assert_eq!(problem_lines(&served), from_check, "{}", text(&served));
}

/// DECL-86, DECL-87, OPS-71: `check` refuses a tool that would call a credentialed connection
/// without `auth`, and an `auth` that sends a credential its connection does not have, each at
/// file:line:key, both in one run; `auth: {scheme: none}` passes.
#[test]
fn check_refuses_auth_its_connection_cannot_satisfy() {
    let toml = "[connections.svc]\nbase_url = \"https://svc.example.com/\"\ncredential = \"svc.token\"\n[connections.open]\nbase_url = \"https://open.example.com/\"\n[credentials]\nfile = \"creds.yml\"\n";
    let dir = deployment_with(toml, "svc:\n  token: t\n");
    std::fs::create_dir(dir.path().join("agents")).unwrap();
    let manifest = |auth_svc: &str, auth_open: &str| {
        format!(
            "apiVersion: airlock/v1\nkind: Agent\nmetadata: {{ name: desk }}\nspec:\n  model: {{ provider: openai, model: m }}\n  prompts: {{ system: s }}\n  tools:\n    - name: svc\n      type: mcp\n      connection: svc\n      path: /mcp\n{auth_svc}      tools:\n        - {{ name: t, description: T., writes: false, input_schema: {{ type: object }} }}\n    - name: open\n      type: api\n      connection: open\n      auth: {auth_open}\n      operations:\n        - {{ name: get, description: Get., writes: false, request: {{ method: GET, path: /x }} }}\n"
        )
    };
    let file = dir.path().join("agents/desk.yml");
    std::fs::write(&file, manifest("", "{ scheme: bearer }")).unwrap();
    let refused = check(dir.path());
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    let lines = problem_lines(&refused);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].starts_with("agents/desk.yml:8:7: spec.tools[0].auth: connection `svc` has a credential, but this tool declares no `auth`"),
        "{lines:?}"
    );
    assert!(
        lines[1].starts_with("agents/desk.yml:17:7: spec.tools[1].auth: this `auth` sends connection `open`'s credential")
            && lines[1].contains("names no `credential`"),
        "{lines:?}"
    );
    let fixed = manifest("      auth: { scheme: bearer }\n", "{ scheme: none }");
    std::fs::write(&file, fixed).unwrap();
    let passed = check(dir.path());
    assert!(passed.status.success(), "{}", text(&passed));
}

/// OPS-72: a model key that does not resolve is a warning naming the manifest's line and key;
/// `check` still passes (only a run of that agent needs it).
#[test]
fn check_warns_when_a_model_credential_does_not_resolve() {
    let dir = deployment_with("[credentials]\nfile = \"creds.yml\"\n", "");
    std::fs::create_dir(dir.path().join("agents")).unwrap();
    let manifest = "apiVersion: airlock/v1\nkind: Agent\nmetadata: { name: desk }\nspec:\n  model:\n    provider: openai\n    model: m\n    credential: openai.key\n  prompts: { system: s }\n  tools: []\n";
    std::fs::write(dir.path().join("agents/desk.yml"), manifest).unwrap();
    let out = airlock()
        .arg("check")
        .arg(dir.path())
        .env_remove("AIRLOCK_CREDENTIALS__OPENAI__KEY")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("warning: agents/desk.yml:8:5: spec.model.credential: credential `openai.key` is missing")
            && stderr.contains("a run of this agent fails until it is set"),
        "{stderr}"
    );
}
