//! Bench binary: what work costs as it grows (issue #39, "cost as work grows"). Run with
//! `cargo bench -p airlock --bench scale` (about two minutes on the 2-core build machine).
//!
//! It starts the real `airlock` binary (`serve`, durable SQLite ledger) on fresh deployments
//! whose tools come from connection files, each naming the `airlock-testkit` MCP upstream on
//! 127.0.0.1 that lists [`TOOLS_PER_CONNECTION`] tools (`echo` and 99 others, each with a
//! description and a two-property schema): a gateway in front of many MCP servers. One file,
//! `gated`, has `approval: always`; the others `approval: never`. It prints p50 and p99 of:
//!
//! 1. **tools** — with 200 and with 10,000 tools in the gateway scope (2 and 100 files): the
//!    time from starting `serve` to `/healthz` answering (boot discovers and pins every tool),
//!    `tools/list` (and the size of its one page), and a `tools/call` of `c001__echo`;
//! 2. **waiting calls** — on the 10,000-tool deployment, with 1,000 and then 100,000 calls
//!    parked: `GET /v1/approvals` (its first page, 50 oldest, and its last page by `offset`)
//!    and a signed-in `GET /inbox?live=off` (25 newest), then the same `tools/call` again. The
//!    parked calls are `gated__echo` rows written straight into `serve`'s ledger file by a
//!    second store in this process, each in its own session as the MCP endpoint records them;
//! 3. **resident memory** of the serve process (`/proc/<pid>/status`), each reading taken once
//!    it has been quiet for [`QUIET`] (memory is given back after half a second without a
//!    request, OPS-61): per idle keep-alive connection, [`HELD`] clients that each made one
//!    `tools/call`; per parked long-poll, [`HELD`] clients blocked in
//!    `airlock_await_decision` on calls of their own (docs/mcp-endpoint.md), its connection
//!    included. Per item = (RSS with them − RSS before) / [`HELD`].

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "common/inbox_person.rs"]
mod inbox_person;
#[path = "common/machine.rs"]
mod machine;
#[path = "common/mcp_client.rs"]
mod mcp_client;
#[path = "common/percentiles.rs"]
mod percentiles;
#[path = "common/serve_process.rs"]
mod serve_process;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use airlock_ledger::{
    Approval, Effect, InvocationState, NewInvocation, NewSession, SessionId, SourceKind,
    SqliteStore, Store, StoreConfig,
};
use airlock_testkit::{Script, Server, free_port};
use inbox_person::Person;
use machine::load_average;
use mcp_client::{Client, Endpoint};
use percentiles::percentiles;
use serde_json::{Value, json};
use serve_process::{Serve, start_serve, status_mib};

const MCP_TOKEN: &str = "mcp-scale-bench-3b1f0c9a7d5e4f21";
const ADMIN_TOKEN: &str = "admin-scale-bench-8e2d4c6a0b9f7e13";
const TOOLS_PER_CONNECTION: usize = 100;
/// Connection files of the two deployments: 200 and 10,000 tools.
const CONNECTIONS: [usize; 2] = [2, 100];
/// Calls waiting for a person when the lists are read.
const PARKED: [usize; 2] = [1_000, 100_000];
/// Untimed rounds before each timed series.
const WARMUP: usize = 5;
const CALLS: usize = 200;
const LISTS: usize = 50;
/// Rounds of the last page of the approvals list, which reads every row before it.
const DEEP: usize = 20;
/// Idle connections, and long-polls, held at once.
const HELD: usize = 1_000;
/// Tasks writing the parked calls at once (the ledger commits them in groups).
const SEEDERS: usize = 64;
const QUIET: Duration = Duration::from_secs(3);

/// The tools the upstream lists: `echo` (the one that answers) and 99 more like it.
fn upstream_tools() -> Vec<Value> {
    (0..TOOLS_PER_CONNECTION)
        .map(|i| {
            let name = if i == 0 {
                "echo".into()
            } else {
                format!("tool_{i:03}")
            };
            json!({
                "name": name,
                "description": format!("Tool {i} of a bench connection: finds a record by \
                                        its id and returns the fields asked for."),
                "inputSchema": {"type": "object", "properties": {
                    "id": {"type": "string", "description": "The record's id."},
                    "fields": {"type": "array", "items": {"type": "string"}}
                }}
            })
        })
        .collect()
}

/// A deployment on `port` with `connections` connection files on `upstream`: `gated`
/// (`approval: always`) and `c001`, `c002`, … (`approval: never`). The connection and
/// in-flight caps are raised above [`HELD`]; kept-alive connections may idle 60 s.
fn deployment(upstream: &str, port: u16, connections: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        "listen = \"127.0.0.1:{port}\"\n\
         [mcp]\nallowed_hosts = [\"localhost\", \"127.0.0.1\"]\n\
         [[mcp.tokens]]\ncredential = \"airlock.mcp\"\nprincipal = \"bench\"\n\
         [[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"alice\"\n\
         [egress]\nallow = [\"127.0.0.1/32\"]\n[credentials]\nfile = \"credentials.yml\"\n\
         [server]\nmax_connections = 4096\nmax_in_flight = 4096\n\
         max_in_flight_per_principal = 4096\nheader_timeout = \"60s\"\n"
    );
    let creds = format!("airlock:\n  mcp: {MCP_TOKEN}\n  admin: {ADMIN_TOKEN}\n");
    std::fs::write(dir.path().join("airlock.toml"), toml).unwrap();
    std::fs::write(dir.path().join("credentials.yml"), creds).unwrap();
    let files = dir.path().join("connections");
    std::fs::create_dir(&files).unwrap();
    let file =
        |approval: &str| format!("url: {upstream}\napproval: {approval}\neffect: idempotent\n");
    std::fs::write(files.join("gated.yml"), file("always")).unwrap();
    for i in 1..connections {
        std::fs::write(files.join(format!("c{i:03}.yml")), file("never")).unwrap();
    }
    dir
}

/// A running deployment.
struct Gateway {
    serve: Serve,
    base: String,
    mcp: Arc<Endpoint>,
    dir: tempfile::TempDir,
}

/// Starts `serve` on a deployment of `connections` files; it and the time it took to answer.
async fn start(upstream: &str, connections: usize) -> (Gateway, Duration) {
    let port = free_port();
    let dir = deployment(upstream, port, connections);
    let started = Instant::now();
    let serve = start_serve(dir.path(), port).await;
    let booted = started.elapsed();
    let base = format!("http://127.0.0.1:{port}");
    let mcp = Arc::new(Endpoint {
        url: format!("{base}/mcp"),
        token: Some(MCP_TOKEN),
    });
    (
        Gateway {
            serve,
            base,
            mcp,
            dir,
        },
        booted,
    )
}

/// (p50, p99) of `rounds` runs of `op`, after [`WARMUP`] untimed ones.
async fn timed(rounds: usize, mut op: impl AsyncFnMut()) -> (Duration, Duration) {
    for _ in 0..WARMUP {
        op().await;
    }
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let start = Instant::now();
        op().await;
        samples.push(start.elapsed());
    }
    percentiles(samples)
}

fn ms((p50, p99): (Duration, Duration)) -> String {
    format!(
        "p50 {:.2} ms, p99 {:.2} ms",
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3
    )
}

/// `tools/call` of `c001__echo`, [`CALLS`] sequential over one connection.
async fn call_figures(gateway: &Gateway) -> String {
    let mut client = Client::new();
    let arguments = json!({"id": "r1", "fields": ["name"]});
    let figures = timed(CALLS, async || {
        client
            .call(&gateway.mcp, "c001__echo", arguments.clone())
            .await;
    })
    .await;
    ms(figures)
}

/// Boot, `tools/list` and `tools/call` on a deployment of `connections` files; the gateway.
async fn tools(upstream: &str, connections: usize) -> Gateway {
    let (gateway, booted) = start(upstream, connections).await;
    let mut client = Client::new();
    let listed = client.rpc(&gateway.mcp, "tools/list", json!({})).await;
    let listed_tools = listed["tools"].as_array().unwrap().len();
    let list = timed(LISTS, async || {
        client.rpc(&gateway.mcp, "tools/list", json!({})).await;
    })
    .await;
    println!(
        "{} tools ({connections} connection files): serve healthy after {:.2} s; tools/list \
         ({listed_tools} tools with airlock's await tool, one page of {:.2} MB) {}; \
         tools/call {}",
        connections * TOOLS_PER_CONNECTION,
        booted.as_secs_f64(),
        listed.to_string().len() as f64 / 1e6,
        ms(list),
        call_figures(&gateway).await
    );
    gateway
}

/// One parked `gated__echo` call, recorded as the MCP endpoint records it: its own session.
async fn park_one(store: &dyn Store, i: usize) {
    let session = NewSession {
        channel: "mcp".into(),
        principal: Some("bench".into()),
        metadata: json!({"scope": "gateway"}),
    };
    let session = store
        .create_session(SessionId::new(), session)
        .await
        .unwrap();
    let arguments = json!({"id": format!("r{i}")});
    let mut call = NewInvocation::new(
        session.id,
        format!("seed-{i}"),
        "gated__echo",
        arguments,
        "seeded",
    );
    call.source_kind = SourceKind::Mcp;
    call.effect = Effect::Idempotent;
    call.approval = Approval::Always;
    call.principal = Some("bench".into());
    let recorded = store.record(call).await.unwrap();
    assert_eq!(recorded.invocation.state, InvocationState::AwaitingApproval);
}

/// Parks calls `from..to` through a second store on `serve`'s ledger file, [`SEEDERS`] at once.
async fn seed(ledger: &Path, from: usize, to: usize) -> Duration {
    let store = Arc::new(
        SqliteStore::open(ledger, StoreConfig::default())
            .await
            .unwrap(),
    );
    let next = Arc::new(AtomicUsize::new(from));
    let started = Instant::now();
    let seeders: Vec<_> = (0..SEEDERS)
        .map(|_| {
            let (store, next) = (Arc::clone(&store), Arc::clone(&next));
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= to {
                        return;
                    }
                    park_one(&*store, i).await;
                }
            })
        })
        .collect();
    for seeder in seeders {
        seeder.await.unwrap();
    }
    started.elapsed()
}

/// The rows of one page of `GET /v1/approvals` at `offset`.
async fn approvals_page(http: &reqwest::Client, base: &str, offset: usize) -> usize {
    let page: Value = http
        .get(format!("{base}/v1/approvals?offset={offset}"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap()
        .json()
        .await
        .unwrap();
    page["approvals"].as_array().unwrap().len()
}

/// The lists of waiting calls, and a call, with `parked` calls waiting.
async fn listings(gateway: &Gateway, person: &Person, parked: usize) {
    let (http, base) = (reqwest::Client::new(), gateway.base.as_str());
    let last = parked - 50;
    assert_eq!(approvals_page(&http, base, last).await, 50);
    let first = timed(LISTS, async || {
        approvals_page(&http, base, 0).await;
    })
    .await;
    let last_page = timed(DEEP, async || {
        approvals_page(&http, base, last).await;
    })
    .await;
    let inbox = timed(LISTS, async || {
        person.get(base, "/inbox?live=off").await;
    })
    .await;
    println!(
        "  {parked} parked: GET /v1/approvals first page {}; last page (offset {last}) {}; \
         GET /inbox {}; tools/call {}",
        ms(first),
        ms(last_page),
        ms(inbox),
        call_figures(gateway).await
    );
}

/// Serve's resident memory in MiB, read once it has been quiet for [`QUIET`].
async fn quiet_rss(serve: &Serve) -> f64 {
    tokio::time::sleep(QUIET).await;
    status_mib(serve.pid(), "VmRSS:")
}

fn per_item(label: &str, before: f64, with: f64) {
    println!(
        "  {label}: RSS {before:.1} MiB before, {with:.1} MiB with {HELD}: {:.1} KiB each",
        (with - before) * 1024.0 / HELD as f64
    );
}

/// RSS per idle keep-alive connection. The same calls are made over one connection first,
/// so what the calls themselves leave behind is in both readings.
async fn idle_connections(gateway: &Gateway) {
    let arguments = json!({"id": "idle"});
    let mut one = Client::new();
    for _ in 0..HELD {
        one.call(&gateway.mcp, "c001__echo", arguments.clone())
            .await;
    }
    let before = quiet_rss(&gateway.serve).await;
    let mut held = Vec::with_capacity(HELD);
    for _ in 0..HELD {
        let mut client = Client::new();
        client
            .call(&gateway.mcp, "c001__echo", arguments.clone())
            .await;
        held.push(client);
    }
    per_item(
        "idle keep-alive connections",
        before,
        quiet_rss(&gateway.serve).await,
    );
}

/// RSS per parked long-poll: [`HELD`] calls parked first, then a client per call blocked in
/// `airlock_await_decision` (25 s, longer than the reading takes).
async fn long_polls(gateway: &Gateway) {
    let mut caller = Client::new();
    let mut ids = Vec::with_capacity(HELD);
    for i in 0..HELD {
        let parked = caller
            .call(
                &gateway.mcp,
                "gated__echo",
                json!({"id": format!("poll{i}")}),
            )
            .await;
        let id = &parked["structuredContent"]["invocation_id"];
        ids.push(id.as_str().unwrap().to_owned());
    }
    let before = quiet_rss(&gateway.serve).await;
    let polls: Vec<_> = ids
        .into_iter()
        .map(|id| {
            let mcp = Arc::clone(&gateway.mcp);
            let arguments = json!({"invocation_id": id, "wait_seconds": 25});
            tokio::spawn(async move {
                Client::new()
                    .call(&mcp, "airlock_await_decision", arguments)
                    .await;
            })
        })
        .collect();
    let with = quiet_rss(&gateway.serve).await;
    assert!(
        polls.iter().all(|p| !p.is_finished()),
        "a long-poll ended early"
    );
    per_item("parked long-polls", before, with);
    polls.iter().for_each(tokio::task::JoinHandle::abort);
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        println!("load average at start {}", load_average());
        let upstream = Server::start(Script {
            unrecorded: true,
            ..Script::default()
        })
        .await;
        upstream.set_tools(upstream_tools());
        let url = upstream.loopback_url();
        drop(tools(&url, CONNECTIONS[0]).await);
        let gateway = tools(&url, CONNECTIONS[1]).await;
        let ledger = gateway.dir.path().join("airlock.sqlite");
        let person = Person::sign_in(&gateway.base, ADMIN_TOKEN).await;
        let mut seeded = 0;
        for parked in PARKED {
            let took = seed(&ledger, seeded, parked).await;
            println!(
                "  {} calls parked in {:.1} s",
                parked - seeded,
                took.as_secs_f64()
            );
            seeded = parked;
            listings(&gateway, &person, parked).await;
        }
        println!("resident memory of serve (10,000 tools, {seeded} parked):");
        idle_connections(&gateway).await;
        long_polls(&gateway).await;
        println!("load average at end {}", load_average());
    });
}
