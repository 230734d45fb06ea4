//! Rolling upgrade (docs/rules.md OPS-86 … OPS-88): the pinned previous release
//! (`.ci/previous-release`, built by `.ci/build-previous.sh`, its binary named by
//! `AIRLOCK_PREVIOUS_BIN`) and this build serve one ledger.
//!
//! - PostgreSQL: the previous release migrates a fresh database and serves; the current build
//!   starts beside it on the same database (its newer migrations only add, OPS-86) and both
//!   take plain, gated and agent-run traffic at once; the old replica is stopped (SIGTERM)
//!   mid-load, the load goes on against the new one, and every call still parked is decided on
//!   the new release.
//! - SQLite: the previous release writes a ledger file (plain calls, parked calls, a parked
//!   run), stops; the current build opens the same file, migrates it and decides what waits.
//!
//! Either way it checks: 0 duplicate effects at the upstream (per call and per idempotency
//! key), 0 lost calls or runs (every acknowledged one has its row, settled), every parked call
//! decidable on the new release, every run finished once, and `airlock audit verify` passes.
//! Without `AIRLOCK_PREVIOUS_BIN` the tests say so on standard error and skip (fail under `CI`).

mod load;

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use airlock_testkit::{Needs, Script};
use serde_json::{Value, json};

use crate::replicas::{ADMIN, CLIENT, fresh_database};
use crate::support::{Server, cli, deployment_with, sigterm};
use crate::text;
use load::{Load, NEW, OLD};

/// Every replica's serve options: short leases and sweeps, so rows a stopped replica held settle
/// quickly; a grace period long enough for the calls in hand.
const SERVE: &[&str] = &["--lease", "2", "--sweep-every", "1", "--grace", "10"];
/// How long the ledger gets to settle once every call is decided.
const SETTLE_WITHIN: Duration = Duration::from_secs(60);

/// The previous release's `airlock` binary, or `None` after skipping (a failure under `CI`).
fn previous_release() -> Option<PathBuf> {
    match std::env::var_os("AIRLOCK_PREVIOUS_BIN").filter(|v| !v.is_empty()) {
        Some(path) => {
            let path = PathBuf::from(path);
            assert!(
                path.is_file(),
                "AIRLOCK_PREVIOUS_BIN={} is no file",
                path.display()
            );
            Some(path)
        }
        None => {
            airlock_testkit::skip(Needs::PreviousRelease);
            None
        }
    }
}

/// `airlock serve DIR` of the binary `bin`, started as [`Server::start`] starts the current one.
fn serve_with(bin: &Path, dir: &Path) -> Server {
    let mut command = Command::new(bin);
    command
        .arg("serve")
        .arg(dir)
        .args(["--listen", "127.0.0.1:0"])
        .args(SERVE)
        .env("NO_COLOR", "1")
        .env("AIRLOCK_LOG", "info");
    Server::spawn(command)
}

/// SIGTERMs `server` and waits (bounded) for it to exit; it must exit 0 (OPS-9: calls in hand
/// finished, nothing left half done).
async fn stop(server: &mut Server) {
    sigterm(server.child.id());
    for _ in 0..600 {
        if let Some(status) = server.child.try_wait().unwrap() {
            assert!(status.success(), "the old replica exited {status}");
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the old replica did not exit within 30 s of SIGTERM");
}

/// A deployment on `database` (`None`: the SQLite file in the directory): `free__echo` (at most
/// once) and `gated__echo` (approval always) on the MCP upstream, and agent `runner` (a scripted
/// model) whose one gated call, `up_echo`, is a `tools/call` of the upstream's `echo` carrying
/// its invocation's idempotency key. Only what both releases read.
fn deployment(database: Option<&str>, upstream: u16) -> tempfile::TempDir {
    let database = database
        .map(|url| format!("database_url = \"{url}\"\n"))
        .unwrap_or_default();
    let toml = format!(
        "{database}[[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"alice\"\n\
         [[mcp.tokens]]\ncredential = \"airlock.client\"\nprincipal = \"client\"\n\
         [egress]\nallow = [\"127.0.0.1/32\"]\n[credentials]\nfile = \"creds.yml\"\n\
         [connections.up]\nuse_egress_allow = true\nbase_url = \"http://127.0.0.1:{upstream}\"\n"
    );
    let creds = format!("airlock:\n  admin: {ADMIN}\n  client: {CLIENT}\n");
    let dir = deployment_with(&toml, &creds);
    let d = dir.path();
    let url = format!("http://127.0.0.1:{upstream}/mcp");
    let runner = concat!(
        "apiVersion: airlock/v1\nkind: Agent\nmetadata:\n  name: runner\n  description: Echoes once.\n",
        "spec:\n  model:\n    provider: scripted\n    script: scripts/runner.yml\n",
        "  prompts:\n    system: Echo.\n  tools:\n",
        "    - name: up\n      type: mcp\n      connection: up\n      path: /mcp\n",
        "      approval: always\n      tools:\n",
        "        - { name: echo, description: Echoes., writes: false, input_schema: { type: object } }\n",
    );
    for (file, content) in [
        ("connections/free.yml", format!("url: {url}\n")),
        (
            "connections/gated.yml",
            format!("url: {url}\napproval: always\n"),
        ),
        ("agents/runner.yml", runner.to_owned()),
        (
            "scripts/runner.yml",
            "- call:\n    - tool: up_echo\n- answer: done\n".to_owned(),
        ),
    ] {
        let path = d.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    dir
}

/// The loopback upstream: an MCP server with `echo`, recording every request.
async fn upstream() -> airlock_testkit::Server {
    let upstream = airlock_testkit::Server::start(Script {
        // Long enough that a stop often lands while a call is at the upstream.
        delay: Some(Duration::from_millis(20)),
        ..Script::default()
    })
    .await;
    upstream.set_tools(vec![
        json!({"name": "echo", "inputSchema": {"type": "object"}}),
    ]);
    upstream
}

/// The ledger's database, read directly.
enum Db {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

/// An invocation row, as far as the checks need it.
#[derive(Debug)]
struct Row {
    id: String,
    /// The argument `n` of a client's call (a run's call has none).
    n: Option<u64>,
    state: String,
    decision: Option<String>,
    run: Option<String>,
    /// The key its executions carry upstream.
    key: String,
}

/// The columns [`Db::read`] selects, in order.
type Columns = (
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    String,
);

impl From<Columns> for Row {
    fn from((id, arguments, state, decision, run, key): Columns) -> Self {
        let arguments: Value = serde_json::from_str(&arguments).unwrap_or(Value::Null);
        let n = arguments["n"].as_u64();
        Self {
            id,
            n,
            state,
            decision,
            run,
            key,
        }
    }
}

impl Db {
    async fn sqlite(dir: &Path) -> Self {
        let options = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(dir.join("airlock.sqlite"))
            .read_only(true);
        Self::Sqlite(sqlx::SqlitePool::connect_with(options).await.unwrap())
    }

    /// Every invocation row and every run (id, status).
    async fn read(&self) -> (Vec<Row>, Vec<(String, String)>) {
        const ROWS: &str =
            "SELECT id, arguments, state, decision, run_id, idempotency_key FROM invocations";
        const RUNS: &str = "SELECT id, status FROM runs";
        let (rows, runs): (Vec<Columns>, _) = match self {
            Self::Sqlite(pool) => (
                sqlx::query_as(ROWS).fetch_all(pool).await.unwrap(),
                sqlx::query_as(RUNS).fetch_all(pool).await.unwrap(),
            ),
            Self::Postgres(pool) => (
                sqlx::query_as(ROWS).fetch_all(pool).await.unwrap(),
                sqlx::query_as(RUNS).fetch_all(pool).await.unwrap(),
            ),
        };
        (rows.into_iter().map(Row::from).collect(), runs)
    }

    /// How many migrations are applied, and the newest version.
    async fn schema(&self) -> (i64, i64) {
        const SQL: &str = "SELECT COUNT(*), MAX(version) FROM _sqlx_migrations";
        match self {
            Self::Sqlite(pool) => sqlx::query_as(SQL).fetch_one(pool).await.unwrap(),
            Self::Postgres(pool) => sqlx::query_as(SQL).fetch_one(pool).await.unwrap(),
        }
    }

    /// Waits (bounded) until no row is open and no run running or parked; the ledger then.
    async fn settled(&self) -> (Vec<Row>, Vec<(String, String)>) {
        let deadline = tokio::time::Instant::now() + SETTLE_WITHIN;
        loop {
            let (rows, runs) = self.read().await;
            let open = rows.iter().any(|r| {
                matches!(
                    r.state.as_str(),
                    "pending" | "approved" | "running" | "awaiting_approval"
                )
            }) || runs
                .iter()
                .any(|r| matches!(r.1.as_str(), "running" | "parked"));
            if !open {
                return (rows, runs);
            }
            let late = rows
                .iter()
                .filter(|r| r.state != "succeeded")
                .collect::<Vec<_>>();
            assert!(
                tokio::time::Instant::now() < deadline,
                "not settled within {SETTLE_WITHIN:?}: rows {late:?}, runs {runs:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The upstream's executions: `tools/call`s by argument `n` and by idempotency key, and how many
/// came without an `n` — the runs' calls, which carry no key either (an at-most-once call of an
/// agent's MCP tool sends none).
struct Effects {
    by_n: HashMap<u64, usize>,
    by_key: HashMap<String, usize>,
    runs: usize,
}

fn effects(upstream: &airlock_testkit::Server) -> Effects {
    let (mut by_n, mut by_key, mut runs) = (HashMap::new(), HashMap::new(), 0);
    for seen in upstream.seen() {
        if seen.method != "tools/call" {
            continue;
        }
        let params = &seen.body["params"];
        match params["arguments"]["n"].as_u64() {
            Some(n) => *by_n.entry(n).or_default() += 1,
            None => runs += 1,
        }
        let key = params["_meta"]["airlock/idempotency_key"].as_str();
        if let Some(key) = key {
            *by_key.entry(key.to_owned()).or_default() += 1;
        }
    }
    Effects { by_n, by_key, runs }
}

/// The checks both backends share, on a settled ledger: every acknowledged call `n` (→ its
/// invocation id, when known) has exactly one row, succeeded, executed once; every started run
/// (→ its gated call) succeeded, its call succeeded; the runs' calls were executed exactly as
/// many times as there are such rows (each succeeded one ran at least once, so none twice); no
/// keyed effect ran twice; every decided row was approved. Returns the number of effects.
fn check(
    rows: &[Row],
    runs: &[(String, String)],
    upstream: &airlock_testkit::Server,
    acked: &HashMap<u64, Option<String>>,
    started: &HashMap<String, String>,
) -> usize {
    let Effects {
        by_n,
        by_key,
        runs: run_effects,
    } = effects(upstream);
    let twice: Vec<_> = by_key.iter().filter(|(_, c)| **c > 1).collect();
    assert!(
        twice.is_empty(),
        "effects executed more than once: {twice:?}"
    );
    let mut by_arg: HashMap<u64, Vec<&Row>> = HashMap::new();
    for row in rows {
        if let Some(n) = row.n {
            by_arg.entry(n).or_default().push(row);
        }
    }
    for (n, id) in acked {
        let found = by_arg.get(n).map(Vec::as_slice).unwrap_or_default();
        let [row] = found else {
            panic!(
                "acknowledged call n={n}: {} rows, one expected: {found:?}",
                found.len()
            );
        };
        assert_eq!(row.state, "succeeded", "n={n}: {row:?}");
        if let Some(id) = id {
            assert_eq!(&row.id, id, "n={n}");
        }
        assert_eq!(by_n.get(n), Some(&1), "n={n} executed once");
        assert_eq!(
            by_key.get(&row.key),
            Some(&1),
            "n={n} executed once under its key"
        );
    }
    let statuses: HashMap<&str, &str> =
        runs.iter().map(|(i, s)| (i.as_str(), s.as_str())).collect();
    for (run, call) in started {
        assert_eq!(statuses.get(run.as_str()), Some(&"succeeded"), "run {run}");
        let row = rows.iter().find(|r| &r.id == call);
        let row = row.unwrap_or_else(|| panic!("run {run}'s call {call} has no row"));
        assert_eq!(row.run.as_ref(), Some(run), "{row:?}");
        assert_eq!(row.state, "succeeded", "run {run}'s call: {row:?}");
    }
    let runs_calls = rows.iter().filter(|r| r.run.is_some()).count();
    assert_eq!(
        run_effects, runs_calls,
        "the runs' calls executed once each"
    );
    let unsettled: Vec<_> = rows.iter().filter(|r| r.state != "succeeded").collect();
    assert!(unsettled.is_empty(), "rows not succeeded: {unsettled:?}");
    for row in rows.iter().filter(|r| r.decision.is_some()) {
        assert_eq!(row.decision.as_deref(), Some("approved"), "{row:?}");
    }
    by_key.values().sum::<usize>() + run_effects
}

/// `airlock audit verify` (this build) on the deployment: the hash chain both releases wrote
/// checks out.
fn audit_verifies(dir: &Path) {
    let out = cli(dir, &["audit", "verify"]);
    assert!(out.status.success(), "audit verify: {}", text(&out));
}

/// Says a figure on standard error (past the test harness's capture, as a skip is said).
fn say(line: &str) {
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}

/// The pending approvals as the replica at `addr` lists them: their ids.
async fn pending(addr: &str) -> Vec<String> {
    let (status, body, _) = crate::support::http(
        addr.parse().unwrap(),
        "GET",
        "/v1/approvals?limit=200",
        Some(ADMIN),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let listed = body["approvals"].as_array().cloned().unwrap_or_default();
    listed
        .iter()
        .map(|a| a["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Approves every call the replica at `addr` lists as pending, `expected` among them: each must
/// be decidable there, and nothing may wait afterwards. Returns how many there were.
async fn decide_everything(addr: &str, expected: &[String]) -> usize {
    let http = reqwest::Client::new();
    let listed = pending(addr).await;
    for id in expected {
        assert!(
            listed.contains(id),
            "{id} was left parked but is not pending: {listed:?}"
        );
    }
    for id in &listed {
        let decided = load::approve(&http, addr, id).await;
        assert!(
            decided.is_some(),
            "{id} could not be decided on the new release"
        );
    }
    assert!(pending(addr).await.is_empty(), "nothing waits once decided");
    listed.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_of_the_previous_and_the_current_release_share_a_postgres_ledger() {
    // OPS-87: N-1 and N at once under load, N-1 stopped mid-load.
    let Some(previous) = previous_release() else {
        return;
    };
    let Some(database) = fresh_database().await else {
        return;
    };
    let upstream = upstream().await;
    let dir = deployment(Some(&database), upstream.port);
    let db = Db::Postgres(sqlx::PgPool::connect(&database).await.unwrap());
    let mut old = serve_with(&previous, dir.path());
    let before = db.schema().await;
    let new = Server::start(dir.path(), SERVE);
    let after = db.schema().await;
    assert!(
        after.1 >= before.1,
        "schema went back: {before:?} → {after:?}"
    );

    let load = Arc::new(Load::new(&old.addr, &new.addr));
    let mut clients = Vec::new();
    for home in [OLD, NEW, OLD, NEW] {
        let load = Arc::clone(&load);
        clients.push(tokio::spawn(async move { load.client(home).await }));
    }
    let runner = Arc::clone(&load);
    clients.push(tokio::spawn(async move { runner.runner().await }));

    until(&load, 40, 6).await;
    let at_stop = load.progress();
    load.stopping_old();
    stop(&mut old).await; // Mid-load: the clients' calls in hand go on to the new replica.
    until(&load, at_stop.0 + 40, at_stop.1 + 4).await;
    load.stop();
    for client in clients {
        client.await.unwrap();
    }

    let failures = load.failures.lock().unwrap().clone();
    assert!(
        failures.is_empty(),
        "a running replica did not answer: {failures:#?}"
    );
    let left = load.left_parked.lock().unwrap().clone();
    let decided_late = decide_everything(&new.addr, &left).await;
    let (rows, runs) = db.settled().await;
    let acked = load.acked.lock().unwrap().clone();
    let on_old = acked.values().filter(|a| a.on == OLD).count();
    assert!(on_old > 0, "the previous release answered no call");
    let gated = acked.values().filter(|a| a.gated).count();
    let acked: HashMap<u64, Option<String>> = acked.into_iter().map(|(n, a)| (n, a.id)).collect();
    let started: HashMap<String, String> = load.runs.lock().unwrap().clone().into_iter().collect();
    let effects = check(&rows, &runs, &upstream, &acked, &started);
    audit_verifies(dir.path());
    let count = |of: &[std::sync::atomic::AtomicU64; 2], i: usize| {
        of[i].load(std::sync::atomic::Ordering::SeqCst)
    };
    say(&format!(
        "rolling upgrade (PostgreSQL): schema {} → {} migrations (newest {} → {}); {} calls \
         acknowledged ({on_old} by the previous release, {gated} gated), {} runs ({} started on \
         the previous release), decisions {} on the previous release, {} on the current, {decided_late} \
         left parked and decided on the current after the stop; {} requests the stopping \
         replica did not answer, sent again to the current; {effects} effects, 0 duplicates, 0 \
         lost, {} rows, audit chain intact",
        before.0,
        after.0,
        before.1,
        after.1,
        acked.len(),
        started.len(),
        count(&load.started, OLD),
        count(&load.decided, OLD),
        count(&load.decided, NEW),
        load.refused_by_old
            .load(std::sync::atomic::Ordering::SeqCst),
        rows.len(),
    ));
}

/// Waits (bounded) until the clients acknowledged `calls` calls and started `runs` runs.
async fn until(load: &Load, calls: usize, runs: usize) {
    for _ in 0..1200 {
        let (c, r) = load.progress();
        if c >= calls && r >= runs {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "the load never reached {calls} calls and {runs} runs: {:?}",
        load.progress()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_current_release_takes_over_a_sqlite_ledger_the_previous_one_wrote() {
    // OPS-88: stop N-1, start N on its file; what waited is decided on N and runs once.
    let Some(previous) = previous_release() else {
        return;
    };
    let upstream = upstream().await;
    let dir = deployment(None, upstream.port);
    let mut old = serve_with(&previous, dir.path());
    // Plain calls and gated ones through the old release; one of the gated calls and one of two
    // runs decided there, the rest left parked for the new one.
    let mut acked = HashMap::new();
    let mut parked = Vec::new();
    for n in 0..6u64 {
        let tool = if n % 2 == 0 {
            "free__echo"
        } else {
            "gated__echo"
        };
        let result = load::call(&old.addr, tool, n).await.unwrap();
        let status = &result["structuredContent"];
        let id = status["invocation_id"].as_str().map(str::to_owned);
        if n % 2 == 1 {
            assert_eq!(status["status"], "awaiting_approval", "{result}");
            parked.push(id.clone().unwrap());
        }
        acked.insert(n, id);
    }
    let http = reqwest::Client::new();
    assert!(
        load::approve(&http, &old.addr, &parked.remove(0))
            .await
            .is_some()
    );
    let mut started = HashMap::new();
    for r in 0..2 {
        let (status, run, _) = crate::support::http(
            old.addr.parse().unwrap(),
            "POST",
            "/v1/agents/runner/run",
            Some(CLIENT),
            Some(json!({"input": "record"})),
        )
        .await;
        assert_eq!((status, &run["status"]), (200, &json!("parked")), "{run}");
        let waiting = run["waiting"][0].as_str().unwrap().to_owned();
        if r == 0 {
            assert!(load::approve(&http, &old.addr, &waiting).await.is_some());
        } else {
            parked.push(waiting.clone());
        }
        started.insert(run["run_id"].as_str().unwrap().to_owned(), waiting);
    }
    stop(&mut old).await;

    let db = Db::sqlite(dir.path()).await;
    let before = db.schema().await;
    let new = Server::start(dir.path(), SERVE);
    let after = db.schema().await;
    assert!(
        after.1 >= before.1,
        "schema went back: {before:?} → {after:?}"
    );
    // A client whose answer was lost sends its call again under the same key (MCP-22): the new
    // release answers with the row the old one wrote, and runs nothing.
    let again = load::call(&new.addr, "free__echo", 0).await.unwrap();
    assert_ne!(again["isError"], true, "{again}");
    let again = load::call(&new.addr, "gated__echo", 3).await.unwrap();
    let again = again["structuredContent"]["invocation_id"]
        .as_str()
        .map(str::to_owned);
    assert_eq!(
        again.as_ref(),
        acked[&3].as_ref(),
        "the same call, not a second one"
    );
    // The new release lists what the old one left parked and decides it.
    let decided = decide_everything(&new.addr, &parked).await;
    assert_eq!(decided, parked.len(), "exactly what was left parked waits");
    let (rows, runs) = db.settled().await;
    let effects = check(&rows, &runs, &upstream, &acked, &started);
    audit_verifies(dir.path());
    say(&format!(
        "rolling upgrade (SQLite): schema {} → {} migrations (newest {} → {}); {} calls and {} \
         runs written by the previous release, {decided} left parked and decided on the current; \
         {effects} effects, 0 duplicates, 0 lost, audit chain intact",
        before.0,
        after.0,
        before.1,
        after.1,
        acked.len(),
        started.len(),
    ));
}
