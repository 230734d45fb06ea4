//! Bench binary: airlock's MCP endpoint end to end (issue #8's acceptance benchmark).
//! Run with `cargo bench -p airlock --bench mcp_endpoint`.
//!
//! An MCP client — JSON-RPC `tools/call` POSTs over one keep-alive HTTP/1.1 connection per
//! client task, no `initialize` (both servers are stateless) — calls the `echo` tool of an
//! upstream echo MCP server (the `airlock-testkit` upstream on 127.0.0.1) two ways with the
//! same code: directly, and as `echo__echo` through airlock's `POST /mcp` (a connection file
//! with `approval: never`, `effect: idempotent`). At 1, 8 and 32 concurrent clients it prints
//! req/s, p50 and p99 of each path and airlock's added latency (airlock's percentile minus the
//! direct one), twice:
//!
//! - **durable**: the ledger as `serve` runs it (SQLite, WAL, `synchronous = FULL`);
//! - **relaxed**: the same with `synchronous = NORMAL` (`SqliteStore::open_relaxed`), which
//!   takes the fsyncs out and leaves airlock's CPU cost.
//!
//! Through airlock each call is: auth, a session row (a commit), record + claim (a commit), one
//! `tools/call` to the upstream over a pooled connection (the upstream issues no session, so
//! the handshake boot's discovery made is kept: docs/rules.md MCP-28), finish (a commit), the
//! JSON-RPC reply. The two legs are also timed alone, one caller: the three ledger writes
//! straight on the store, and a short session (initialize, notifications/initialized,
//! tools/call) through airlock's `McpClient`, what a tenant's inline tool still pays (MCP-17).
//!
//! Group commit: on the durable ledger the bench also runs 8, 32 and 128 clients through
//! airlock and prints how many calls each durable commit (one fsync) carried, from the store's
//! own commit count.
//!
//! It also measures, in the same run, the machine's single-thread durable commit rate (the
//! ledger benchmark's baseline, shared code) and decision → awaiting client woken: a gated call
//! (`gated__echo`, `approval: always`) parks, a client long-polls `airlock_await_decision`, the
//! bench approves it over the decisions API; the latency runs from sending the approval to the
//! client holding the result (the await executes the approved call itself).
//!
//! Everything (clients, airlock, upstream) shares one tokio runtime in this process.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../../airlock-ledger/benches/common/commit_rate.rs"]
mod commit_rate;
#[path = "common/machine.rs"]
mod machine;
#[path = "common/mcp_client.rs"]
mod mcp_client;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use airlock::boot::boot_on_store;
use airlock::http::{AppState, app, serve};
use airlock_egress::{EgressPolicy, GuardedClient};
use airlock_ledger::{NewInvocation, NewSession, SessionId, SqliteStore, Store, StoreConfig};
use airlock_mcp::{McpClient, McpTarget, ToolCall};
use airlock_testkit::{Script, Server};
use machine::load_average;
use mcp_client::{Client, Endpoint};
use serde_json::json;
use tokio::net::TcpListener;

const CLIENTS: [usize; 3] = [1, 8, 32];
/// Client counts of the group-commit run: calls per durable commit (fsync) at each.
const FSYNC_CLIENTS: [usize; 3] = [8, 32, 128];
/// Calls before this are not counted (connections opened, caches warm).
const WARMUP: Duration = Duration::from_millis(500);
/// How long each measured run lasts.
const RUN: Duration = Duration::from_secs(3);
/// Sequential calls of each of airlock's two legs measured alone.
const LEG_CALLS: usize = 1000;
const WAKEUPS: usize = 200;
const MCP_TOKEN: &str = "mcp-bench-5d41402abc4b2a76b9719d911017c592";
const ADMIN_TOKEN: &str = "admin-bench-7d793037a0760186574b0282f2f435e7";

/// Throughput and latency of one run.
#[derive(Clone, Copy)]
struct Stats {
    /// Every call made, warm-up included.
    calls: usize,
    per_second: f64,
    p50: Duration,
    p99: Duration,
}

fn stats(mut samples: Vec<Duration>, over: Duration) -> Stats {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    Stats {
        calls: samples.len(),
        per_second: samples.len() as f64 / over.as_secs_f64(),
        p50: at(0.50),
        p99: at(0.99),
    }
}

/// `clients` tasks calling `tool` back to back for [`WARMUP`] + [`RUN`]; calls started inside
/// the measured window count.
async fn run(endpoint: &Arc<Endpoint>, tool: &'static str, clients: usize) -> Stats {
    let measure_from = Instant::now() + WARMUP;
    let until = measure_from + RUN;
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let endpoint = Arc::clone(endpoint);
            tokio::spawn(async move {
                let mut client = Client::new();
                let mut samples = Vec::new();
                let mut calls = 0;
                let arguments = json!({"q": "acme", "client": c});
                loop {
                    let start = Instant::now();
                    if start >= until {
                        return (samples, calls);
                    }
                    client.call(&endpoint, tool, arguments.clone()).await;
                    calls += 1;
                    if start >= measure_from {
                        samples.push(start.elapsed());
                    }
                }
            })
        })
        .collect();
    let (mut all, mut calls) = (Vec::new(), 0);
    for task in tasks {
        let (samples, made) = task.await.unwrap();
        all.extend(samples);
        calls += made;
    }
    Stats {
        calls,
        ..stats(all, RUN)
    }
}

/// Group commit at work: `clients` callers through airlock on the durable `store`, and the
/// calls each durable commit (one fsync) carried — it must grow with the callers.
async fn calls_per_fsync(through: &Arc<Endpoint>, store: &SqliteStore, clients: usize) -> f64 {
    let before = store.commits();
    let stats = run(through, "echo__echo", clients).await;
    let commits = store.commits() - before;
    stats.calls as f64 / commits.max(1) as f64
}

/// airlock's egress leg alone: one short MCP session per call, as the runtime's MCP executor
/// opens it, sequentially.
async fn upstream_leg(upstream: &Server) -> Stats {
    let policy = EgressPolicy {
        allow_cidrs: vec!["127.0.0.1/32".parse().unwrap()],
        ..EgressPolicy::default()
    };
    let client = McpClient::new(GuardedClient::new(policy).unwrap());
    let target = McpTarget::new(upstream.loopback_url());
    let call = ToolCall::new("echo", json!({"q": "acme", "client": 0}));
    for _ in 0..50 {
        client.call_tool(&target, &call).await.unwrap();
    }
    let start = Instant::now();
    let mut samples = Vec::with_capacity(LEG_CALLS);
    for _ in 0..LEG_CALLS {
        let t = Instant::now();
        client.call_tool(&target, &call).await.unwrap();
        samples.push(t.elapsed());
    }
    stats(samples, start.elapsed())
}

/// airlock's ledger writes for one ungated MCP call alone, sequentially: a session, then
/// record + claim (one commit), then finish (another) — three commits, as the endpoint makes.
async fn ledger_leg(store: &dyn Store) -> Stats {
    let lease = Duration::from_secs(60);
    let start = Instant::now();
    let mut samples = Vec::with_capacity(LEG_CALLS);
    for i in 0..LEG_CALLS + 50 {
        let t = Instant::now();
        let session = store
            .create_session(
                SessionId::new(),
                NewSession {
                    channel: "mcp".into(),
                    principal: Some("bench".into()),
                    metadata: json!({"scope": "gateway"}),
                },
            )
            .await
            .unwrap();
        let call = NewInvocation::new(session.id, "mcp", "echo__echo", json!({"q": "acme"}), "d");
        let row = store.record_and_claim(call, "bench", lease).await.unwrap();
        let result = json!({"text": "{\"q\":\"acme\"}", "structured": {"received": {"q": "acme"}}});
        store
            .finish(row.invocation.id, "bench", Ok(result))
            .await
            .unwrap();
        if i >= 50 {
            samples.push(t.elapsed());
        }
    }
    stats(samples, start.elapsed())
}

/// A deployment with MCP and admin tokens, loopback egress allowed, and two connection files
/// on `upstream`: `echo` (ungated, idempotent) and `gated` (approval always). The in-flight
/// limits are raised above the largest client count: the bench's clients all call as one
/// principal, and the default per-principal limit (64) would answer the 128-client run 503.
fn deployment(upstream: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let toml = "[[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"alice\"\n\
                [[mcp.tokens]]\ncredential = \"airlock.bench\"\nprincipal = \"bench\"\n\
                [egress]\nallow = [\"127.0.0.1/32\"]\n[credentials]\nfile = \"creds.yml\"\n\
                [server]\nmax_in_flight = 1024\nmax_in_flight_per_principal = 1024\n";
    let creds = format!("airlock:\n  admin: {ADMIN_TOKEN}\n  bench: {MCP_TOKEN}\n");
    let connections = dir.path().join("connections");
    std::fs::write(dir.path().join("airlock.toml"), toml).unwrap();
    std::fs::write(dir.path().join("creds.yml"), creds).unwrap();
    std::fs::create_dir(&connections).unwrap();
    for (name, approval) in [("echo", "never"), ("gated", "always")] {
        let file = format!("url: {upstream}\napproval: {approval}\neffect: idempotent\n");
        std::fs::write(connections.join(format!("{name}.yml")), file).unwrap();
    }
    dir
}

/// Boots `dir` on `store` and serves it on 127.0.0.1:0; returns the base URL.
async fn serve_airlock(dir: &Path, store: Arc<dyn Store>) -> String {
    let booted = boot_on_store(dir, store).await.unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = AppState {
        gateway: booted.gateway,
        agents: booted.agents,
        admin: booted.admin,
        mcp: booted.mcp,
        limits: booted.deployment.config.server,
        slack: booted.slack.clone(),
        max_grant: booted.deployment.config.max_grant,
    };
    let limits = state.limits;
    let never = tokio_util::sync::CancellationToken::new();
    tokio::spawn(serve(listener, app(state), limits, never));
    format!("http://{addr}")
}

/// (p50, p99) of approval sent → the awaiting client holding the result, over [`WAKEUPS`]
/// gated calls.
async fn wakeups(base: &str) -> (Duration, Duration) {
    let endpoint = Arc::new(Endpoint {
        url: format!("{base}/mcp"),
        token: Some(MCP_TOKEN),
    });
    let mut caller = Client::new();
    let mut waiter = Some(Client::new());
    let admin = reqwest::Client::new();
    let mut samples = Vec::with_capacity(WAKEUPS);
    for i in 0..WAKEUPS {
        let parked = caller.call(&endpoint, "gated__echo", json!({"i": i})).await;
        let status = &parked["structuredContent"];
        assert_eq!(status["status"], "awaiting_approval", "{parked}");
        let id = status["invocation_id"].as_str().unwrap().to_owned();
        let mut client = waiter.take().unwrap();
        let arguments = json!({"invocation_id": id, "wait_seconds": 20});
        let ep = Arc::clone(&endpoint);
        let task = tokio::spawn(async move {
            let result = client.call(&ep, "airlock_await_decision", arguments).await;
            (client, result, Instant::now())
        });
        // Let the await reach its long-poll (an await that arrives late returns at once,
        // which this measure would count the same way).
        tokio::time::sleep(Duration::from_millis(5)).await;
        let start = Instant::now();
        let decided = admin
            .post(format!("{base}/v1/approvals/{id}/decision"))
            .header("authorization", format!("Bearer {ADMIN_TOKEN}"))
            .header("content-type", "application/json")
            .body(r#"{"decision":"approve"}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(decided.status().as_u16(), 200);
        let (client, result, woke) = task.await.unwrap();
        let settled = &result["structuredContent"];
        assert!(
            settled["status"] == "completed" && settled["result"]["received"]["i"] == i,
            "{result}"
        );
        samples.push(woke.saturating_duration_since(start));
        waiter = Some(client);
    }
    let s = stats(samples, Duration::from_secs(1));
    (s.p50, s.p99)
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn signed_us(airlock: Duration, direct: Duration) -> f64 {
    us(airlock) - us(direct)
}

/// Which ledger settings airlock runs on.
#[derive(Clone, Copy)]
enum Ledger {
    Durable,
    Relaxed,
}

impl Ledger {
    fn label(self) -> &'static str {
        match self {
            Self::Durable => "durable",
            Self::Relaxed => "relaxed",
        }
    }

    async fn open(self, path: &Path) -> Arc<SqliteStore> {
        let config = StoreConfig::default();
        Arc::new(match self {
            Self::Durable => SqliteStore::open(path, config).await.unwrap(),
            Self::Relaxed => SqliteStore::open_relaxed(path, config).await.unwrap(),
        })
    }
}

/// Per mode and client count: (direct, through airlock).
type Rows = Vec<(Ledger, usize, Stats, Stats)>;

fn print_rows(rows: &Rows) {
    println!(
        "{:<8} {:>7} | {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9} | {:>10} {:>10}",
        "ledger",
        "clients",
        "direct/s",
        "p50 µs",
        "p99 µs",
        "airlock/s",
        "p50 µs",
        "p99 µs",
        "+p50 µs",
        "+p99 µs"
    );
    for (ledger, clients, direct, airlock) in rows {
        println!(
            "{:<8} {:>7} | {:>9.0} {:>9.0} {:>9.0} | {:>9.0} {:>9.0} {:>9.0} | {:>10.0} {:>10.0}",
            ledger.label(),
            clients,
            direct.per_second,
            us(direct.p50),
            us(direct.p99),
            airlock.per_second,
            us(airlock.p50),
            us(airlock.p99),
            signed_us(airlock.p50, direct.p50),
            signed_us(airlock.p99, direct.p99),
        );
    }
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "NOT met" }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        println!(
            "{} cores, load average at start {}",
            std::thread::available_parallelism().map_or(0, usize::from),
            load_average()
        );
        let upstream = Server::start(Script {
            unrecorded: true,
            ..Script::default()
        }).await;
        upstream.set_tools(vec![json!({
            "name": "echo",
            "description": "Echoes the arguments.",
            "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}
        })]);
        let dir = deployment(&upstream.loopback_url());
        let mut baseline = commit_rate::Baseline::default();
        baseline.measure(dir.path()).await;
        let direct = Arc::new(Endpoint {
            url: upstream.loopback_url(),
            token: None,
        });
        let mut rows = Rows::new();
        let mut wake = None;
        let mut fsyncs = Vec::new();
        let mut legs = Vec::new();
        for ledger in [Ledger::Durable, Ledger::Relaxed] {
            let path = dir.path().join(format!("{}.sqlite", ledger.label()));
            let store = ledger.open(&path).await;
            let base = serve_airlock(dir.path(), Arc::clone(&store) as Arc<dyn Store>).await;
            let through = Arc::new(Endpoint {
                url: format!("{base}/mcp"),
                token: Some(MCP_TOKEN),
            });
            for clients in CLIENTS {
                let d = run(&direct, "echo", clients).await;
                let a = run(&through, "echo__echo", clients).await;
                rows.push((ledger, clients, d, a));
            }
            baseline.measure(dir.path()).await;
            legs.push((ledger, ledger_leg(&*store).await, upstream_leg(&upstream).await));
            if matches!(ledger, Ledger::Durable) {
                wake = Some(wakeups(&base).await);
                for clients in FSYNC_CLIENTS {
                    fsyncs.push((clients, calls_per_fsync(&through, &store, clients).await));
                }
            }
        }
        println!();
        print_rows(&rows);
        println!();
        println!("airlock's two legs alone, 1 caller:");
        for (ledger, writes, upstream_leg) in &legs {
            println!(
                "  {}: ledger (session + record/claim + finish) p50 {:.0} µs, p99 {:.0} µs; \
                 upstream (McpClient short session) p50 {:.0} µs, p99 {:.0} µs",
                ledger.label(),
                us(writes.p50),
                us(writes.p99),
                us(upstream_leg.p50),
                us(upstream_leg.p99)
            );
        }
        for (clients, per_fsync) in &fsyncs {
            println!(
                "durable, {clients} clients: {per_fsync:.2} calls per durable commit (fsync), \
                 warm-up included"
            );
        }
        let (wake_p50, wake_p99) = wake.unwrap();
        println!(
            "sqlite single-thread durable commit rate (WAL, synchronous=FULL): median {:.0} \
             commits/s of readings before, between and after the runs ({})",
            baseline.median(),
            baseline.readings()
        );
        println!("load average at end {}", load_average());
        println!();
        let at = |ledger: &str, clients: usize| {
            rows.iter()
                .find(|(l, c, _, _)| l.label() == ledger && *c == clients)
                .map(|&(_, _, d, a)| (d, a))
                .unwrap()
        };
        let (_, durable32) = at("durable", 32);
        let ratio = durable32.per_second / baseline.median();
        println!(
            "target: durable, 32 clients: {:.0} req/s = {ratio:.2}x the commit rate (>= 4x): {}",
            durable32.per_second,
            verdict(ratio >= 4.0)
        );
        let (d1, a1) = at("relaxed", 1);
        let added = signed_us(a1.p50, d1.p50);
        println!(
            "target: relaxed, 1 client: added p50 {added:.0} µs (< 150 µs): {}",
            verdict(added < 150.0)
        );
        println!(
            "target: decision -> awaiting client woken (durable): p50 {:.2} ms, p99 {:.2} ms (< 50 ms): {}",
            wake_p50.as_secs_f64() * 1e3,
            wake_p99.as_secs_f64() * 1e3,
            verdict(wake_p99 < Duration::from_millis(50))
        );
    });
}
