//! The executors: run one claimed call by its tool's source — a tenant API (`api`), a catalog
//! integration's action (`integration`), a remote MCP server (`mcp`), the `fetch` builtin, or a
//! local tool compiled into the process — and give back its result or the tool error to store.
//! Every network path goes through the egress guard, and which guard is decided here: the
//! operator's own destinations (connection files, a `[connections]` entry it vouched for with
//! `use_egress_allow`) through the operator's policy, everything a tenant or a caller declared
//! or supplied through the public-only one (docs/rules.md EGRESS-38). The connections a call
//! reaches are named explicitly by the caller of [`Executors::run`] (its run's, or none), never
//! taken from ambient state, so no spawn between recording and running can change them
//! (docs/rules.md AGENT-63). Nothing here touches the ledger's state machine (the gateway
//! claims, renews and finishes).

pub mod api;
mod fetch;
mod integration;
pub(crate) mod local;
pub(crate) mod mcp;
mod supplied;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use airlock_egress::GuardedClient;
use airlock_ledger::{Invocation, TxTool};
use airlock_mcp::{Downstream, McpClient, McpTarget, UpstreamTask};
use airlock_spec::{
    ApiConnection, Builtin, ConnectionSpec, Credentials, Method, ToolSource, ToolSpec,
};
use serde_json::Value;

use crate::{ToolError, ToolErrorKind};
use local::{LocalBody, LocalTool};
pub use supplied::RunCredential;
pub(crate) use supplied::{RunConnections, SuppliedNames, SuppliedRuns, sending};

/// What an executor ran to: the result to store, or — for a remote MCP tool offered a task
/// (docs/rules.md MCP-76) — the upstream's task that runs the call.
#[derive(Debug)]
pub(crate) enum Ran {
    /// The tool's result.
    Value(Value),
    /// The upstream runs the call as a task of its own; the row follows it (LEDGER-64).
    Task(UpstreamTask),
}

/// What the executors reach: the guards, credentials, connections and local tools.
pub(crate) struct Executors {
    /// The operator's guard: `[egress] allow` applies.
    pub(crate) egress: GuardedClient,
    /// The guard of what tenants and callers declare: public addresses only.
    tenant: GuardedClient,
    /// The MCP client of connection files (through the operator's guard).
    pub(crate) mcp: McpClient,
    /// The MCP client of inline tenant servers (through the public-only guard).
    tenant_mcp: McpClient,
    pub(crate) credentials: Arc<Credentials>,
    /// The `[connections]` of `airlock.toml`, by name.
    pub(crate) connections: BTreeMap<String, ApiConnection>,
    /// The `[connections]` declared `per_run`: only a run's caller supplies them.
    pub(crate) per_run: BTreeSet<String>,
    /// The `per_run` connections declared `use_egress_allow`.
    pub(crate) vouched_per_run: BTreeSet<String>,
    /// `[egress] allow_integrations`: the catalog integrations the operator vouched for.
    pub(crate) vouched_integrations: BTreeSet<String>,
    /// `[egress] allow_fetch`: the `fetch` builtin goes through the operator's guard.
    pub(crate) vouched_fetch: bool,
    /// The loaded connection files, by namespace.
    pub(crate) mcp_connections: HashMap<String, ConnectionSpec>,
    /// Local tools' implementations, by tool name.
    pub(crate) local: HashMap<String, Arc<dyn LocalTool>>,
}

/// What one call carries besides its tool and arguments, explicitly, from the request (or run)
/// it serves to its executor: the connections its run's caller supplied (`None`: a call outside
/// any run), and what the client of the MCP request it serves can take back from its upstream.
#[derive(Clone, Copy)]
pub(crate) struct Reach<'a> {
    pub(crate) supplied: Option<&'a RunConnections>,
    /// The connection as the call's principal's own credential reaches it, when its
    /// connection takes each principal's own (docs/rules.md CALL-11).
    pub(crate) carried: Option<&'a (ApiConnection, Credentials)>,
    pub(crate) downstream: &'a Downstream,
}

/// A connection as one call reaches it: where, with which credentials, through which guard.
struct Reached<'a> {
    connection: &'a ApiConnection,
    credentials: &'a Credentials,
    guard: Guard,
}

/// Which of the two guards a call goes through.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Guard {
    Operator,
    Tenant,
}

impl Executors {
    pub(crate) fn new(egress: GuardedClient, credentials: Arc<Credentials>) -> Self {
        let tenant = egress.public_only();
        Self {
            mcp: McpClient::new(egress.clone()),
            tenant_mcp: McpClient::new(tenant.clone()),
            egress,
            tenant,
            credentials,
            connections: BTreeMap::new(),
            per_run: BTreeSet::new(),
            vouched_per_run: BTreeSet::new(),
            vouched_integrations: BTreeSet::new(),
            vouched_fetch: false,
            mcp_connections: HashMap::new(),
            local: HashMap::new(),
        }
    }

    /// Uses `client` (it must send through the operator's guard) for connection files.
    pub(crate) fn set_mcp_client(&mut self, client: McpClient) {
        self.tenant_mcp = McpClient::new(client.guard().public_only());
        self.mcp = client;
    }

    /// Runs `spec` with `arguments` (validated, defaults filled) as `reach` says. The
    /// `idempotency_key` (the row's, the same on every run of one invocation) goes upstream with
    /// every call that is not a read (LEDGER-9, LEDGER-17): an upstream can then deduplicate a
    /// retry of ours.
    pub(crate) async fn run(
        &self,
        spec: &ToolSpec,
        arguments: Value,
        idempotency_key: &str,
        reach: Reach<'_>,
    ) -> Result<Ran, ToolError> {
        let key = (!is_read(spec)).then_some(idempotency_key);
        let value = match &spec.source {
            ToolSource::Api(op) => {
                let reached = self.connection(reach, &op.connection)?;
                let args = arguments.as_object().cloned().unwrap_or_default();
                let client = self.guard(reached.guard);
                let (connection, credentials) = (reached.connection, reached.credentials);
                api::execute_with_key(client, op, connection, credentials, &args, key).await
            }
            // A catalog integration reaches a tenant's SaaS, not the operator's network,
            // unless the operator vouched for it.
            ToolSource::Integration(action) => {
                let credentials = self.credentials.as_ref();
                let vouched = self.vouched_integrations.contains(&action.request.slug);
                let client = self.guard(if vouched {
                    Guard::Operator
                } else {
                    Guard::Tenant
                });
                integration::call(client, action, credentials, &arguments, key).await
            }
            // `fetch` is enabled by the operator in airlock.toml (`[builtins.fetch]`), so it
            // keeps the operator's guard.
            ToolSource::Builtin(Builtin::Fetch) => {
                // Its URL is the model's or the caller's: public-only unless vouched (EGRESS-40).
                let guard = if self.vouched_fetch {
                    &self.egress
                } else {
                    &self.tenant
                };
                fetch::fetch(guard, &arguments).await
            }
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
                let (client, target, remote_name) = self.mcp_target(&spec.source, reach)?;
                let target = target.with_downstream(reach.downstream.clone());
                return mcp::call(client, &target, remote_name, arguments, key).await;
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
        match self.local_body(spec, row.effective_arguments().clone())? {
            LocalBody::Transactional(body) => Some(body),
            LocalBody::Plain(_) => None,
        }
    }

    fn guard(&self, guard: Guard) -> &GuardedClient {
        match guard {
            Guard::Operator => &self.egress,
            Guard::Tenant => &self.tenant,
        }
    }

    /// Connection `name` as this call reaches it: the one its run's caller supplied, else
    /// `airlock.toml`'s — either public-only unless the operator vouched for the name.
    /// A connection the run's caller supplied is never replaced by another one of the same
    /// name (docs/rules.md AGENT-63, AGENT-64).
    fn connection<'a>(&'a self, reach: Reach<'a>, name: &str) -> Result<Reached<'a>, ToolError> {
        let from_run = reach.supplied.map_or(Ok(None), |run| run.get(name))?;
        if let Some((connection, credentials)) = from_run {
            let guard = self.guard_of_supplied(name, &connection.base_url);
            return Ok(Reached {
                connection,
                credentials,
                guard,
            });
        }
        if self.per_run.contains(name) {
            return Err(ToolError::new(
                ToolErrorKind::CredentialMissing,
                format!(
                    "connection `{name}` is supplied by each run's caller, and this call's run supplied none"
                ),
            ));
        }
        let connection = self.connections.get(name).ok_or_else(|| {
            ToolError::bad_declaration(format!("connection `{name}` is not configured"))
        })?;
        let guard = self.guard_of(name);
        if let Some((connection, credentials)) = reach.carried {
            return Ok(Reached {
                connection,
                credentials,
                guard,
            });
        }
        // Never the deployment's credentials in place of a principal's own (CALL-11).
        if connection.per_principal.is_some() {
            return Err(ToolError::new(
                ToolErrorKind::CredentialMissing,
                format!(
                    "connection `{name}` sends each principal's own credential, and none was resolved for this call"
                ),
            ));
        }
        let credentials = self.credentials.as_ref();
        Ok(Reached {
            connection,
            credentials,
            guard,
        })
    }

    /// The guard of `[connections.<name>]` as airlock.toml declares it: the operator's only
    /// when it vouched for that name with `use_egress_allow`.
    fn guard_of(&self, name: &str) -> Guard {
        let vouched = self
            .connections
            .get(name)
            .is_some_and(|c| c.use_egress_allow);
        if vouched {
            Guard::Operator
        } else {
            Guard::Tenant
        }
    }

    /// The guard of a URL a run's caller supplied as connection `name`: the operator's only
    /// when the operator vouched for a connection each caller supplies (`per_run` with
    /// `use_egress_allow`), or for this name's own destination — the same scheme, host and port
    /// as its `base_url` in airlock.toml. A caller may give a vouched connection another path or
    /// credential, never another destination: vouching for one internal service must not open
    /// the whole `[egress] allow` list to every caller (docs/rules.md EGRESS-38).
    fn guard_of_supplied(&self, name: &str, supplied: &str) -> Guard {
        if self.vouched_per_run.contains(name) {
            return Guard::Operator;
        }
        let origin = |url: &str| url::Url::parse(url).ok().map(|u| u.origin());
        let same_destination = self.connections.get(name).is_some_and(|c| {
            c.use_egress_allow && origin(&c.base_url).is_some_and(|o| Some(o) == origin(supplied))
        });
        if same_destination {
            Guard::Operator
        } else {
            Guard::Tenant
        }
    }

    /// Where an MCP tool's server is, with its credential, the client that reaches it through
    /// the right guard, and the tool's remote name.
    pub(crate) fn mcp_target<'s>(
        &self,
        source: &'s ToolSource,
        reach: Reach<'_>,
    ) -> Result<(&McpClient, McpTarget, &'s str), ToolError> {
        match source {
            ToolSource::McpInline(tool) => {
                let reached = self.connection(reach, &tool.connection)?;
                let target = mcp::inline_target(tool, reached.connection, reached.credentials)?;
                let client = match reached.guard {
                    Guard::Operator => &self.mcp,
                    Guard::Tenant => &self.tenant_mcp,
                };
                Ok((client, target, &tool.remote_name))
            }
            ToolSource::Connection(tool) => {
                let connection = self.mcp_connections.get(&tool.namespace).ok_or_else(|| {
                    ToolError::bad_declaration(format!(
                        "connection `{}` is not loaded",
                        tool.namespace
                    ))
                })?;
                let target = mcp::connection_target(connection, &self.credentials)?;
                Ok((&self.mcp, target, &tool.remote_name))
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
        ToolSource::Integration(a) => !spec.policy.writes && a.request.method == Method::Get,
        ToolSource::McpInline(_) => !spec.policy.writes,
        ToolSource::Connection(_) => false,
        ToolSource::Builtin(_) | ToolSource::Local | ToolSource::Agent(_) => true,
    }
}
