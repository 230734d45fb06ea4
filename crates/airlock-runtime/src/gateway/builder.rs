//! Building a [`Gateway`]: its scopes are prepared once (digests, compiled argument checks), and
//! the executors get their connections and local tools. A scope with a tool whose schema does
//! not compile is refused, so every tool a gateway can run has its argument check.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use airlock_egress::GuardedClient;
use airlock_ledger::Store;
use airlock_mcp::McpClient;
use airlock_spec::{
    ApiConnection, ConnectionSpec, Credentials, PerRunConnection, Scope, ScopeId, ToolSpec,
};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{Gateway, HowToDecide, PreparedScope, PreparedTool};
use crate::arguments::ArgumentCheck;
use crate::execute::Executors;
use crate::execute::local::LocalTool;

/// Default lease of a running call; renewed every third of it while the call runs.
const LEASE: Duration = Duration::from_secs(60);

/// Builds a [`Gateway`].
pub struct GatewayBuilder {
    gateway: Gateway,
}

impl GatewayBuilder {
    pub(super) fn new(
        store: Arc<dyn Store>,
        egress: GuardedClient,
        credentials: Arc<Credentials>,
    ) -> Self {
        let owner = format!("airlock-{}-{}", std::process::id(), uuid_suffix());
        let freezes = Arc::new(crate::freeze::FreezeWatch::new(Arc::clone(&store)));
        Self {
            gateway: Gateway {
                store,
                freezes,
                tracer: None,
                executors: Executors::new(egress, credentials),
                scopes: HashMap::new(),
                owner,
                lease: LEASE,
                long_polls: CancellationToken::new(),
                tasks: TaskTracker::new(),
                how_to_decide: None,
                access: airlock_spec::AccessPolicy::default(),
                definitions: super::Definitions::default(),
                offered: crate::offered::Offered::default(),
                supplied: crate::execute::SuppliedRuns::default(),
                vault: None,
            },
        }
    }

    /// Adds a scope (the gateway scope, or an agent's), compiling every tool's input schema
    /// and computing every tool's digest once.
    ///
    /// # Errors
    /// A tool whose input schema does not compile (docs/rules.md DECL-37): a gateway never
    /// holds a tool it could not check the arguments of.
    pub fn scope(mut self, scope: Scope) -> Result<Self, InvalidSchema> {
        let tools = scope
            .tools()
            .iter()
            .map(|t| prepare_tool(&scope, t))
            .collect::<Result<_, _>>()?;
        let digest = scope.digest();
        self.gateway.scopes.insert(
            scope.id.clone(),
            PreparedScope {
                scope,
                digest,
                tools,
            },
        );
        Ok(self)
    }

    /// Registers a local tool's implementation (its definition must be in a scope too).
    #[must_use]
    pub fn local(mut self, tool: Arc<dyn LocalTool>) -> Self {
        self.gateway
            .executors
            .local
            .insert(tool.definition().name.to_string(), tool);
        self
    }

    /// The `[connections]` of `airlock.toml`.
    #[must_use]
    pub fn connections(mut self, connections: BTreeMap<String, ApiConnection>) -> Self {
        self.gateway.executors.connections = connections;
        self
    }

    /// The `[connections]` of `airlock.toml` declared `per_run`: a call through one runs only
    /// with the connection its run's caller supplied (docs/rules.md DECL-83).
    #[must_use]
    pub fn per_run_connections(mut self, declared: &BTreeMap<String, PerRunConnection>) -> Self {
        let executors = &mut self.gateway.executors;
        executors.per_run = declared.keys().cloned().collect();
        executors.vouched_per_run = declared
            .iter()
            .filter(|(_, c)| c.use_egress_allow)
            .map(|(name, _)| name.clone())
            .collect();
        self
    }

    /// The principals' own credentials of the connections declared `per_principal = true`
    /// (docs/rules.md CALL-11): without it, a call through one fails `credential_missing`.
    #[must_use]
    pub fn vault(mut self, vault: Arc<crate::vault::PersonalVault>) -> Self {
        self.gateway.vault = Some(vault);
        self
    }

    /// `[egress] allow_integrations`: the catalog integrations (by slug) whose calls may reach
    /// what `[egress] allow` lets through (docs/rules.md EGRESS-38).
    #[must_use]
    pub fn integrations_use_egress_allow(mut self, slugs: &[String]) -> Self {
        self.gateway.executors.vouched_integrations = slugs.iter().cloned().collect();
        self
    }

    /// `[egress] allow_fetch`: the `fetch` builtin may reach what `[egress] allow` lets
    /// through; otherwise public addresses only (docs/rules.md EGRESS-40).
    #[must_use]
    pub fn fetch_uses_egress_allow(mut self, vouched: bool) -> Self {
        self.gateway.executors.vouched_fetch = vouched;
        self
    }

    /// The MCP client that discovered the connection files at boot: what it learnt of each
    /// upstream (its protocol revision, whether it keeps sessions) saves the first call a
    /// handshake (docs/rules.md MCP-27, MCP-28). It must send through this gateway's guard.
    #[must_use]
    pub fn mcp_client(mut self, client: McpClient) -> Self {
        self.gateway.executors.set_mcp_client(client);
        self
    }

    /// The connection files whose discovered tools are in the gateway scope.
    #[must_use]
    pub fn mcp_connections(mut self, connections: Vec<ConnectionSpec>) -> Self {
        self.gateway.executors.mcp_connections = connections
            .into_iter()
            .map(|c| (c.namespace.clone(), c))
            .collect();
        self
    }

    /// How long a claim holds without renewal (default 60 s). A running call renews it every
    /// third of it; if the process dies, the sweeper acts on the row once it runs out. At
    /// least 30 ms.
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.gateway.lease = lease.max(Duration::from_millis(30));
        self
    }

    /// Ties the gateway to its serving process's shutdown (docs/rules.md OPS-9): once
    /// `long_polls` is cancelled every long poll (the MCP await tool, a task's result) answers
    /// with the call's current state, and every later one at once, so clients call again
    /// instead of holding the server open; and the calls it runs off a request (an approval's)
    /// are spawned on `tasks`, which the process waits for before it exits. Without it long
    /// polls wait their full time and nothing waits for those calls.
    #[must_use]
    pub fn shutdown(mut self, long_polls: CancellationToken, tasks: TaskTracker) -> Self {
        self.gateway.long_polls = long_polls;
        self.gateway.tasks = tasks;
        self
    }

    /// What the log says to do when a call parks (docs/rules.md OPS-11): the serving binary
    /// names its own command and route (`airlock approve <id> --dir …`), which the runtime
    /// cannot know. Without it a park is logged without that hint.
    #[must_use]
    pub fn how_to_decide(mut self, how: HowToDecide) -> Self {
        self.gateway.how_to_decide = Some(how);
        self
    }

    /// `[telemetry]`'s tracer: runs, decisions and the background workers are traced with it
    /// (docs/rules.md OPS-80); without it they start no span.
    #[must_use]
    pub fn tracer(mut self, tracer: Option<airlock_egress::trace::RequestTracer>) -> Self {
        self.gateway.tracer = tracer;
        self
    }

    /// `[[access]]` of `airlock.toml` (docs/rules.md POLICY-43); without it nothing is
    /// filtered.
    #[must_use]
    pub fn access(mut self, access: airlock_spec::AccessPolicy) -> Self {
        self.gateway.access = access;
        self
    }

    /// The pinned connection tools their server no longer lists (docs/rules.md OPS-51): in a
    /// scope (see [`crate::pins::removed_spec`]) but never listed, and every call of one fails.
    #[must_use]
    pub fn removed(mut self, names: impl IntoIterator<Item = String>) -> Self {
        self.gateway.definitions.removed.extend(names);
        self
    }

    /// What the scopes' upstream servers offer beside tools, discovered at boot
    /// ([`crate::Offered::discover`]); without it the endpoint serves tools only.
    #[must_use]
    pub fn offered(mut self, offered: crate::Offered) -> Self {
        self.gateway.offered = offered;
        self
    }

    /// The connection tools withheld at boot (docs/rules.md OPS-49), for the inbox to show.
    #[must_use]
    pub fn pending_definitions(self, pending: Vec<crate::pins::Pending>) -> Self {
        if let Ok(mut held) = self.gateway.definitions.pending.lock() {
            *held = pending;
        }
        self
    }

    /// The gateway.
    #[must_use]
    pub fn build(self) -> Gateway {
        self.gateway
    }
}

/// A tool of a scope whose input schema does not compile.
#[derive(Debug, thiserror::Error)]
#[error("scope {scope}: tool `{tool}`: {reason}")]
pub struct InvalidSchema {
    /// The scope being added.
    pub scope: ScopeId,
    /// The tool's name.
    pub tool: String,
    /// The validator's reason.
    pub reason: String,
}

/// `spec` with its compiled argument check and its digest in `scope`.
fn prepare_tool(scope: &Scope, spec: &ToolSpec) -> Result<(String, PreparedTool), InvalidSchema> {
    let name = spec.definition.name.to_string();
    let check = ArgumentCheck::new(&spec.definition.input_schema).map_err(|e| InvalidSchema {
        scope: scope.id.clone(),
        tool: name.clone(),
        reason: e.message,
    })?;
    let tool = PreparedTool {
        spec: spec.clone(),
        check,
        digest: scope.tool_digest(&spec.definition),
    };
    Ok((name, tool))
}

/// A short random suffix so two processes never share a lease owner name.
fn uuid_suffix() -> String {
    airlock_ledger::InvocationId::new()
        .to_string()
        .chars()
        .rev()
        .take(8)
        .collect()
}
