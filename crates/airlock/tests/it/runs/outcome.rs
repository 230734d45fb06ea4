//! A proposal the caller executes itself (docs/rules.md DECIDE-13, DECIDE-14, AGENT-69): its
//! outcome is recorded once over the decisions API (by an admin, or by the run's own caller) or
//! the CLI, refused (409) once airlock was told to execute it, and read back on the run. The quickstart's offline agent proposes the write.

use std::net::SocketAddr;
use std::path::Path;

use serde_json::{Value, json};

use crate::support::{cli, http, serve_in_process};

const CALLER: &str = "dev-mcp-token-change-me";
const ADMIN: &str = "dev-admin-token-change-me";

/// The quickstart, served in this process.
async fn quickstart() -> (tempfile::TempDir, SocketAddr) {
    let dir = tempfile::tempdir().unwrap();
    crate::quickstart::copy_dir(&crate::examples().join("quickstart"), dir.path());
    let (addr, _) = serve_in_process(dir.path()).await;
    (dir, addr)
}

/// A run of `concierge` that proposes an order: (run id, proposal id).
async fn proposed(addr: SocketAddr) -> (String, String) {
    let body = json!({"input": "Draft an order for me"});
    let (status, run, _) = http(
        addr,
        "POST",
        "/v1/agents/concierge/run",
        Some(CALLER),
        Some(body),
    )
    .await;
    assert_eq!(
        (status, &run["status"]),
        (200, &json!("completed")),
        "{run}"
    );
    let proposal = &run["proposals"][0];
    assert_eq!(proposal["state"], "proposed", "{run}");
    assert!(proposal.get("decision").is_none(), "{run}");
    let id = |v: &Value| v.as_str().unwrap().to_owned();
    (id(&run["run_id"]), id(&proposal["id"]))
}

async fn record(addr: SocketAddr, id: &str, body: Value) -> (u16, Value) {
    let path = format!("/v1/invocations/{id}/record");
    let (status, body, _) = http(addr, "POST", &path, Some(ADMIN), Some(body)).await;
    (status, body)
}

async fn approve(addr: SocketAddr, id: &str) -> (u16, Value) {
    let path = format!("/v1/invocations/{id}/approve");
    let (status, body, _) = http(addr, "POST", &path, Some(ADMIN), None).await;
    (status, body)
}

/// The run's proposal as `GET /v1/runs/{id}` reads it back.
async fn read_back(addr: SocketAddr, run: &str) -> Value {
    let (status, body, _) = http(addr, "GET", &format!("/v1/runs/{run}"), Some(CALLER), None).await;
    assert_eq!(status, 200, "{body}");
    body["proposals"][0].clone()
}

#[tokio::test]
async fn a_caller_records_its_outcome_once_and_the_run_shows_it() {
    let (_dir, addr) = quickstart().await;
    let (run, id) = proposed(addr).await;
    let result = json!({"order": 4711});
    let (status, row) = record(addr, &id, json!({"outcome": "completed", "result": result})).await;
    assert_eq!(status, 200, "{row}");
    assert_eq!(row["state"], "succeeded", "{row}");

    // Exactly once: a second record and a later approval are refused naming the first.
    let again = json!({"outcome": "rejected", "reason": "changed my mind"});
    let (status, refused) = record(addr, &id, again).await;
    assert_eq!(status, 409, "{refused}");
    assert!(refused.to_string().contains("alice"), "{refused}");
    assert_eq!(approve(addr, &id).await.0, 409);

    let proposal = read_back(addr, &run).await;
    assert_eq!(proposal["state"], "succeeded", "{proposal}");
    assert_eq!(proposal["decision"]["decision"], "recorded", "{proposal}");
    assert_eq!(proposal["decision"]["by"], "alice", "{proposal}");
}

#[tokio::test]
async fn a_tool_error_and_a_rejection_are_recorded_and_bad_bodies_refused() {
    let (_dir, addr) = quickstart().await;
    let (run, failed) = proposed(addr).await;
    let error = json!({"outcome": "tool_error", "message": "ERP said 500"});
    assert_eq!(record(addr, &failed, error).await.0, 200);
    let proposal = read_back(addr, &run).await;
    assert_eq!(proposal["state"], "failed", "{proposal}");

    let (run, rejected) = proposed(addr).await;
    let empty = json!({"outcome": "rejected", "reason": "  "});
    assert_eq!(
        record(addr, &rejected, empty).await.0,
        422,
        "a rejection needs a reason"
    );
    let unknown = json!({"outcome": "maybe"});
    assert_eq!(record(addr, &rejected, unknown).await.0, 422);
    let reason = json!({"outcome": "rejected", "reason": "not today"});
    assert_eq!(record(addr, &rejected, reason).await.0, 200);
    let proposal = read_back(addr, &run).await;
    assert_eq!(proposal["state"], "denied", "{proposal}");
    assert_eq!(proposal["decision"]["reason"], "not today", "{proposal}");
}

#[tokio::test]
async fn once_approved_for_airlock_the_caller_cannot_record() {
    let (_dir, addr) = quickstart().await;
    let (_, id) = proposed(addr).await;
    assert_eq!(approve(addr, &id).await.0, 200);
    let done = json!({"outcome": "completed", "result": "ok"});
    let (status, refused) = record(addr, &id, done).await;
    assert_eq!(status, 409, "{refused}");
}

#[tokio::test]
async fn approve_and_record_at_once_exactly_one_wins() {
    let (_dir, addr) = quickstart().await;
    for _ in 0..5 {
        let (_, id) = proposed(addr).await;
        let done = json!({"outcome": "completed", "result": "ok"});
        let (approved, recorded) = tokio::join!(approve(addr, &id), record(addr, &id, done));
        let mut statuses = [approved.0, recorded.0];
        statuses.sort_unstable();
        assert_eq!(statuses, [200, 409], "{approved:?} {recorded:?}");
    }
}

#[test]
fn the_cli_records_an_outcome_once() {
    let dir = tempfile::tempdir().unwrap();
    crate::quickstart::copy_dir(&crate::examples().join("quickstart"), dir.path());
    let id = proposal_from_the_cli(dir.path());
    let recorded = cli(dir.path(), &["record", &id, "--result", "{\"order\": 7}"]);
    assert!(recorded.status.success(), "{}", crate::text(&recorded));
    let out = String::from_utf8_lossy(&recorded.stdout);
    assert!(out.contains("succeeded"), "{out}");
    let again = cli(dir.path(), &["record", &id, "--rejected", "no"]);
    assert_eq!(again.status.code(), Some(1), "{}", crate::text(&again));
    let neither = cli(dir.path(), &["record", &id]);
    assert!(!neither.status.success(), "an outcome is required");
    let shown = cli(dir.path(), &["invocations", "show", &id, "--json"]);
    let row: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(row["state"], "succeeded", "{row}");
}

/// `airlock run concierge` proposing an order; the proposal's id.
fn proposal_from_the_cli(dir: &Path) -> String {
    let run = cli(
        dir,
        &["run", "concierge", "Draft an order for me", "--json"],
    );
    assert_eq!(run.status.code(), Some(0), "{}", crate::text(&run));
    let stdout = String::from_utf8_lossy(&run.stdout);
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    report["proposals"][0]["id"].as_str().unwrap().to_owned()
}

/// Another caller's token, added to the quickstart (principal `mallory`, every scope).
const OTHER: &str = "other-caller-token-1e2d3c4b5a69";

#[tokio::test]
async fn a_runs_caller_records_its_own_proposals_and_no_one_elses() {
    // AGENT-69: `claude-code` (the quickstart's caller) records the outcome of its run's
    // proposal with its own token; `mallory`, another caller, is answered as for a call nobody
    // recorded, whatever it sends.
    let dir = tempfile::tempdir().unwrap();
    crate::quickstart::copy_dir(&crate::examples().join("quickstart"), dir.path());
    let toml = dir.path().join("airlock.toml");
    let mut config = std::fs::read_to_string(&toml).unwrap();
    config.push_str(
        "\n[[mcp.tokens]]\ncredential = \"airlock.other_token\"\nprincipal = \"mallory\"\n",
    );
    std::fs::write(&toml, config).unwrap();
    let creds = dir.path().join("credentials.example.yml");
    let yaml = std::fs::read_to_string(&creds).unwrap();
    let yaml = yaml.replacen(
        "airlock:\n",
        &format!("airlock:\n  other_token: {OTHER}\n"),
        1,
    );
    std::fs::write(&creds, yaml).unwrap();
    let (addr, _) = serve_in_process(dir.path()).await;
    let (run, id) = proposed(addr).await;

    let by = |token: &'static str, id: String, body: Value| async move {
        let path = format!("/v1/invocations/{id}/record");
        let (status, body, _) = http(addr, "POST", &path, Some(token), Some(body)).await;
        (status, body)
    };
    let done = json!({"outcome": "completed", "result": {"order": 7}});
    let nobody = airlock_ledger::InvocationId::new().to_string();
    let (status, unknown) = by(OTHER, nobody.clone(), done.clone()).await;
    assert_eq!(status, 404, "{unknown}");
    let unknown: Value = serde_json::from_str(&unknown.to_string().replace(&nobody, &id)).unwrap();
    for body in [done.clone(), json!({"outcome": "maybe"})] {
        assert_eq!(by(OTHER, id.clone(), body).await, (404, unknown.clone()));
    }
    let path = format!("/v1/invocations/{id}/record");
    let (status, _, _) = http(addr, "POST", &path, None, Some(done.clone())).await;
    assert_eq!(status, 401);

    let (status, row) = by(CALLER, id.clone(), done).await;
    assert_eq!((status, &row["state"]), (200, &json!("succeeded")), "{row}");
    let proposal = read_back(addr, &run).await;
    assert_eq!(proposal["decision"]["decision"], "recorded", "{proposal}");
    assert_eq!(proposal["decision"]["by"], "claude-code", "{proposal}");
}

/// DECIDE-18: a proposal waits for a person where approvals do — listed by `GET /v1/approvals`
/// (alone with `kind=proposal`), by `airlock approvals list --kind proposal`, and in the inbox,
/// whose card approves it; the run reads the person's decision back.
#[tokio::test]
async fn a_proposal_is_listed_for_people_and_approved_in_the_inbox() {
    let (dir, addr) = quickstart().await;
    let (run, id) = proposed(addr).await;
    let listed = |query: &'static str| async move {
        let path = format!("/v1/approvals{query}");
        let (status, body, _) = http(addr, "GET", &path, Some(ADMIN), None).await;
        assert_eq!(status, 200, "{body}");
        let ids: Vec<String> = body["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect();
        ids
    };
    assert_eq!(listed("").await, std::slice::from_ref(&id));
    assert_eq!(listed("?kind=proposal").await, std::slice::from_ref(&id));
    assert!(listed("?kind=approval").await.is_empty());
    let (status, body, _) = http(addr, "GET", "/v1/approvals?kind=maybe", Some(ADMIN), None).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("unknown kind `maybe`"), "{body}");
    let out = cli(
        dir.path(),
        &["approvals", "list", "--kind", "proposal", "--json"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(page["approvals"][0]["state"], "proposed", "{page}");

    let base = format!("http://{addr}");
    let mut inbox = crate::support::inbox_client::InboxClient::signed_in(&base, ADMIN).await;
    let list = inbox.get("/inbox").await;
    assert!(list.body.contains(&id), "{}", list.body);
    let card = format!("/inbox/invocations/{id}");
    let page = inbox.get(&card).await;
    assert!(page.body.contains("Approve and run"), "{}", page.body);
    let csrf = page.field("csrf");
    let done = inbox
        .post(&format!("{card}/approve"), &[("csrf", &csrf)])
        .await;
    assert_eq!(done.status, 303, "{}", done.body);
    let proposal = read_back(addr, &run).await;
    assert_eq!(proposal["decision"]["decision"], "approved", "{proposal}");
    assert_eq!(proposal["decision"]["by"], "alice", "{proposal}");
}
