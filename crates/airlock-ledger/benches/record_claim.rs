//! Ledger throughput and wake-up latency (a bench binary: `cargo bench -p airlock-ledger`).
//!
//! 1. The machine's single-thread durable commit rate: one SQLite transaction per iteration in
//!    WAL mode with `synchronous = FULL` (one fsync per commit) — the baseline, read before,
//!    between and after the SQLite runs; the ratios use the median reading.
//! 2. record + claim + finish of a no-op at-most-once call, 16 concurrent callers, on SQLite
//!    (target ≥ 4× the baseline) and on PostgreSQL with `synchronous_commit = on` (target
//!    ≥ 2,000 calls/s), when `AIRLOCK_TEST_DATABASE_URL` is set. Two ways: the fused path the
//!    runtime uses for ungated calls (`record_and_claim`, then `finish`: two durable commits),
//!    and three separate steps (`record`, `claim`, `finish`). Each caller awaits every step of
//!    its call before starting the next call.
//! 3. Decision → waiter wake-up latency (p50/p99), in-process on SQLite and across two pools
//!    (LISTEN/NOTIFY) on PostgreSQL (target p99 < 20 ms); and on SQLite from another process,
//!    as `airlock deny` reaches `airlock serve` (target p99 < 50 ms): this binary re-executes
//!    itself as the decider, on a store opened as the CLI opens it, and the waiter's store
//!    listens as `serve`'s does. Both sides read the shared system clock.
//!
//! `cargo bench -p airlock-ledger --bench record_claim -- wake` runs only the wake-ups;
//! `-- pg-scale` only the PostgreSQL fused path at 8, 32 and 128 callers, with calls per
//! durable commit from the store's own count: group commit must carry more calls per commit as
//! callers are added, and the rate must not fall.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use airlock_ledger::roles::Invocations;
use airlock_ledger::{
    Approval, Decision, InvocationState, NewInvocation, NewSession, PgStore, SessionId,
    SqliteStore, Store, StoreConfig,
};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// The allocator the `airlock` binary runs with, so the figures are the binary's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "common/commit_rate.rs"]
mod commit_rate;
use commit_rate::Baseline;

const CALLERS: usize = 16;
/// Callers of the `pg-scale` mode.
const SCALE_CALLERS: [usize; 3] = [8, 32, 128];
const CALLS_PER_CALLER: usize = 150;
const WARMUP_CALLS_PER_CALLER: usize = 50;
const WAKEUPS: usize = 200;
/// Set in the re-executed decider: the database file it decides in.
const DECIDER: &str = "AIRLOCK_BENCH_DECIDER";

async fn session(store: &Arc<dyn Store>) -> SessionId {
    store
        .create_session(
            SessionId::new(),
            NewSession {
                channel: "bench".into(),
                principal: None,
                metadata: json!({}),
            },
        )
        .await
        .unwrap()
        .id
}

/// Which write path a caller uses for one call.
#[derive(Clone, Copy)]
enum Path {
    /// `record_and_claim` + `finish`: two commits.
    Fused,
    /// `record` + `claim` + `finish`: three commits.
    Separate,
}

async fn one_call(store: &dyn Store, s: SessionId, call_id: String, c: usize, path: Path) {
    let call = NewInvocation::new(s, call_id, "noop", json!({"c": c}), "d");
    let owner = format!("w{c}");
    let lease = Duration::from_secs(30);
    let id = match path {
        Path::Fused => {
            let r = store.record_and_claim(call, &owner, lease).await.unwrap();
            assert!(r.created && r.invocation.state == InvocationState::Running);
            r.invocation.id
        }
        Path::Separate => {
            let id = store.record(call).await.unwrap().invocation.id;
            store.claim(id, &owner, lease).await.unwrap();
            id
        }
    };
    store.finish(id, &owner, Ok(json!(null))).await.unwrap();
}

/// `calls` calls by each caller at once, call ids starting with `prefix`.
async fn all_callers(
    store: &Arc<dyn Store>,
    sessions: &[SessionId],
    calls: usize,
    prefix: &'static str,
    path: Path,
) {
    let tasks: Vec<_> = sessions
        .iter()
        .enumerate()
        .map(|(c, &s)| {
            let store = Arc::clone(store);
            tokio::spawn(async move {
                for i in 0..calls {
                    one_call(&*store, s, format!("{prefix}{c}-{i}"), c, path).await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}

/// Each caller is its own session (an agent conversation), as 16 concurrent agents would be.
/// A warm-up pass first, untimed: a ledger in use is not a fresh empty table (PostgreSQL's
/// planner has no statistics for one yet and picks sequential scans until autovacuum's first
/// ANALYZE).
async fn calls_per_second(store: Arc<dyn Store>, path: Path) -> f64 {
    calls_per_second_by(store, path, CALLERS, CALLS_PER_CALLER).await
}

/// [`calls_per_second`] with `callers` callers of `calls` timed calls each.
async fn calls_per_second_by(
    store: Arc<dyn Store>,
    path: Path,
    callers: usize,
    calls: usize,
) -> f64 {
    let mut sessions = Vec::with_capacity(callers);
    for _ in 0..callers {
        sessions.push(session(&store).await);
    }
    all_callers(&store, &sessions, WARMUP_CALLS_PER_CALLER, "warm-", path).await;
    let start = Instant::now();
    all_callers(&store, &sessions, calls, "", path).await;
    (callers * calls) as f64 / start.elapsed().as_secs_f64()
}

/// (p50, p99) of decision start → waiter woken, waiter on `waiting`, decider on `deciding`.
async fn wakeup(waiting: Arc<dyn Store>, deciding: Arc<dyn Store>) -> (Duration, Duration) {
    let s = session(&deciding).await;
    let mut lat = Vec::with_capacity(WAKEUPS);
    for i in 0..WAKEUPS {
        let mut call = NewInvocation::new(s, format!("w{i}"), "refund", json!({"i": i}), "d");
        call.approval = Approval::Always;
        let row = deciding.record(call).await.unwrap().invocation;
        let w = Arc::clone(&waiting);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let waiter = tokio::spawn(async move {
            let r = w
                .wait_for_change(row.id, Some(row.version), deadline)
                .await
                .unwrap();
            (r, Instant::now())
        });
        tokio::time::sleep(Duration::from_millis(3)).await; // let the waiter register
        let start = Instant::now();
        deciding
            .decide(row.id, "bench", Decision::Approve)
            .await
            .unwrap();
        let (r, woke) = waiter.await.unwrap();
        assert_ne!(r.version, row.version);
        lat.push(woke.saturating_duration_since(start));
    }
    lat.sort();
    (lat[WAKEUPS / 2], lat[WAKEUPS * 99 / 100])
}

async fn pg_store(url: &str, schema: &str) -> Arc<dyn Store> {
    let opts: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
    Arc::new(
        PgStore::connect(
            opts.options([("search_path", schema)]),
            StoreConfig::default(),
        )
        .await
        .unwrap(),
    )
}

/// The PostgreSQL figures: throughput (if `throughput`) and the wake-up across two pools.
async fn postgres(url: &str, throughput: bool) {
    let admin = sqlx::PgPool::connect(url).await.unwrap();
    let sync: String = sqlx::query_scalar("SHOW synchronous_commit")
        .fetch_one(&admin)
        .await
        .unwrap();
    let schema = format!("bench_{}", uuid::Uuid::new_v4().simple());
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&admin)
        .await
        .unwrap();
    let a = pg_store(url, &schema).await;
    if throughput {
        let fused = calls_per_second(Arc::clone(&a), Path::Fused).await;
        let separate = calls_per_second(Arc::clone(&a), Path::Separate).await;
        println!(
            "postgres (synchronous_commit={sync}), {CALLERS} callers: record_and_claim+finish \
             {fused:.0} calls/s (target >= 2000); record+claim+finish {separate:.0} calls/s"
        );
    }
    let b = pg_store(url, &schema).await;
    let (p50, p99) = wakeup(b, a).await;
    println!("postgres wake-up across pools: p50 {p50:?}, p99 {p99:?} (target p99 < 20ms)");
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .execute(&admin)
        .await
        .unwrap();
}

/// The fused path at each of [`SCALE_CALLERS`] on a fresh schema: calls/s and calls per durable
/// commit (warm-up included), the same number of calls at every concurrency.
async fn pg_scale(url: &str) {
    let admin = sqlx::PgPool::connect(url).await.unwrap();
    for callers in SCALE_CALLERS {
        let schema = format!("bench_{}", uuid::Uuid::new_v4().simple());
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
            .execute(&admin)
            .await
            .unwrap();
        let opts: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
        let store = Arc::new(
            PgStore::connect(
                opts.options([("search_path", schema.as_str())]),
                StoreConfig::default(),
            )
            .await
            .unwrap(),
        );
        let calls = CALLERS * CALLS_PER_CALLER * 2 / callers;
        let dyn_store: Arc<dyn Store> = Arc::clone(&store) as Arc<dyn Store>;
        let rate = calls_per_second_by(dyn_store, Path::Fused, callers, calls).await;
        let all = callers * (calls + WARMUP_CALLS_PER_CALLER);
        let per_commit = all as f64 * 2.0 / store.commits() as f64;
        println!(
            "postgres, {callers} callers: record_and_claim+finish {rate:.0} calls/s, \
             {per_commit:.2} writes per durable commit"
        );
        drop(store);
        sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
            .execute(&admin)
            .await
            .unwrap();
    }
}

/// Microseconds since the Unix epoch on the system clock, which both processes share.
fn epoch_micros() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros()
}

/// The decider process: for each id read from stdin, prints the time it starts deciding, then
/// approves it through a store opened as the CLI opens one (not listening).
async fn decider(path: &str) {
    let store = SqliteStore::open(path, StoreConfig::default())
        .await
        .unwrap();
    let read_line = || {
        let mut line = String::new();
        let n = std::io::stdin().read_line(&mut line).unwrap();
        (n > 0).then_some(line)
    };
    while let Some(line) = tokio::task::spawn_blocking(read_line).await.unwrap() {
        let id = line.trim().parse().unwrap();
        let started = epoch_micros();
        store.decide(id, "bench", Decision::Approve).await.unwrap();
        let mut out = std::io::stdout().lock();
        writeln!(out, "{started}").unwrap();
        out.flush().unwrap();
    }
}

/// (p50, p99) of a decision in another process → the waiter on a listening store woken.
async fn wakeup_from_another_process(dir: &std::path::Path) -> (Duration, Duration) {
    let path = dir.join("wake.db");
    let config = StoreConfig {
        listen: true,
        ..StoreConfig::default()
    };
    let serving: Arc<dyn Store> = Arc::new(SqliteStore::open(&path, config).await.unwrap());
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .env(DECIDER, &path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut to_child = child.stdin.take().unwrap();
    let mut from_child = BufReader::new(child.stdout.take().unwrap()).lines();
    let s = session(&serving).await;
    let mut lat = Vec::with_capacity(WAKEUPS);
    for i in 0..WAKEUPS {
        let mut call = NewInvocation::new(s, format!("x{i}"), "refund", json!({"i": i}), "d");
        call.approval = Approval::Always;
        let row = serving.record(call).await.unwrap().invocation;
        let w = Arc::clone(&serving);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let waiter = tokio::spawn(async move {
            let r = w.wait_for_change(row.id, Some(row.version), deadline);
            let r = r.await.unwrap();
            (r, epoch_micros())
        });
        tokio::time::sleep(Duration::from_millis(3)).await; // let the waiter register
        to_child
            .write_all(format!("{}\n", row.id).as_bytes())
            .await
            .unwrap();
        let started: u128 = from_child
            .next_line()
            .await
            .unwrap()
            .unwrap()
            .parse()
            .unwrap();
        let (r, woke) = waiter.await.unwrap();
        assert_eq!(r.state, InvocationState::Approved);
        let micros = u64::try_from(woke.saturating_sub(started)).unwrap();
        lat.push(Duration::from_micros(micros));
    }
    drop(to_child);
    child.wait().await.unwrap();
    lat.sort();
    (lat[WAKEUPS / 2], lat[WAKEUPS * 99 / 100])
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    if let Ok(path) = std::env::var(DECIDER) {
        rt.block_on(decider(&path));
        return;
    }
    let only_wake = std::env::args().any(|a| a == "wake");
    if std::env::args().any(|a| a == "pg-scale") {
        let url = std::env::var("AIRLOCK_TEST_DATABASE_URL")
            .expect("pg-scale needs AIRLOCK_TEST_DATABASE_URL");
        rt.block_on(pg_scale(&url));
        return;
    }
    rt.block_on(async {
        if only_wake {
            wakeups().await;
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let mut base = Baseline::default();
        base.measure(dir.path()).await;
        let store: Arc<dyn Store> = Arc::new(
            SqliteStore::open(dir.path().join("ledger.db"), StoreConfig::default())
                .await
                .unwrap(),
        );
        let fused = calls_per_second(Arc::clone(&store), Path::Fused).await;
        base.measure(dir.path()).await;
        let separate = calls_per_second(Arc::clone(&store), Path::Separate).await;
        base.measure(dir.path()).await;
        println!(
            "sqlite single-thread durable commit rate (WAL, synchronous=FULL): median {:.0} \
             commits/s of readings before, between and after the runs ({})",
            base.median(),
            base.readings()
        );
        println!(
            "sqlite, {CALLERS} callers: record_and_claim+finish {fused:.0} calls/s = {:.1}x the \
             commit rate (target >= 4x); record+claim+finish {separate:.0} calls/s = {:.1}x",
            fused / base.median(),
            separate / base.median()
        );
        let (p50, p99) = wakeup(Arc::clone(&store), store).await;
        println!("sqlite wake-up in process: p50 {p50:?}, p99 {p99:?} (target p99 < 20ms)");
        let (p50, p99) = wakeup_from_another_process(dir.path()).await;
        println!(
            "sqlite wake-up from another process: p50 {p50:?}, p99 {p99:?} (target p99 < 50ms)"
        );
        match std::env::var("AIRLOCK_TEST_DATABASE_URL") {
            Ok(url) if !url.is_empty() => postgres(&url, true).await,
            _ => println!("postgres: skipped (AIRLOCK_TEST_DATABASE_URL not set)"),
        }
    });
}

/// Only the wake-up latencies.
async fn wakeups() {
    let dir = tempfile::tempdir().unwrap();
    let (p50, p99) = wakeup_from_another_process(dir.path()).await;
    println!("sqlite wake-up from another process: p50 {p50:?}, p99 {p99:?} (target p99 < 50ms)");
    match std::env::var("AIRLOCK_TEST_DATABASE_URL") {
        Ok(url) if !url.is_empty() => postgres(&url, false).await,
        _ => println!("postgres: skipped (AIRLOCK_TEST_DATABASE_URL not set)"),
    }
}
