//! Decisions from the command line against the deployment's database, and the `serve`
//! worker that runs an approval made there although no client waits for it.

use std::time::Duration;

use airlock::boot::boot;
use airlock_ledger::InvocationState;
use airlock_runtime::Gateway;
use airlock_spec::ScopeId;
use serde_json::{Value, json};

use crate::serve::deployment;
use crate::support::{self, Server, cli, hello_once};
use crate::{airlock, text};

/// Parks `tool` in the gateway scope by `bob`, as a client of the same database would.
async fn park(gateway: &Gateway, tool: &str, arguments: Value) -> airlock_ledger::Invocation {
    support::park(gateway, ScopeId::Gateway, "bob", tool, arguments).await
}

#[tokio::test]
async fn the_cli_lists_decides_and_shows() {
    let dir = deployment();
    let d = dir.path();
    let gateway = boot(d).await.unwrap().gateway;
    let fetch = park(&gateway, "fetch", json!({"url": "http://127.0.0.1:9/"})).await;
    let question = park(
        &gateway,
        "ask_human",
        json!({"question": "Which warehouse?"}),
    )
    .await;
    let (fetch_id, question_id) = (fetch.id.to_string(), question.id.to_string());

    let out = cli(d, &["approvals", "list"]);
    assert!(out.status.success(), "{}", text(&out));
    let listing = String::from_utf8(out.stdout).unwrap();
    assert!(
        listing.contains(&fetch_id) && listing.contains(&question_id),
        "{listing}"
    );
    assert!(
        listing.contains("awaiting_approval") && listing.contains("bob"),
        "{listing}"
    );
    let out = cli(
        d,
        &[
            "approvals",
            "list",
            "--tool",
            "ask_human",
            "--principal",
            "bob",
        ],
    );
    let listing = String::from_utf8(out.stdout).unwrap();
    assert!(
        !listing.contains(&fetch_id) && listing.contains(&question_id),
        "{listing}"
    );

    let out = cli(
        d,
        &["answer", &question_id, "--text", "Rosario", "--as", "dora"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("by dora"),
        "{}",
        text(&out)
    );
    let out = cli(d, &["deny", &fetch_id, "--reason", "not today"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(&format!("denied {fetch_id}")));

    // A second decision is refused naming the first decider (the OS user here).
    let out = cli(d, &["approve", &fetch_id]);
    assert!(!out.status.success());
    assert!(text(&out).contains("alice"), "{}", text(&out));
    let out = cli(
        d,
        &["resolve", &fetch_id, "--outcome", "ran", "--note", "n"],
    );
    assert!(!out.status.success(), "{}", text(&out));

    let out = cli(d, &["invocations", "show", &question_id]);
    assert!(out.status.success(), "{}", text(&out));
    let shown = String::from_utf8(out.stdout).unwrap();
    assert!(shown.contains("state       succeeded"), "{shown}");
    assert!(shown.contains("answered by dora"), "{shown}");
    assert!(shown.contains("Rosario"), "{shown}");
    assert!(
        String::from_utf8(cli(d, &["approvals", "list"]).stdout)
            .unwrap()
            .contains("nothing waits")
    );

    // Without --as and without an OS user, nobody can decide.
    let out = airlock()
        .args(["approve", &fetch_id, "--dir"])
        .arg(d)
        .env_remove("USER")
        .env_remove("LOGNAME")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(text(&out).contains("--as NAME"), "{}", text(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_from_the_cli_runs_in_serve_without_a_waiter() {
    let dir = deployment();
    let d = dir.path();
    let server = Server::start(d, &[]);
    let (upstream, asked) = hello_once().await;
    let gateway = boot(d).await.unwrap().gateway;
    let row = park(
        &gateway,
        "fetch",
        json!({"url": format!("http://{upstream}/")}),
    )
    .await;
    drop(gateway);
    let id = row.id.to_string();

    let out = cli(d, &["approve", &id]);
    assert!(out.status.success(), "{}", text(&out));
    // Nobody awaits the call: serve's worker picks it up.
    tokio::time::timeout(Duration::from_secs(20), asked)
        .await
        .unwrap()
        .unwrap();
    server.await_log(&["executed", &id, "succeeded"], Duration::from_secs(20));
    let out = cli(d, &["invocations", "show", &id]);
    let shown = String::from_utf8(out.stdout).unwrap();
    assert!(shown.contains("state       succeeded"), "{shown}");
    assert!(shown.contains("hello"), "{shown}");
    let store = airlock::boot::open_store(
        &format!("sqlite://{}", d.join("airlock.sqlite").display()),
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    assert_eq!(
        store.get(row.id).await.unwrap().state,
        InvocationState::Succeeded
    );
}

/// DECIDE-10: a decision from the CLI — another process, on SQLite — wakes a client waiting in
/// `airlock_await_decision` on `serve` at once, not at the end of its 25 s window (which would
/// also read the denial: the await is bounded well inside the window, so only a wake-up
/// answers in time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_from_the_cli_wakes_a_client_awaiting_on_serve() {
    let dir = crate::mcp::deployment();
    let d = dir.path();
    let server = Server::start(d, &[]);
    let base = format!("http://{}", server.addr);
    let url = crate::mcp::page().await;
    let parked = crate::mcp::call(&base, crate::mcp::CLAUDE, "fetch", json!({"url": url})).await;
    let id = parked["structuredContent"]["invocation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let awaiting = tokio::spawn({
        let (base, id) = (base.clone(), id.clone());
        async move {
            let args = json!({"invocation_id": id, "wait_seconds": 25});
            crate::mcp::call(&base, crate::mcp::CLAUDE, "airlock_await_decision", args).await
        }
    });
    // Ordering only (no timing is asserted): the await is in its wait when the CLI decides.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let out = cli(d, &["deny", &id, "--reason", "not today"]);
    assert!(out.status.success(), "{}", text(&out));
    let answered = tokio::time::timeout(Duration::from_secs(15), awaiting)
        .await
        .expect("the await was not woken by the CLI's decision")
        .unwrap();
    let settled = &answered["structuredContent"];
    assert_eq!(settled["status"], "denied", "{answered}");
    assert_eq!(settled["decided_by"], "alice", "{answered}");
}

/// `airlock audit verify` passes an untouched ledger and, after a row's arguments are edited
/// in the database behind airlock's back, fails naming that row.
#[tokio::test]
async fn audit_verify_names_a_row_edited_in_the_database() {
    let dir = deployment();
    let d = dir.path();
    let gateway = boot(d).await.unwrap().gateway;
    let fetch = park(&gateway, "fetch", json!({"url": "http://127.0.0.1:9/"})).await;

    let out = cli(d, &["audit", "verify"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("audit chain intact"),
        "{}",
        text(&out)
    );

    let db = sqlx::SqlitePool::connect(&format!("sqlite://{}", d.join("airlock.sqlite").display()))
        .await
        .unwrap();
    sqlx::query(
        "UPDATE invocations SET arguments = '{\"url\":\"http://127.0.0.1:9/x\"}' WHERE id = $1",
    )
    .bind(fetch.id.to_string())
    .execute(&db)
    .await
    .unwrap();
    let out = cli(d, &["audit", "verify"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("audit chain BROKEN: invocation") && stdout.contains(&fetch.id.to_string()),
        "{stdout}"
    );

    // A ledger that is not there fails; it is not created and reported intact.
    db.close().await;
    std::fs::remove_file(d.join("airlock.sqlite")).unwrap();
    let out = cli(d, &["audit", "verify"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("no ledger at"), "{}", text(&out));
    assert!(!d.join("airlock.sqlite").exists());
}

/// DECIDE-20, DECIDE-21: `airlock approve ID --arguments JSON` judges the edit against the
/// deployment's declarations (a schema failure names the field and decides nothing), records
/// it, and `serve`'s worker runs the call with the edited arguments; `invocations show` lists
/// both sets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_approval_from_the_cli_runs_in_serve_with_its_arguments() {
    let dir = deployment();
    let d = dir.path();
    let server = Server::start(d, &[]);
    let (upstream, asked) = hello_once().await;
    let gateway = boot(d).await.unwrap().gateway;
    let row = park(&gateway, "fetch", json!({"url": "http://127.0.0.1:9/"})).await;
    drop(gateway);
    let id = row.id.to_string();

    let out = cli(d, &["approve", &id, "--arguments", r#"{"url": 5}"#]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("/url"), "{}", text(&out));
    let out = cli(d, &["approvals", "list"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains(&id));

    let edited = json!({"url": format!("http://{upstream}/edited")}).to_string();
    let out = cli(d, &["approve", &id, "--arguments", &edited]);
    assert!(out.status.success(), "{}", text(&out));
    tokio::time::timeout(Duration::from_secs(20), asked)
        .await
        .unwrap()
        .unwrap();
    server.await_log(&["executed", &id, "succeeded"], Duration::from_secs(20));
    let out = cli(d, &["invocations", "show", &id]);
    let shown = String::from_utf8(out.stdout).unwrap();
    assert!(shown.contains("127.0.0.1:9"), "{shown}");
    assert!(shown.contains(&format!("approved    {edited}")), "{shown}");
    assert!(shown.contains("decision    edited"), "{shown}");
}
