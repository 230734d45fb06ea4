//! Bench binary: the crash harness (docs/crash.md; docs/rules.md TEST-8, TEST-9, TEST-10).
//!
//! Per backend — SQLite with one `airlock serve`, PostgreSQL (a cluster of its own) with two
//! replicas — it runs concurrent MCP clients and agent runs against the real binary while a nemesis SIGKILLs
//! a replica at random moments (and starts it again), SIGSTOPs one for up to 1.5 s (longer
//! than its 1 s lease, so the other replica's sweeper may take its calls over), and restarts
//! PostgreSQL under them. Then it lets the leases run out and checks the ledger against a
//! loopback upstream that records every execution: 0 duplicate executions of at-most-once
//! calls, 0 acknowledged calls without a row, 0 approvals used twice, 0 rows stuck open (in
//! doubt is fine, and counted), 0 runs left `running` (a killed replica's runs are taken over
//! once their lease ran out, TEST-11). It prints a table and exits 1 on any violation.
//!
//! `cargo test -p airlock --bench crash` runs the CI mode (30 kills per backend). Settings, by
//! environment: `AIRLOCK_CRASH_KILLS` (per backend), `AIRLOCK_CRASH_SEED` (default: the
//! clock; printed, so a run can be repeated), `AIRLOCK_CRASH_BACKENDS` (`sqlite,postgres`),
//! `AIRLOCK_CRASH_CLIENTS` (4).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    missing_docs
)]

mod fleet;
mod postgres;
mod traffic;
mod verdict;

use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use airlock_testkit::Script;
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use serde_json::json;

use fleet::Fleet;
use verdict::{Db, Verdict};

pub(crate) const ADMIN: &str = "admin-crash-1679091c5a880faf6fb5e6087eb1b2dc";
pub(crate) const CLIENT: &str = "mcp-crash-8f14e45fceea167a5a36dedd4bea2543";
/// Every replica's lease and sweep interval, in seconds: short, so the settle phase is too.
const SERVE: &[&str] = &["--lease", "1", "--sweep-every", "1", "--grace", "1"];
/// How long the rows get to settle after the last fault (leases, sweeps, workers).
const SETTLE_WITHIN: Duration = Duration::from_secs(45);

struct Config {
    kills: usize,
    seed: u64,
    clients: usize,
    backends: Vec<String>,
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}={v} does not parse"))
        })
        .unwrap_or(default)
}

fn config() -> Config {
    let clock = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    Config {
        kills: env_or("AIRLOCK_CRASH_KILLS", 30),
        seed: env_or("AIRLOCK_CRASH_SEED", clock),
        clients: env_or("AIRLOCK_CRASH_CLIENTS", 4),
        backends: env_or("AIRLOCK_CRASH_BACKENDS", "sqlite,postgres".to_owned())
            .split(',')
            .map(str::to_owned)
            .collect(),
    }
}

/// What one backend's run did and found.
struct Report {
    backend: String,
    kills: usize,
    pauses: usize,
    pg_restarts: usize,
    calls: u64,
    acked: usize,
    approved: u64,
    abandoned: u64,
    took: Duration,
    verdict: Verdict,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let config = config();
    println!(
        "crash harness: seed {}, {} kills per backend, {} clients",
        config.seed, config.kills, config.clients
    );
    let mut reports = Vec::new();
    for backend in &config.backends {
        reports.push(run(backend, &config).await);
    }
    table(&reports);
    let mut passed = true;
    for report in &reports {
        let v = &report.verdict;
        for (what, list) in [
            ("duplicate execution", &v.duplicates),
            ("approval used twice", &v.approvals_twice),
            ("stuck row", &v.stuck),
        ] {
            for item in list.iter().take(10) {
                println!("{}: {what}: {item}", report.backend);
            }
        }
        for n in v.lost.iter().take(10) {
            println!("{}: acknowledged without a row: n={n}", report.backend);
        }
        for id in v.lost_runs.iter().take(10) {
            println!("{}: acknowledged run without a row: {id}", report.backend);
        }
        passed &= v.passed();
    }
    if passed {
        println!("crash harness: passed");
        ExitCode::SUCCESS
    } else {
        println!("crash harness: FAILED (seed {})", config.seed);
        ExitCode::FAILURE
    }
}

/// A deployment on `database_url` with `free__echo` and `gated__echo` on the upstream.
fn deployment(dir: &Path, database_url: &str, upstream: u16) {
    let toml = format!(
        "database_url = \"{database_url}\"\n\
         [[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"alice\"\n\
         [[mcp.tokens]]\ncredential = \"airlock.client\"\nprincipal = \"client\"\n\
         [egress]\nallow = [\"127.0.0.1/32\"]\n[credentials]\nfile = \"creds.yml\"\n\
         [connections.tenant]\nuse_egress_allow = true\nbase_url = \"http://127.0.0.1:{upstream}\"\ncredential = \"tenant.token\"\n"
    );
    let creds = format!(
        "airlock:\n  admin: {ADMIN}\n  client: {CLIENT}\ntenant:\n  token: tenant-crash-token\n"
    );
    std::fs::write(dir.join("airlock.toml"), toml).unwrap();
    std::fs::write(dir.join("creds.yml"), creds).unwrap();
    let connections = dir.join("connections");
    std::fs::create_dir(&connections).unwrap();
    let url = format!("http://127.0.0.1:{upstream}/mcp");
    std::fs::write(connections.join("free.yml"), format!("url: {url}\n")).unwrap();
    let gated = format!("url: {url}\napproval: always\n");
    std::fs::write(connections.join("gated.yml"), gated).unwrap();
    for sub in ["agents", "scripts"] {
        std::fs::create_dir(dir.join(sub)).unwrap();
    }
    std::fs::write(dir.join("agents/runner.yml"), RUNNER).unwrap();
    let script = "- call:\n    - tool: tenant_record\n- answer: done\n";
    std::fs::write(dir.join("scripts/runner.yml"), script).unwrap();
}

/// Agent `runner`: a scripted model calling `tenant_record` (gated; a `POST`, so it carries its
/// idempotency key) on the upstream, then answering.
const RUNNER: &str = concat!(
    "apiVersion: airlock/v1\nkind: Agent\nmetadata:\n  name: runner\n  description: Records once.\n",
    "spec:\n  model:\n    provider: scripted\n    script: scripts/runner.yml\n",
    "  prompts:\n    system: Record.\n  tools:\n",
    "    - name: tenant\n      type: api\n      connection: tenant\n      auth: { scheme: bearer }\n",
    "      approval: always\n      operations:\n",
    "        - name: record\n          description: Record.\n          writes: false\n",
    "          request: { method: POST, path: /runs }\n",
);

async fn run(backend: &str, config: &Config) -> Report {
    let started = Instant::now();
    let upstream = airlock_testkit::Server::start(Script {
        // Long enough that a kill often lands while a call is at the upstream.
        delay: Some(Duration::from_millis(20)),
        ..Script::default()
    })
    .await;
    upstream.set_tools(vec![
        json!({"name": "echo", "inputSchema": {"type": "object"}}),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let (cluster, database_url, replicas) = match backend {
        "sqlite" => (
            None,
            format!("sqlite://{}/ledger.db", dir.path().display()),
            1,
        ),
        "postgres" => {
            let cluster = postgres::Cluster::start();
            let url = cluster.url();
            (Some(cluster), url, 2)
        }
        other => panic!("unknown backend {other} (sqlite or postgres)"),
    };
    deployment(dir.path(), &database_url, upstream.port);
    let mut fleet = Fleet::start(dir.path(), logs.path(), replicas, SERVE).await;
    let traffic = traffic::Traffic::new(fleet.addrs());
    let clients = traffic.spawn(config.clients, config.seed);
    let mut rng = StdRng::seed_from_u64(config.seed);
    let mut report = Report {
        backend: backend.to_owned(),
        kills: 0,
        pauses: 0,
        pg_restarts: 0,
        calls: 0,
        acked: 0,
        approved: 0,
        abandoned: 0,
        took: Duration::ZERO,
        verdict: Verdict::default(),
    };
    while report.kills < config.kills {
        tokio::time::sleep(Duration::from_millis(rng.random_range(50..400))).await;
        let i = rng.random_range(0..fleet.len());
        match rng.random_range(0..100) {
            0..15 if cluster.is_some() => {
                cluster.as_ref().unwrap().restart().await;
                report.pg_restarts += 1;
            }
            0..30 => {
                let pid = fleet.pid(i);
                fleet::signal(pid, "STOP").await;
                tokio::time::sleep(Duration::from_millis(rng.random_range(100..1500))).await;
                fleet::signal(pid, "CONT").await;
                report.pauses += 1;
            }
            _ => {
                fleet.kill_and_restart(i).await;
                report.kills += 1;
                if report.kills.is_multiple_of(100) {
                    let secs = started.elapsed().as_secs();
                    println!("{backend}: {} kills, {secs} s", report.kills);
                }
            }
        }
    }
    traffic.stop();
    for client in clients {
        client.await.unwrap();
    }
    let db = Db::open(&database_url).await;
    let ledger = db.settled(SETTLE_WITHIN).await;
    let acked = traffic.acked.lock().unwrap().clone();
    let runs = traffic.runs.lock().unwrap().clone();
    report.verdict = verdict::check(&ledger, &upstream.seen(), &acked, &runs);
    fleet.kill_all().await;
    report.calls = traffic.started();
    report.acked = traffic.acked.lock().unwrap().len();
    report.approved = traffic.approved.load(Ordering::SeqCst);
    report.abandoned = traffic.abandoned.load(Ordering::SeqCst);
    report.took = started.elapsed();
    if !report.verdict.passed() {
        println!("{backend}: logs kept in {}", logs.keep().display());
    }
    drop(cluster);
    report
}

fn table(reports: &[Report]) {
    println!(
        "\n| backend | replicas' kills | SIGSTOPs | PostgreSQL restarts | calls | acknowledged | runs (completed) | approved | executions | rows | in doubt | waiting | duplicates | lost | approvals used twice | stuck | time |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in reports {
        let v = &r.verdict;
        println!(
            "| {} | {} | {} | {} | {} | {} | {} ({}) | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} s |",
            r.backend,
            r.kills,
            r.pauses,
            r.pg_restarts,
            r.calls,
            r.acked,
            v.runs,
            v.runs_completed,
            r.approved,
            v.executions,
            v.rows,
            v.in_doubt,
            v.waiting,
            v.duplicates.len(),
            v.lost.len() + v.lost_runs.len(),
            v.approvals_twice.len(),
            v.stuck.len(),
            r.took.as_secs_f64()
        );
    }
    for r in reports {
        if r.abandoned > 0 {
            println!(
                "({}: {} calls never answered within 2 min, not counted as acknowledged)",
                r.backend, r.abandoned
            );
        }
    }
}
