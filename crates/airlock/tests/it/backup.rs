//! Backup and restore (docs/rules.md OPS-74, OPS-75; docs/operations.md): a ledger backed up
//! while `serve` takes calls, restored into a fresh file (SQLite: `airlock backup`) or a fresh
//! database (PostgreSQL: `pg_dump` and `pg_restore`), passes `airlock audit verify`, and the
//! restored deployment serves: its parked call is decided there and runs exactly once.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use airlock_testkit::{Needs, Script};
use serde_json::json;

use crate::replicas::{
    ADMIN, CLIENT, admin, await_decision, call, executions, fresh_database, park, until_state,
};
use crate::support::{Server, cli, deployment_with};
use crate::text;

/// A deployment on `database` (the default SQLite file when `None`) with connection files on
/// `upstream`: `gated` (approval always) and `free` (no approval).
fn deployment(database: Option<&str>, upstream: u16) -> tempfile::TempDir {
    let database = database
        .map(|url| format!("database_url = \"{url}\"\n"))
        .unwrap_or_default();
    let toml = format!(
        "{database}[[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"alice\"\n\
         [[mcp.tokens]]\ncredential = \"airlock.client\"\nprincipal = \"claude\"\n\
         [egress]\nallow = [\"127.0.0.1/32\"]\n[credentials]\nfile = \"creds.yml\"\n"
    );
    let creds = format!("airlock:\n  admin: {ADMIN}\n  client: {CLIENT}\n");
    let dir = deployment_with(&toml, &creds);
    let connections = dir.path().join("connections");
    std::fs::create_dir(&connections).unwrap();
    let url = format!("http://127.0.0.1:{upstream}/mcp");
    let gated = format!("url: {url}\napproval: always\n");
    std::fs::write(connections.join("gated.yml"), gated).unwrap();
    std::fs::write(connections.join("free.yml"), format!("url: {url}\n")).unwrap();
    dir
}

async fn upstream() -> airlock_testkit::Server {
    let upstream = airlock_testkit::Server::start(Script::default()).await;
    upstream.set_tools(vec![
        json!({"name": "echo", "inputSchema": {"type": "object"}}),
    ]);
    upstream
}

/// Calls completed through `airlock call` beside `server`, and one parked on it: their ids,
/// the parked one last.
async fn history(dir: &Path, server: &Server) -> (Vec<String>, String) {
    let mut done = Vec::new();
    for n in 0..3 {
        let args = json!({"n": n}).to_string();
        let out = cli(dir, &["call", "free__echo", "--args", &args, "--json"]);
        assert!(out.status.success(), "{}", text(&out));
        let row: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        done.push(
            row["invocation_id"]
                .as_str()
                .unwrap_or_else(|| panic!("{row}"))
                .to_owned(),
        );
    }
    (done, park(server, 7).await)
}

/// Calls through `server` until the returned flag is set: the writes a backup runs beside.
fn traffic(server: &Server) -> (Arc<AtomicBool>, tokio::task::JoinHandle<u64>) {
    let stop = Arc::new(AtomicBool::new(false));
    let addr = server.addr.clone();
    let flag = stop.clone();
    let task = tokio::spawn(async move {
        let mut n = 100;
        while !flag.load(Ordering::Relaxed) {
            call(&addr, "free__echo", json!({"n": n})).await;
            n += 1;
        }
        n - 100
    });
    (stop, task)
}

/// `command` run beside the traffic on `server`; its output, once the traffic has stopped
/// (having made at least one call, so the copy was taken under writes or just before them).
async fn under_traffic(server: &Server, command: std::process::Command) -> std::process::Output {
    let (stop, task) = traffic(server);
    let mut command = command;
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    assert!(task.await.unwrap() > 0, "no call ran beside the backup");
    out
}

/// The restored deployment `dir` passes `audit verify` and serves: the calls completed before
/// the backup are there, and the parked call, approved there, runs exactly once.
async fn serves_restored(
    dir: &Path,
    upstream: &airlock_testkit::Server,
    ids: &(Vec<String>, String),
) {
    let verified = cli(dir, &["audit", "verify"]);
    assert!(verified.status.success(), "{}", text(&verified));
    assert!(
        text(&verified).contains("audit chain intact"),
        "{}",
        text(&verified)
    );
    let server = Server::start(dir, &[]);
    for id in &ids.0 {
        until_state(&server, id, "succeeded").await;
    }
    let parked = &ids.1;
    assert_eq!(
        executions(upstream, parked),
        0,
        "nothing ran before the decision"
    );
    let path = format!("/v1/invocations/{parked}/approve");
    let (status, body) = admin(&server, "POST", &path, Some(json!({}))).await;
    assert_eq!(status, 200, "{body}");
    let settled = await_decision(&server.addr, parked, 25).await;
    assert_eq!(settled["status"], "completed", "{settled}");
    assert_eq!(settled["result"]["received"]["n"], 7, "{settled}");
    until_state(&server, parked, "succeeded").await;
    assert_eq!(executions(upstream, parked), 1, "the parked call ran once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sqlite_backup_taken_under_traffic_restores_to_a_deployment_that_runs_its_parked_call() {
    // OPS-74: `airlock backup` beside a serving gateway's writes; restored as docs/operations.md
    // says (stop, copy the file into place, start).
    let upstream = upstream().await;
    let source = deployment(None, upstream.port);
    let server = Server::start(source.path(), &[]);
    let ids = history(source.path(), &server).await;
    let backups = tempfile::tempdir().unwrap();
    let copy = backups.path().join("ledger.backup");
    let mut backup = crate::airlock();
    backup
        .arg("backup")
        .arg(&copy)
        .arg("--dir")
        .arg(source.path());
    let out = under_traffic(&server, backup).await;
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("backed up the ledger"),
        "{}",
        text(&out)
    );
    let leftovers: Vec<_> = std::fs::read_dir(backups.path()).unwrap().collect();
    assert_eq!(
        leftovers.len(),
        1,
        "only the backup, no temporary file: {leftovers:?}"
    );
    drop(server);
    let restored = deployment(None, upstream.port);
    std::fs::copy(&copy, restored.path().join("airlock.sqlite")).unwrap();
    serves_restored(restored.path(), &upstream, &ids).await;
}

#[test]
fn a_backup_never_overwrites_and_a_postgresql_ledger_is_pointed_to_pg_dump() {
    // OPS-74, OPS-75.
    let dir = deployment(None, 9);
    let dest = dir.path().join("copy");
    let none = cli(dir.path(), &["backup", dest.to_str().unwrap()]);
    assert_eq!(none.status.code(), Some(1), "{}", text(&none));
    assert!(text(&none).contains("no ledger at"), "{}", text(&none));
    assert!(!dest.exists());
    let recorded = cli(dir.path(), &["call", "free__echo", "--args", "{}"]);
    assert!(
        dir.path().join("airlock.sqlite").exists(),
        "{}",
        text(&recorded)
    );
    std::fs::write(&dest, "keep me").unwrap();
    let exists = cli(dir.path(), &["backup", dest.to_str().unwrap()]);
    assert_eq!(exists.status.code(), Some(1), "{}", text(&exists));
    assert!(
        text(&exists).contains("never overwrites"),
        "{}",
        text(&exists)
    );
    assert_eq!(std::fs::read_to_string(&dest).unwrap(), "keep me");
    let secret = "postgres://airlock:s3cret-pw@127.0.0.1:9/ledger";
    let pg = deployment(Some(secret), 9);
    let refused = cli(pg.path(), &["backup", "x"]);
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    let said = text(&refused);
    assert!(
        said.contains("pg_dump") && said.contains("docs/operations.md"),
        "{said}"
    );
    assert!(!said.contains("s3cret-pw"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pg_dump_taken_under_traffic_restores_into_a_fresh_database_that_runs_its_parked_call() {
    // OPS-75: `pg_dump --format=custom` beside a serving gateway's writes; `pg_restore` into a
    // fresh database, as docs/operations.md says.
    let Some(database) = fresh_database().await else {
        return;
    };
    if !on_path("pg_dump") || !on_path("pg_restore") {
        airlock_testkit::skip(Needs::PgClient);
        drop_database(&database).await;
        return;
    }
    let upstream = upstream().await;
    let source = deployment(Some(&database), upstream.port);
    let server = Server::start(source.path(), &[]);
    let ids = history(source.path(), &server).await;
    let dump = tempfile::tempdir().unwrap();
    let file = dump.path().join("ledger.dump");
    let mut pg_dump = std::process::Command::new("pg_dump");
    pg_dump
        .arg("--format=custom")
        .arg("--file")
        .arg(&file)
        .arg(&database);
    let out = under_traffic(&server, pg_dump).await;
    assert!(out.status.success(), "{}", text(&out));
    drop(server);
    let fresh = fresh_database().await.unwrap();
    let out = std::process::Command::new("pg_restore")
        .args(["--no-owner", "--exit-on-error", "--dbname", &fresh])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let restored = deployment(Some(&fresh), upstream.port);
    serves_restored(restored.path(), &upstream, &ids).await;
    for db in [&database, &fresh] {
        drop_database(db).await;
    }
}

/// Whether `program` is found on `PATH`.
fn on_path(program: &str) -> bool {
    std::process::Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success())
}

/// Drops the test database `url` (a database of [`fresh_database`]), closing its sessions.
async fn drop_database(url: &str) {
    let parsed = url::Url::parse(url).unwrap();
    let name = parsed.path().trim_start_matches('/').to_owned();
    let admin = sqlx::PgPool::connect(&airlock_testkit::postgres_url().unwrap())
        .await
        .unwrap();
    let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
}
