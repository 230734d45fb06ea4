//! Bench binary: agent runs on the scripted model (docs/benchmarks.md "agent_run").
//!
//! 1. A 10-step run (nine turns calling an ungated idempotent local no-op, then the answer),
//!    one run at a time: airlock's own time per step — the run's wall time minus the time spent
//!    inside the model, divided by its steps — as p50 and p99 over the runs, beside the p50 of
//!    one durable ledger commit measured on the same store (a session opened), so the per-step
//!    figure can be read as "airlock's work plus the step's commits". The store counts the
//!    transactions its writer commits ([`Ledger::commits`]), so the bench reports how many a
//!    step makes, and sums their time ([`Ledger::commit_time`]: each from `BEGIN` to the
//!    commit's acknowledgement), so it also reports each run's time beside its own commits as
//!    measured, per step.
//! 2. 100 such runs at once, [`ROUNDS`] rounds: wall time, and the process's resident memory
//!    before and after each round (flat memory: after the first rounds, they do not grow it).
//!
//! On SQLite (a file in a temp dir) and on PostgreSQL when `AIRLOCK_TEST_DATABASE_URL` is set.
//! Run with `cargo bench -p airlock --bench agent_run`.

#![allow(clippy::unwrap_used, missing_docs)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use airlock_egress::{EgressPolicy, GuardedClient};
use airlock_model::{ChatRequest, Model, ModelError, TokenSink, Turn};
use airlock_runtime::agent::{Agents, Limits, ModelFactory, RunRequest, RunState};
use airlock_runtime::ledger::{Ledger, PgStore, SqliteStore, Store, StoreConfig};
use airlock_runtime::{Gateway, LocalBody, LocalTool};
use airlock_spec::{
    AgentSpec, Credentials, Effect, ModelScript, ModelSpec, Policy, Scope, ScopeId, ScriptedCall,
    ScriptedConversation, ScriptedTurn, ToolDefinition, ToolName, ToolSource, ToolSpec,
};
use futures::future::BoxFuture;
use serde_json::{Value, json};

/// Model turns per run: nine tool-calling turns and the answer.
const STEPS: usize = 10;
/// Runs measured one at a time.
const SEQUENTIAL_RUNS: usize = 50;
/// Runs at once in the memory rounds.
const CONCURRENT: usize = 100;
const ROUNDS: usize = 8;
const AGENT: &str = "bench";

struct Noop;

impl LocalTool for Noop {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: ToolName::try_from("noop").unwrap(),
            description: "Does nothing.".into(),
            input_schema: json!({"type": "object"}),
        }
    }
    fn policy(&self) -> Policy {
        Policy {
            effect: Effect::Idempotent,
            ..Policy::default()
        }
    }
    fn invoke(&self, _arguments: Value) -> LocalBody {
        LocalBody::Plain(Box::pin(async { Ok(json!({"ok": true})) }))
    }
}

/// The scripted model, timing every turn it takes.
#[derive(Debug)]
struct Timed {
    inner: Arc<dyn Model>,
    spent_ns: Arc<AtomicU64>,
}

impl Model for Timed {
    fn turn<'a>(
        &'a self,
        request: &'a ChatRequest,
        tokens: TokenSink<'a>,
    ) -> BoxFuture<'a, Result<Turn, ModelError>> {
        Box::pin(async move {
            let start = Instant::now();
            let turn = self.inner.turn(request, tokens).await;
            let spent = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.spent_ns.fetch_add(spent, Ordering::Relaxed);
            turn
        })
    }
}

fn script() -> ModelScript {
    let call = ScriptedTurn::Call {
        text: String::new(),
        calls: vec![ScriptedCall {
            tool: "noop".into(),
            arguments: json!({}),
        }],
    };
    let mut turns = vec![call; STEPS - 1];
    turns.push(ScriptedTurn::Answer("done".into()));
    ModelScript {
        file: PathBuf::from("scripts/bench.yml"),
        conversations: vec![ScriptedConversation {
            when_input_contains: None,
            turns,
        }],
    }
}

fn agent(tool: &ToolSpec) -> AgentSpec {
    AgentSpec {
        name: AGENT.into(),
        file: PathBuf::from("agents/bench.yml"),
        description: None,
        model: ModelSpec {
            provider: "scripted".into(),
            model: "scripted".into(),
            endpoint: None,
            credential: None,
            script: Some(script()),
        },
        system_prompt: "Call noop.".into(),
        tools: vec![tool.clone()],
    }
}

/// Agents over a gateway whose agent scope holds the no-op; the model's time is added to
/// `spent_ns`.
fn agents(store: Arc<dyn Store>, spent_ns: &Arc<AtomicU64>) -> Agents {
    let tool = Arc::new(Noop);
    let spec = ToolSpec {
        definition: tool.definition(),
        source: ToolSource::Local,
        policy: tool.policy(),
    };
    let mut scope = Scope::new(ScopeId::Agent(AGENT.into()));
    scope.add(spec.clone()).unwrap();
    let egress = GuardedClient::new(EgressPolicy::default()).unwrap();
    let gateway = Arc::new(
        Gateway::builder(store, egress.clone(), Arc::new(Credentials::default()))
            .scope(scope)
            .expect("schemas compile")
            .local(tool)
            .build(),
    );
    let spent = Arc::clone(spent_ns);
    let models: ModelFactory = Arc::new(move |agent: &AgentSpec| {
        let inner = airlock_model::connect(&agent.model, egress.clone(), None)?;
        let timed: Arc<dyn Model> = Arc::new(Timed {
            inner,
            spent_ns: Arc::clone(&spent),
        });
        Ok(timed)
    });
    let specs = BTreeMap::from([(AGENT.to_owned(), agent(&spec))]);
    Agents::new(gateway, specs, models, Limits::default())
}

fn request() -> RunRequest {
    RunRequest {
        agent: AGENT.into(),
        input: "go".into(),
        principal: Some("bench".into()),
        groups: None,
        proposals_enabled: true,
        ..RunRequest::default()
    }
}

/// One run to its end; its wall time and the model's share of it.
async fn one_run(agents: &Agents, spent_ns: &AtomicU64) -> (Duration, Duration) {
    let before = spent_ns.load(Ordering::Relaxed);
    let start = Instant::now();
    let report = agents
        .run(request(), None, tokio_util::sync::CancellationToken::new())
        .await
        .unwrap();
    let wall = start.elapsed();
    assert_eq!(report.status, RunState::Completed, "{report:?}");
    assert_eq!(report.steps as usize, STEPS);
    let model = Duration::from_nanos(spent_ns.load(Ordering::Relaxed) - before);
    (wall, model)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

/// The process's resident memory, in MiB (`/proc/self/status`).
fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// The p50 of one durable commit on `gateway`'s store: a session opened.
async fn commit_p50(gateway: &Gateway) -> Duration {
    let mut times = Vec::with_capacity(100);
    for _ in 0..100 {
        let start = Instant::now();
        gateway
            .open_session("bench", Some("bench".into()), &ScopeId::Agent(AGENT.into()))
            .await
            .unwrap();
        times.push(start.elapsed());
    }
    times.sort();
    percentile(&times, 50)
}

async fn sequential(label: &str, agents: &Agents, ledger: &Ledger, spent_ns: &AtomicU64) {
    one_run(agents, spent_ns).await; // warm-up: connections, caches
    let mut per_step = Vec::with_capacity(SEQUENTIAL_RUNS);
    let mut model_total = Duration::ZERO;
    let commits_before = ledger.commits();
    let mut own = Vec::with_capacity(SEQUENTIAL_RUNS);
    for _ in 0..SEQUENTIAL_RUNS {
        let committing = ledger.commit_time();
        let (wall, model) = one_run(agents, spent_ns).await;
        model_total += model;
        let steps = u32::try_from(STEPS).unwrap();
        per_step.push(wall.saturating_sub(model) / steps);
        // One run at a time: every commit meanwhile is one of the run's own.
        let commits = ledger.commit_time() - committing;
        own.push(wall.saturating_sub(model).saturating_sub(commits) / steps);
    }
    let commits = (ledger.commits() - commits_before) as f64 / (SEQUENTIAL_RUNS * STEPS) as f64;
    per_step.sort();
    own.sort();
    let commit = commit_p50(agents.gateway()).await;
    let p50 = percentile(&per_step, 50);
    println!(
        "{label:<9} 10-step runs, one at a time: airlock per step p50 {:.2} ms, p99 {:.2} ms (model {:.3} ms per step); {commits:.1} durable commits per step, one commit p50 {:.2} ms → a step's commits ≈ {:.2} ms, airlock's own time beside them ≈ {:.2} ms; measured: own time beside the step's own commits' transaction time p50 {:.2} ms, p99 {:.2} ms",
        ms(p50),
        ms(percentile(&per_step, 99)),
        ms(model_total) / (SEQUENTIAL_RUNS * STEPS) as f64,
        ms(commit),
        ms(commit) * commits,
        ms(p50) - ms(commit) * commits,
        ms(percentile(&own, 50)),
        ms(percentile(&own, 99)),
    );
}

async fn concurrent(label: &str, agents: &Agents, spent_ns: &Arc<AtomicU64>) {
    for round in 1..=ROUNDS {
        let before = rss_mib();
        let start = Instant::now();
        let runs: Vec<_> = (0..CONCURRENT)
            .map(|_| {
                let agents = agents.clone();
                let spent = Arc::clone(spent_ns);
                tokio::spawn(async move { one_run(&agents, &spent).await })
            })
            .collect();
        for run in runs {
            run.await.unwrap();
        }
        let wall = start.elapsed();
        println!(
            "{label:<9} {CONCURRENT} runs at once, round {round}: {:.2} s ({:.0} steps/s); RSS {before:.1} → {:.1} MiB",
            wall.as_secs_f64(),
            (CONCURRENT * STEPS) as f64 / wall.as_secs_f64(),
            rss_mib()
        );
    }
}

async fn bench(label: &str, ledger: Arc<Ledger>) {
    let spent_ns = Arc::new(AtomicU64::new(0));
    let store: Arc<dyn Store> = ledger.clone();
    let agents = agents(store, &spent_ns);
    sequential(label, &agents, &ledger, &spent_ns).await;
    concurrent(label, &agents, &spent_ns).await;
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Arc::new(
        SqliteStore::open(dir.path().join("bench.sqlite"), StoreConfig::default())
            .await
            .unwrap(),
    );
    bench("sqlite", sqlite).await;
    match std::env::var("AIRLOCK_TEST_DATABASE_URL") {
        Ok(url) => {
            // Opened as `airlock serve` opens it, where agent runs run (OPS-57).
            let serving = StoreConfig {
                listen: true,
                ..StoreConfig::default()
            };
            let pg = Arc::new(PgStore::connect_url(&url, serving).await.unwrap());
            bench("postgres", pg).await;
        }
        Err(_) => println!("postgres: skipped (AIRLOCK_TEST_DATABASE_URL is not set)"),
    }
}
