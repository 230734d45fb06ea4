//! The executors: run one claimed call by its tool's source — a tenant API (`api`), a catalog
//! integration's action (`integration`), a remote MCP server (`mcp`), the `fetch` builtin, or a local tool compiled into the process — and
//! give back its result or the tool error to store. Every network path goes through the
//! egress guard; nothing here touches the ledger's state machine (the gateway claims,
//! renews and finishes).

pub mod api;
mod fetch;
mod integration;
pub(crate) mod local;
pub(crate) mod mcp;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use airlock_egress::GuardedClient;
use airlock_ledger::{Invocation, TxTool};
use airlock_mcp::{McpClient, McpTarget, UpstreamTask};
use airlock_spec::{
    ApiConnection, Builtin, ConnectionSpec, CredentialPath, Credentials, Method, ToolSource,
    ToolSpec,
};
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;

use crate::ToolError;
use local::{LocalBody, LocalTool};

/// What an executor ran to: the result to store, or — for a remote MCP tool offered a task
/// (docs/rules.md MCP-76) — the upstream's task that runs the call.
#[derive(Debug)]
pub(crate) enum Ran {
    /// The tool's result.
    Value(Value),
    /// The upstream runs the call as a task of its own; the row follows it (LEDGER-64).
    Task(UpstreamTask),
}

/// What the executors reach: the guard, credentials, connections and local tools.
pub(crate) struct Executors {
    pub(crate) egress: GuardedClient,
    pub(crate) mcp: McpClient,
    pub(crate) credentials: Arc<Credentials>,
    /// The `[connections]` of `airlock.toml`, by name.
    pub(crate) connections: BTreeMap<String, ApiConnection>,
    /// The loaded connection files, by namespace.
    pub(crate) mcp_connections: HashMap<String, ConnectionSpec>,
    /// Local tools' implementations, by tool name.
    pub(crate) local: HashMap<String, Arc<dyn LocalTool>>,
}

impl Executors {
    pub(crate) fn new(egress: GuardedClient, credentials: Arc<Credentials>) -> Self {
        Self {
            mcp: McpClient::new(egress.clone()),
            egress,
            credentials,
            connections: BTreeMap::new(),
            mcp_connections: HashMap::new(),
            local: HashMap::new(),
        }
    }

    /// Runs `spec` with `arguments` (validated, defaults filled). `idempotency_key` (the
    /// row's, the same on every run of one invocation) goes upstream with every call that is
    /// not a read (LEDGER-9, LEDGER-17): an upstream can then deduplicate a retry of ours.
    pub(crate) async fn run(
        &self,
        spec: &ToolSpec,
        arguments: Value,
        idempotency_key: &str,
    ) -> Result<Ran, ToolError> {
        let key = (!is_read(spec)).then_some(idempotency_key);
        let value = match &spec.source {
            ToolSource::Api(op) => {
                let run = run_connections();
                let (connection, credentials) = self.connection(run.as_deref(), &op.connection)?;
                let args = arguments.as_object().cloned().unwrap_or_default();
                let client = &self.egress;
                api::execute_with_key(client, op, connection, credentials, &args, key).await
            }
            ToolSource::Integration(action) => {
                let credentials = self.credentials.as_ref();
                integration::call(&self.egress, action, credentials, &arguments, key).await
            }
            ToolSource::Builtin(Builtin::Fetch) => fetch::fetch(&self.egress, &arguments).await,
            ToolSource::Local => match self.local_body(spec, arguments) {
                Some(LocalBody::Plain(body)) => body.await,
                Some(LocalBody::Transactional(_)) | None => {
                    Err(ToolError::bad_declaration(format!(
                        "local tool `{}` has no implementation registered",
                        spec.definition.name
                    )))
                }
            },
            ToolSource::Builtin(Builtin::AskHuman) => Err(ToolError::bad_declaration(
                "a question is answered by a person, never executed",
            )),
            // Only a remote MCP tool may answer with a task (MCP-76).
            ToolSource::McpInline(_) | ToolSource::Connection(_) => {
                let (target, remote_name) = self.mcp_target(&spec.source)?;
                return mcp::call(&self.mcp, &target, remote_name, arguments, key).await;
            }
            // The gateway never resolves a sub-agent (it runs inside its caller's agent run,
            // docs/rules.md AGENT-30), so no row of one reaches an executor.
            ToolSource::Agent(name) => Err(ToolError::bad_declaration(format!(
                "sub-agent `{name}` runs only inside an agent run"
            ))),
        };
        value.map(Ran::Value)
    }

    /// The body of a transactional local tool, when `spec` is one: the ledger runs it inside
    /// its own transaction instead of [`Executors::run`].
    pub(crate) fn transactional_body(&self, spec: &ToolSpec, row: &Invocation) -> Option<TxTool> {
        if spec.policy.effect != airlock_spec::Effect::Transactional
            || !matches!(spec.source, ToolSource::Local)
        {
            return None;
        }
        match self.local_body(spec, row.arguments.clone())? {
            LocalBody::Transactional(body) => Some(body),
            LocalBody::Plain(_) => None,
        }
    }

    /// Connection `name` with the credentials it is sent with: the agent run's own, when its
    /// caller supplied one, else `airlock.toml`'s (docs/rules.md AGENT-12).
    fn connection<'a>(
        &'a self,
        run: Option<&'a RunConnections>,
        name: &str,
    ) -> Result<(&'a ApiConnection, &'a Credentials), ToolError> {
        match run.and_then(|run| run.get(name)) {
            Some(supplied) => Ok(supplied),
            None => Ok((self.api_connection(name)?, self.credentials.as_ref())),
        }
    }

    /// A `[connections]` entry of `airlock.toml`, or the tool error naming it.
    fn api_connection(&self, name: &str) -> Result<&ApiConnection, ToolError> {
        self.connections.get(name).ok_or_else(|| {
            ToolError::bad_declaration(format!("connection `{name}` is not configured"))
        })
    }

    /// Where an MCP tool's server is, with its credential, and the tool's remote name.
    pub(crate) fn mcp_target<'s>(
        &self,
        source: &'s ToolSource,
    ) -> Result<(McpTarget, &'s str), ToolError> {
        match source {
            ToolSource::McpInline(tool) => {
                let run = run_connections();
                let (connection, credentials) =
                    self.connection(run.as_deref(), &tool.connection)?;
                Ok((
                    mcp::inline_target(tool, connection, credentials)?,
                    &tool.remote_name,
                ))
            }
            ToolSource::Connection(tool) => {
                let connection = self.mcp_connections.get(&tool.namespace).ok_or_else(|| {
                    ToolError::bad_declaration(format!(
                        "connection `{}` is not loaded",
                        tool.namespace
                    ))
                })?;
                Ok((
                    mcp::connection_target(connection, &self.credentials)?,
                    &tool.remote_name,
                ))
            }
            _ => Err(ToolError::bad_declaration("not an MCP tool")),
        }
    }

    fn local_body(&self, spec: &ToolSpec, arguments: Value) -> Option<LocalBody> {
        self.local
            .get(spec.definition.name.as_str())
            .map(|tool| tool.invoke(arguments))
    }
}

tokio::task_local! {
    /// The connections the caller of the agent run being served supplied: set around the
    /// run's calls only, held in memory, never stored (docs/rules.md AGENT-12).
    pub(crate) static RUN_CONNECTIONS: Arc<RunConnections>;
}

/// Connections supplied for one agent run, each with the one credential sent to it.
#[derive(Debug, Default)]
pub(crate) struct RunConnections {
    by_name: BTreeMap<String, (ApiConnection, Credentials)>,
}

/// The path under which a supplied connection's credential is held in its own bundle.
const RUN_CREDENTIAL: &str = "run.credential";

impl RunConnections {
    /// Adds connection `name` at `base_url`, sent `credential`.
    pub(crate) fn insert(&mut self, name: &str, base_url: &str, credential: &SecretString) {
        let path = CredentialPath::try_from(RUN_CREDENTIAL).ok();
        let connection = ApiConnection {
            base_url: base_url.to_owned(),
            credential: path,
        };
        let secret = credential.expose_secret().to_owned();
        let credentials = Credentials::from_pairs([(RUN_CREDENTIAL.to_owned(), secret)]);
        self.by_name
            .insert(name.to_owned(), (connection, credentials));
    }

    fn get(&self, name: &str) -> Option<(&ApiConnection, &Credentials)> {
        self.by_name.get(name).map(|(c, k)| (c, k))
    }
}

/// The supplied connections of the agent run this task serves, if any.
fn run_connections() -> Option<Arc<RunConnections>> {
    RUN_CONNECTIONS.try_with(Arc::clone).ok()
}

/// Whether a call of `spec` only reads, so it carries no idempotency key: an api `GET` declared
/// `writes: false`, an inline MCP tool declared `writes: false`, `fetch`. A `POST` is never
/// taken for a read (it may not be safe to repeat, whatever its declaration says), nor a
/// connection file's tool (the file does not say what its tools do). Sources with no upstream
/// (local tools, `ask_human`, sub-agents) send no key either.
fn is_read(spec: &ToolSpec) -> bool {
    match &spec.source {
        ToolSource::Api(op) => !spec.policy.writes && op.method == Method::Get,
        ToolSource::Integration(a) => !spec.policy.writes && a.request.method == Method::Get,
        ToolSource::McpInline(_) => !spec.policy.writes,
        ToolSource::Connection(_) => false,
        ToolSource::Builtin(_) | ToolSource::Local | ToolSource::Agent(_) => true,
    }
}
