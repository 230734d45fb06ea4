//! The executors: run one claimed call by its tool's source — a tenant API (`api`), a remote
//! MCP server (`mcp`), the `fetch` builtin, or a local tool compiled into the process — and
//! give back its result or the tool error to store. Every network path goes through the
//! egress guard; nothing here touches the ledger's state machine (the gateway claims,
//! renews and finishes).

pub mod api;
mod fetch;
pub(crate) mod local;
pub(crate) mod mcp;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use airlock_egress::GuardedClient;
use airlock_ledger::{Invocation, TxTool};
use airlock_mcp::{McpClient, McpTarget};
use airlock_spec::{
    ApiConnection, Builtin, ConnectionSpec, Credentials, Method, ToolSource, ToolSpec,
};
use serde_json::Value;

use crate::{ToolError, ToolErrorKind};
use local::{LocalBody, LocalTool};

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
    ) -> Result<Value, ToolError> {
        let key = (!is_read(spec)).then_some(idempotency_key);
        match &spec.source {
            ToolSource::Api(op) => {
                let connection = self.api_connection(&op.connection)?;
                let args = arguments.as_object().cloned().unwrap_or_default();
                let (client, credentials) = (&self.egress, &self.credentials);
                api::execute_with_key(client, op, connection, credentials, &args, key).await
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
            ToolSource::McpInline(_) | ToolSource::Connection(_) => {
                let (target, remote_name) = self.mcp_target(&spec.source)?;
                mcp::call(&self.mcp, &target, remote_name, arguments, key).await
            }
            // TODO-correctness(#9): sub-agents arrive with the agent runtime.
            ToolSource::Agent(_) => Err(ToolError::new(
                ToolErrorKind::Unavailable,
                "sub-agent tools need the agent runtime, which this build does not have yet",
            )),
        }
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

    /// A `[connections]` entry of `airlock.toml`, or the tool error naming it.
    fn api_connection(&self, name: &str) -> Result<&ApiConnection, ToolError> {
        self.connections.get(name).ok_or_else(|| {
            ToolError::bad_declaration(format!("connection `{name}` is not configured"))
        })
    }

    /// Where an MCP tool's server is, with its credential, and the tool's remote name.
    fn mcp_target<'s>(&self, source: &'s ToolSource) -> Result<(McpTarget, &'s str), ToolError> {
        match source {
            ToolSource::McpInline(tool) => {
                let connection = self.api_connection(&tool.connection)?;
                Ok((
                    mcp::inline_target(tool, connection, &self.credentials)?,
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

/// Whether a call of `spec` only reads, so it carries no idempotency key: an api `GET` declared
/// `writes: false`, an inline MCP tool declared `writes: false`, `fetch`. A `POST` is never
/// taken for a read (it may not be safe to repeat, whatever its declaration says), nor a
/// connection file's tool (the file does not say what its tools do). Sources with no upstream
/// (local tools, `ask_human`, sub-agents) send no key either.
fn is_read(spec: &ToolSpec) -> bool {
    match &spec.source {
        ToolSource::Api(op) => !spec.policy.writes && op.method == Method::Get,
        ToolSource::McpInline(_) => !spec.policy.writes,
        ToolSource::Connection(_) => false,
        ToolSource::Builtin(_) | ToolSource::Local | ToolSource::Agent(_) => true,
    }
}
