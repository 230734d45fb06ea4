//! Agent runs through a real ledger (docs/rules.md AGENT): a scripted in-process model that
//! counts its turns, local tools that count their runs, and `Agents` over a real gateway.
//! Parking, resuming exactly once (also across two stores on one database: two processes),
//! proposals, sub-agents, drift, cancel and bounds.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use airlock_egress::{EgressPolicy, GuardedClient};
use airlock_model::{
    ChatRequest, Message, Model, ModelError, ModelErrorKind, TokenSink, ToolCall, Turn, Usage,
};
use airlock_runtime::agent::{Agents, Limits, ModelFactory, RunEvent, RunReport, RunRequest};
use airlock_runtime::ledger::{
    Clock, Decision, InvocationId, ManualClock, Store, StoreConfig, SystemClock,
};
use airlock_runtime::{Gateway, LocalBody, LocalTool, decisions};
use airlock_spec::{
    AgentSpec, Approval, Credentials, Mode, ModelSpec, Policy, Scope, ScopeId, ToolDefinition,
    ToolName, ToolSource, ToolSpec,
};
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::gateway::{Backend, Location, location, open};

mod confirm;
mod freeze;
mod park;
mod propose;
mod reads;
mod runs;
mod sub;
mod supplied;

/// A model that plays a script, one turn per request, and counts the requests.
#[derive(Debug, Default)]
pub(crate) struct Scripted {
    turns: Mutex<VecDeque<Turn>>,
    asked: AtomicUsize,
    /// The tool names offered on the last request.
    offered: Mutex<Vec<String>>,
    /// The conversation of the last request: what the model read.
    read: Mutex<Vec<Message>>,
    /// A clock each turn moves forward, and by how much: the time a model takes.
    tick: Mutex<Option<(ManualClock, Duration)>>,
}

impl Scripted {
    fn play(&self, turns: impl IntoIterator<Item = Turn>) {
        self.turns.lock().unwrap().extend(turns);
    }

    pub(crate) fn asked(&self) -> usize {
        self.asked.load(Ordering::SeqCst)
    }
}

impl Model for Scripted {
    fn turn<'a>(
        &'a self,
        request: &'a ChatRequest,
        tokens: TokenSink<'a>,
    ) -> BoxFuture<'a, Result<Turn, ModelError>> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        if let Some((clock, by)) = self.tick.lock().unwrap().as_ref() {
            clock.advance(*by);
        }
        *self.offered.lock().unwrap() = request.tools.iter().map(|t| t.name.clone()).collect();
        *self.read.lock().unwrap() = request.messages.clone();
        let next = self.turns.lock().unwrap().pop_front();
        Box::pin(async move {
            let turn = next.ok_or_else(|| ModelError {
                kind: ModelErrorKind::Provider,
                status: Some(500),
                message: "the script is over".into(),
            })?;
            if !turn.text.is_empty() {
                tokens(&turn.text);
            }
            Ok(turn)
        })
    }
}

/// A turn calling `calls` (name, arguments).
pub(crate) fn calls(calls: &[(&str, Value)]) -> Turn {
    let tool_calls = calls
        .iter()
        .enumerate()
        .map(|(i, (name, arguments))| ToolCall {
            id: format!("call-{i}"),
            name: (*name).to_owned(),
            arguments: arguments.clone(),
        })
        .collect();
    Turn {
        text: String::new(),
        tool_calls,
        usage: Usage {
            input_tokens: 10,
            output_tokens: 1,
        },
    }
}

/// A turn answering `text`.
pub(crate) fn answer(text: &str) -> Turn {
    Turn {
        text: text.to_owned(),
        tool_calls: Vec::new(),
        usage: Usage {
            input_tokens: 10,
            output_tokens: 2,
        },
    }
}

/// A local tool that counts its runs and echoes its arguments.
struct Local {
    name: &'static str,
    policy: Policy,
    runs: Arc<AtomicUsize>,
}

impl LocalTool for Local {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: ToolName::try_from(self.name).unwrap(),
            description: format!("The {} tool.", self.name),
            input_schema: json!({
                "type": "object",
                "properties": {"amount": {"type": "integer"}, "note": {"type": "string"}},
                "required": ["amount"]
            }),
        }
    }
    fn policy(&self) -> Policy {
        self.policy.clone()
    }
    fn invoke(&self, arguments: Value) -> LocalBody {
        let runs = Arc::clone(&self.runs);
        LocalBody::Plain(Box::pin(async move {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(json!({"echo": arguments}))
        }))
    }
}

/// The tools of the test deployment, by name: `count` (runs at once), `gate` (a person
/// approves), `propose` (a write that proposes), `confirm` (runs on the person's consent).
fn local(name: &'static str, runs: &Arc<AtomicUsize>) -> Arc<Local> {
    let policy = match name {
        "gate" => Policy {
            approval: Approval::Always,
            ..Policy::default()
        },
        "propose" => Policy {
            writes: true,
            mode: Mode::Propose,
            ..Policy::default()
        },
        "confirm" => Policy {
            writes: true,
            confirm: true,
            ..Policy::default()
        },
        _ => Policy::default(),
    };
    Arc::new(Local {
        name,
        policy,
        runs: Arc::clone(runs),
    })
}

pub(crate) fn sub_agent(name: &str) -> ToolSpec {
    ToolSpec {
        definition: ToolDefinition {
            name: ToolName::try_from(name).unwrap(),
            description: format!("Ask {name}."),
            input_schema: json!({"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]}),
        },
        source: ToolSource::Agent(name.to_owned()),
        policy: Policy::default(),
    }
}

fn agent_spec(name: &str) -> AgentSpec {
    AgentSpec {
        name: name.to_owned(),
        file: format!("agents/{name}.yml").into(),
        description: None,
        model: ModelSpec {
            provider: "openai".into(),
            model: "scripted".into(),
            endpoint: None,
            credential: None,
            script: None,
        },
        system_prompt: format!("You are {name}."),
        tools: Vec::new(),
    }
}

/// A deployment: agents and the tools each has (a tool named like an agent is that sub-agent).
pub(crate) type Layout = &'static [(&'static str, &'static [&'static str])];

/// The usual layout: `boss` asks `helper`, which asks `leaf`.
pub(crate) const TREE: Layout = &[
    ("boss", &["count", "gate", "propose", "helper"]),
    ("helper", &["count", "gate", "propose", "leaf"]),
    ("leaf", &["count", "gate", "propose"]),
];

/// What a test adds to the usual deployment.
#[derive(Default)]
pub(crate) struct Extras {
    /// The guarded client (default: the default policy).
    pub(crate) egress: Option<GuardedClient>,
    /// `airlock.toml`'s `[connections]`.
    pub(crate) connections: BTreeMap<String, airlock_spec::ApiConnection>,
    /// The process's credentials.
    pub(crate) credentials: Credentials,
    /// More tools for `boss`.
    pub(crate) boss_tools: Vec<ToolSpec>,
    /// The clock the runs' budget is measured by (default: the system's).
    pub(crate) clock: Option<ManualClock>,
}

/// One test's world: a ledger, the tools' run counters and a model per agent.
pub(crate) struct World {
    pub(crate) location: Location,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) models: HashMap<String, Arc<Scripted>>,
    runs: HashMap<&'static str, Arc<AtomicUsize>>,
    _dir: tempfile::TempDir,
}

impl World {
    pub(crate) async fn new(backend: Backend) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        let location = location(backend, &dir).await?;
        let store = open(&location, StoreConfig::default()).await;
        let models = ["boss", "helper", "leaf"]
            .into_iter()
            .map(|n| (n.to_owned(), Arc::new(Scripted::default())))
            .collect();
        let runs = ["count", "gate", "propose", "confirm"]
            .into_iter()
            .map(|n| (n, Arc::new(AtomicUsize::new(0))))
            .collect();
        Some(Self {
            location,
            store,
            models,
            runs,
            _dir: dir,
        })
    }

    pub(crate) fn script(&self, agent: &str, turns: impl IntoIterator<Item = Turn>) {
        self.models[agent].play(turns);
    }

    pub(crate) fn asked(&self, agent: &str) -> usize {
        self.models[agent].asked()
    }

    pub(crate) fn offered(&self, agent: &str) -> Vec<String> {
        self.models[agent].offered.lock().unwrap().clone()
    }

    /// The conversation `agent`'s model read on its last turn.
    pub(crate) fn read(&self, agent: &str) -> Vec<Message> {
        self.models[agent].read.lock().unwrap().clone()
    }

    /// Every model's turn moves `clock` forward by `by`.
    pub(crate) fn turns_take(&self, clock: &ManualClock, by: Duration) {
        for model in self.models.values() {
            *model.tick.lock().unwrap() = Some((clock.clone(), by));
        }
    }

    pub(crate) fn ran(&self, tool: &str) -> usize {
        self.runs[tool].load(Ordering::SeqCst)
    }

    /// `Agents` over `store` for `layout`, within `limits`.
    pub(crate) fn agents_on(
        &self,
        store: Arc<dyn Store>,
        layout: Layout,
        limits: Limits,
    ) -> Agents {
        self.agents_with(store, layout, limits, Extras::default())
    }

    /// [`World::agents_on`] with `extras`.
    pub(crate) fn agents_with(
        &self,
        store: Arc<dyn Store>,
        layout: Layout,
        limits: Limits,
        extras: Extras,
    ) -> Agents {
        let egress = extras
            .egress
            .unwrap_or_else(|| GuardedClient::new(EgressPolicy::default()).unwrap());
        let mut builder = Gateway::builder(store, egress, Arc::new(extras.credentials))
            .connections(extras.connections);
        for (tool, runs) in &self.runs {
            builder = builder.local(local(tool, runs));
        }
        let mut specs = BTreeMap::new();
        for (agent, tools) in layout {
            let mut scope = Scope::new(ScopeId::Agent((*agent).to_owned()));
            for tool in *tools {
                scope.add(self.tool_spec(tool)).unwrap();
            }
            if *agent == "boss" {
                for tool in &extras.boss_tools {
                    scope.add(tool.clone()).unwrap();
                }
            }
            builder = builder.scope(scope).unwrap();
            specs.insert((*agent).to_owned(), agent_spec(agent));
        }
        let models = self.models.clone();
        let factory: ModelFactory = Arc::new(move |spec: &AgentSpec| {
            let model: Arc<dyn Model> = models[&spec.name].clone();
            Ok(model)
        });
        let clock: Arc<dyn Clock> = match extras.clock {
            Some(clock) => Arc::new(clock),
            None => Arc::new(SystemClock),
        };
        Agents::with_clock(Arc::new(builder.build()), specs, factory, limits, clock)
    }

    /// A local tool of the world, or the sub-agent `name`.
    fn tool_spec(&self, name: &'static str) -> ToolSpec {
        match self.runs.get(name) {
            Some(runs) => {
                let t = local(name, runs);
                ToolSpec {
                    definition: t.definition(),
                    source: ToolSource::Local,
                    policy: t.policy(),
                }
            }
            None => sub_agent(name),
        }
    }

    pub(crate) fn agents(&self, layout: Layout) -> Agents {
        self.agents_on(Arc::clone(&self.store), layout, Limits::default())
    }

    /// A second store on the same database: another process.
    pub(crate) async fn other_process(&self) -> Arc<dyn Store> {
        open(&self.location, StoreConfig::default()).await
    }
}

/// A request to `agent` with proposals received.
pub(crate) fn request(agent: &str, input: &str) -> RunRequest {
    RunRequest {
        agent: agent.to_owned(),
        input: input.to_owned(),
        proposals_enabled: true,
        ..RunRequest::default()
    }
}

/// Runs `request` to its stop, with the events it sent.
pub(crate) async fn run_with_events(
    agents: &Agents,
    request: RunRequest,
) -> (RunReport, Vec<RunEvent>) {
    let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
    let report = agents
        .run(request, Some(tx), CancellationToken::new())
        .await
        .unwrap();
    let mut events = Vec::new();
    while let Some(event) = rx.recv().await {
        events.push(event);
    }
    (report, events)
}

/// Approves `id` as a person would, from any surface (the ledger transition only).
pub(crate) async fn approve(store: &dyn Store, id: InvocationId) {
    decisions::record(store, &[], id, "alice", Decision::Approve, "cli")
        .await
        .unwrap();
}

/// Declares each test once per backend.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[tokio::test] async fn $name() { super::$name(crate::gateway::Backend::Sqlite).await })*
        }
        mod postgres {
            $(#[tokio::test] async fn $name() { super::$name(crate::gateway::Backend::Postgres).await })*
        }
    };
}
pub(crate) use on_both_backends;
