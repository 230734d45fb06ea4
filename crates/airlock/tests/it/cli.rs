//! The command line's conventions (docs/rules.md OPS-7, OPS-8, OPS-10): one way to find the
//! deployment, read-only commands that never create a ledger, `--as` only where something is
//! recorded, `--json` on data commands, documented exit codes, no panic on a closed pipe.

use std::path::Path;
use std::process::Output;

use airlock::boot::boot;
use airlock_spec::ScopeId;
use serde_json::{Value, json};

use crate::serve::deployment;
use crate::support::{cli, park};
use crate::{airlock, examples, text};

/// The files in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// `airlock ARGS…` run in `cwd` with no `$AIRLOCK_DIR`.
fn run_in(cwd: &Path, args: &[&str]) -> Output {
    airlock()
        .args(args)
        .current_dir(cwd)
        .env_remove("AIRLOCK_DIR")
        .env("USER", "alice")
        .output()
        .unwrap()
}

const READ_ONLY: &[&[&str]] = &[
    &["approvals", "list"],
    &[
        "invocations",
        "show",
        "0190a4b2-5d6e-7f00-8000-000000000001",
    ],
    &["audit", "verify"],
];

#[test]
fn read_only_commands_refuse_a_folder_without_airlock_toml_and_create_nothing() {
    let empty = tempfile::tempdir().unwrap();
    for args in READ_ONLY {
        let out = cli(empty.path(), args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", text(&out));
        assert!(
            text(&out).contains("airlock.toml"),
            "{args:?}: {}",
            text(&out)
        );
        // Nothing given: the current directory counts only when it holds airlock.toml.
        let out = run_in(empty.path(), args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", text(&out));
        let said = text(&out);
        assert!(
            said.contains("airlock.toml") && said.contains("AIRLOCK_DIR"),
            "{args:?}: {said}"
        );
    }
    assert!(
        listing(empty.path()).is_empty(),
        "{:?}",
        listing(empty.path())
    );
}

#[test]
fn read_only_commands_never_create_the_ledger_of_a_deployment() {
    let dir = deployment();
    let before = listing(dir.path());
    for args in READ_ONLY {
        let out = cli(dir.path(), args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", text(&out));
        assert!(
            text(&out).contains("no ledger at"),
            "{args:?}: {}",
            text(&out)
        );
    }
    let out = cli(
        dir.path(),
        &["approve", "0190a4b2-5d6e-7f00-8000-000000000001"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(listing(dir.path()), before, "no ledger file appears");
}

#[test]
fn the_deployment_is_found_by_dir_then_airlock_dir_then_the_current_directory() {
    let dir = deployment();
    let elsewhere = tempfile::tempdir().unwrap();
    let out = airlock()
        .args(["credentials", "show-paths"])
        .current_dir(elsewhere.path())
        .env("AIRLOCK_DIR", dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "airlock.admin");
    let out = run_in(dir.path(), &["credentials", "show-paths", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let paths: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(paths, json!(["airlock.admin"]));
    // A mistyped $AIRLOCK_DIR is named as such, never replaced by the current directory.
    let out = airlock()
        .args(["check"])
        .current_dir(dir.path())
        .env("AIRLOCK_DIR", elsewhere.path().join("typo"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("typo") && text(&out).contains("$AIRLOCK_DIR"),
        "{}",
        text(&out)
    );
    // `--dir` works for check and serve too; the argument is kept as a shorthand.
    let out = airlock()
        .args(["check", "--dir"])
        .arg(examples().join("quickstart"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn check_and_serve_name_a_missing_folder() {
    let missing = tempfile::tempdir()
        .unwrap()
        .path()
        .join("no-such-deployment");
    for command in ["check", "serve"] {
        let out = airlock().arg(command).arg(&missing).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{command}: {}", text(&out));
        let said = text(&out);
        assert!(
            said.contains("no-such-deployment") && said.contains("does not exist"),
            "{command}: {said}"
        );
        assert!(!said.contains("SQLite"), "{command}: {said}");
    }
    assert!(!missing.exists());
}

#[test]
fn as_is_refused_where_nothing_is_decided() {
    let dir = deployment();
    for args in READ_ONLY {
        let mut args = args.to_vec();
        args.extend(["--as", "mallory"]);
        let out = cli(dir.path(), &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(text(&out).contains("--as"), "{args:?}: {}", text(&out));
    }
}

#[tokio::test]
async fn data_commands_print_json_and_decisions_use_the_api_spelling() {
    let dir = deployment();
    let d = dir.path();
    let gateway = boot(d).await.unwrap().gateway;
    let fetch = park(
        &gateway,
        ScopeId::Gateway,
        "bob",
        "fetch",
        json!({"url": "http://127.0.0.1:9/"}),
    )
    .await;
    let id = fetch.id.to_string();
    let json_of = |args: &[&str]| -> Value {
        let out = cli(d, args);
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let listed = json_of(&["approvals", "list", "--json"]);
    assert_eq!(listed["approvals"][0]["id"], id.as_str(), "{listed}");
    assert_eq!(listed["approvals"][0]["state"], "awaiting_approval");
    let shown = json_of(&["invocations", "show", &id, "--json"]);
    assert_eq!(shown["tool"], "fetch", "{shown}");
    let verified = json_of(&["audit", "verify", "--json"]);
    assert_eq!(verified["intact"], true, "{verified}");
    let decided = json_of(&["deny", &id, "--reason", "not today", "--json"]);
    assert_eq!(decided["state"], "denied", "{decided}");
    assert_eq!(decided["decision"]["by"], "alice", "{decided}");
    // The documented spelling is the API's.
    let help = cli(d, &["resolve", "--help"]);
    assert!(
        String::from_utf8_lossy(&help.stdout).contains("did_not_run"),
        "{}",
        text(&help)
    );
}

/// `airlock call` in `dir` (where `fetch` waits for a person) as `carol`.
fn call(dir: &Path, tool: &str, arguments: &str) -> Output {
    airlock()
        .args(["call", tool, "--args", arguments, "--dir"])
        .arg(dir)
        .env("USER", "carol")
        .output()
        .unwrap()
}

#[test]
fn call_exits_with_a_code_per_outcome() {
    let dir = deployment();
    let out = call(dir.path(), "fetch", r#"{"url":"http://127.0.0.1:9/"}"#);
    assert_eq!(out.status.code(), Some(4), "parked: {}", text(&out));
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed["state"], "awaiting_approval", "{printed}");
    let out = call(dir.path(), "ask_human", r#"{"question":5}"#);
    assert_eq!(out.status.code(), Some(5), "failed call: {}", text(&out));
    let out = call(dir.path(), "no_such_tool", "{}");
    assert_eq!(
        out.status.code(),
        Some(1),
        "the command's error: {}",
        text(&out)
    );
    // A usage error, as the exit-code table says (OPS-6).
    let out = call(dir.path(), "fetch", "not json");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

#[test]
fn call_without_an_identity_records_nothing() {
    let dir = deployment();
    let before = listing(dir.path());
    let out = airlock()
        .args([
            "call",
            "ask_human",
            "--args",
            r#"{"question":"q"}"#,
            "--dir",
        ])
        .arg(dir.path())
        .env_remove("USER")
        .env_remove("LOGNAME")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("--as NAME"), "{}", text(&out));
    assert_eq!(listing(dir.path()), before, "nothing was recorded");
}

/// POLICY-52, LEDGER-48: nobody is recorded under the names airlock keeps for itself — a name
/// with a space is refused before anything is written.
#[test]
fn a_name_with_a_space_is_refused_and_nothing_is_recorded() {
    let dir = deployment();
    let before = listing(dir.path());
    for name in ["airlock freeze", "access policy"] {
        let out = airlock()
            .args([
                "call",
                "ask_human",
                "--args",
                r#"{"question":"q"}"#,
                "--as",
                name,
                "--dir",
            ])
            .arg(dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(text(&out).contains("a name is one word"), "{}", text(&out));
    }
    assert_eq!(listing(dir.path()), before, "nothing was recorded");
}

#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = airlock()
        .args(["check", "--json", "--dir"])
        .arg(examples().join("quickstart"))
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

#[test]
fn version_and_completions() {
    let out = airlock().arg("--version").output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("airlock {}", env!("CARGO_PKG_VERSION"))
    );
    for shell in ["bash", "zsh", "fish"] {
        let out = airlock().args(["completions", shell]).output().unwrap();
        assert!(out.status.success(), "{shell}: {}", text(&out));
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(
            script.contains("airlock") && script.contains("approvals"),
            "{shell}: {script}"
        );
    }
    let out = airlock().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// OPS-6: `--args` that is not a JSON object is a usage error (exit 2) naming the flag, before
/// any deployment is read.
#[test]
fn call_with_malformed_args_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    for bad in ["{", "[1, 2]", "7"] {
        let out = cli(dir.path(), &["call", "any_tool", "--args", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", text(&out));
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.contains("--args must be a JSON object"), "{said}");
    }
}
