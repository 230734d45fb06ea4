//! `airlock audit export` on both backends (docs/rules.md OPS-83 … OPS-85, DECL-90,
//! LEDGER-80): stable ids, the same lines however often the ledger is exported, appending only
//! what a file lacks, and arguments only when the operator opted in.

use std::path::Path;

use airlock::boot::boot;
use airlock_spec::ScopeId;
use serde_json::{Value, json};

use crate::replicas::fresh_database;
use crate::serve::ADMIN;
use crate::support::{self, cli, deployment_with};
use crate::text;

/// An argument of the parked call: exported only with `include_arguments`.
const ARGUMENT: &str = "argument-marker-5e0c";
/// The reason of the denial: exported only with `include_arguments`.
const REASON: &str = "reason-marker-77d1";

/// A deployment on `database` (`None`: its SQLite file), `fetch` gated, with `extra` appended.
fn deployment(database: Option<&str>, extra: &str) -> tempfile::TempDir {
    let database = database
        .map(|url| format!("database_url = \"{url}\"\n"))
        .unwrap_or_default();
    let toml = format!(
        "{database}[[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"alice\"\n[egress]\nallow = [\"127.0.0.1/32\"]\nallow_fetch = true\n[credentials]\nfile = \"creds.yml\"\n[builtins.fetch]\napproval = \"always\"\n{extra}"
    );
    deployment_with(&toml, &format!("airlock:\n  admin: {ADMIN}\n"))
}

/// Runs `airlock ARGS… --dir dir` and asserts it succeeded; its standard output.
fn ok(dir: &Path, args: &[&str]) -> String {
    let out = cli(dir, args);
    assert!(out.status.success(), "{args:?}: {}", text(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// A call parked and denied with a reason, and a freeze: the events every export shows.
async fn history(dir: &Path) -> String {
    let gateway = boot(dir).await.unwrap().gateway;
    let url = format!("http://127.0.0.1:9/?q={ARGUMENT}");
    let row = support::park(
        &gateway,
        ScopeId::Gateway,
        "bob",
        "fetch",
        json!({"url": url}),
    )
    .await;
    let id = row.id.to_string();
    ok(dir, &["deny", &id, "--reason", REASON]);
    ok(dir, &["freeze", "tool", "fetch", "--reason", REASON]);
    id
}

fn events(text: &str) -> Vec<Value> {
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// OPS-83 … OPS-85 on `database`: a replay yields the same ids and lines, appending adds only
/// new events, and arguments appear only when opted in.
async fn exports(database: Option<&str>) {
    let dir = deployment(database, "");
    let d = dir.path();
    let id = history(d).await;

    let printed = ok(d, &["audit", "export", "--to", "-"]);
    let (first, second) = (d.join("first.jsonl"), d.join("second.jsonl"));
    let said = ok(d, &["audit", "export", "--to", first.to_str().unwrap()]);
    assert!(said.contains("already there"), "{said}");
    ok(d, &["audit", "export", "--to", second.to_str().unwrap()]);
    let exported = std::fs::read_to_string(&first).unwrap();
    assert_eq!(exported, std::fs::read_to_string(&second).unwrap());
    assert_eq!(
        exported, printed,
        "the same lines to a file and to standard output"
    );

    let lines = events(&exported);
    let ids: std::collections::HashSet<_> = lines.iter().map(|e| e["id"].clone()).collect();
    assert_eq!(ids.len(), lines.len(), "ids are unique: {exported}");
    let of_call: Vec<_> = lines.iter().filter(|e| e["entity_id"] == id).collect();
    assert_eq!(of_call[0]["event"], "call_recorded", "{of_call:#?}");
    assert_eq!(of_call[0]["call"]["tool"], "fetch");
    assert_eq!(of_call[0]["call"]["principal"], "bob");
    let denied = of_call
        .iter()
        .find(|e| e["decision"]["decision"] == "denied")
        .unwrap_or_else(|| panic!("{of_call:#?}"));
    assert_eq!(denied["decision"]["by"], "alice");
    assert_eq!(denied["event"], "call_settled");
    let frozen = lines.iter().find(|e| e["event"] == "freeze").unwrap();
    assert_eq!(frozen["target"], json!({"kind": "tool", "name": "fetch"}));
    assert_eq!(frozen["by"], "alice");
    assert!(
        !exported.contains(ARGUMENT) && !exported.contains(REASON),
        "{exported}"
    );

    // Again into the same file: nothing new; a torn last line is cut and written again.
    let said = ok(d, &["audit", "export", "--to", first.to_str().unwrap()]);
    assert!(said.contains("exported 0 new"), "{said}");
    let torn = &exported[..exported.len() - 10];
    std::fs::write(&first, torn).unwrap();
    let said = ok(d, &["audit", "export", "--to", first.to_str().unwrap()]);
    assert!(said.contains("exported 1 new"), "{said}");
    assert_eq!(std::fs::read_to_string(&first).unwrap(), exported);

    // Opted in, to `[audit.export] file`: the same ids, with the arguments and the reason.
    let toml = d.join("airlock.toml");
    let mut config = std::fs::read_to_string(&toml).unwrap();
    config.push_str("[audit.export]\nfile = \"audit.jsonl\"\ninclude_arguments = true\n");
    std::fs::write(&toml, config).unwrap();
    ok(d, &["audit", "export"]);
    let full = std::fs::read_to_string(d.join("audit.jsonl")).unwrap();
    let full_lines = events(&full);
    let full_ids: std::collections::HashSet<_> =
        full_lines.iter().map(|e| e["id"].clone()).collect();
    assert_eq!(full_ids, ids);
    let recorded = full_lines
        .iter()
        .find(|e| e["entity_id"] == id && e["event"] == "call_recorded")
        .unwrap();
    let url = recorded["call"]["arguments"]["url"].as_str().unwrap();
    assert!(url.contains(ARGUMENT), "{recorded}");
    let denied = full_lines
        .iter()
        .find(|e| e["decision"]["decision"] == "denied")
        .unwrap();
    assert_eq!(denied["decision"]["reason"], REASON);
}

/// OPS-83 … OPS-85 on SQLite.
#[tokio::test]
async fn an_export_replayed_yields_the_same_ids_and_lines_on_sqlite() {
    exports(None).await;
}

/// OPS-83 … OPS-85 on PostgreSQL (skipped without `AIRLOCK_TEST_DATABASE_URL`).
#[tokio::test]
async fn an_export_replayed_yields_the_same_ids_and_lines_on_postgres() {
    let Some(database) = fresh_database().await else {
        return;
    };
    exports(Some(&database)).await;
}

/// DECL-90: `[audit.export]` refuses unknown keys and a non-boolean `include_arguments`;
/// without a file, the command names both ways to give one.
#[test]
fn audit_export_settings_are_checked() {
    let dir = deployment(
        None,
        "[audit.export]\ninclude_arguments = \"yes\"\nfiles = \"x\"\n",
    );
    let out = cli(dir.path(), &["audit", "export"]);
    assert!(!out.status.success());
    let said = text(&out);
    assert!(said.contains("audit.export.include_arguments"), "{said}");
    assert!(said.contains("files"), "{said}");
    let dir = deployment(None, "");
    let out = cli(dir.path(), &["audit", "export"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("--to FILE"), "{}", text(&out));
}
