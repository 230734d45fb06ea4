//! The one path of a tool call (DESIGN §3): every channel calls [`Gateway::call`], and nothing
//! else executes tools.
//!
//! resolve the tool in its scope → validate the arguments → record the row (dedupe on
//! session + call id; the ledger applies the approval policy atomically) → by state: propose,
//! park, or claim → execute by source through the egress guard → finish. A call never raises
//! for a tool's own failure: that is stored on the row and returned as a tool error. Only an
//! unknown tool or a lost database is an `Err`.

mod execute;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use airlock_egress::GuardedClient;
use airlock_ledger::{
    CallKind, Invocation, InvocationId, InvocationState, LedgerError, NewInvocation, NewSession,
    SessionId, Store,
};
use airlock_mcp::McpClient;
use airlock_spec::{
    ApiConnection, Builtin, ConnectionSpec, Credentials, Scope, ScopeId, ToolSource, ToolSpec,
};
use serde_json::{Value, json};

use crate::api::ArgumentCheck;
use crate::local::LocalTool;
use crate::rate_limit::RateLimits;

/// Default lease of a running call; renewed every third of it while the call runs.
const LEASE: Duration = Duration::from_secs(60);

/// Who calls, from where, in which scope.
#[derive(Debug, Clone)]
pub struct CallContext {
    /// The scope whose tools are visible.
    pub scope: ScopeId,
    /// The session (one per MCP call, one per conversation elsewhere).
    pub session: SessionId,
    /// The caller's id for this call; a retry with the same id finds the same row.
    pub call_id: String,
    /// The authenticated principal, if any.
    pub principal: Option<String>,
}

/// What became of a call.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Settled with a result or a tool error (`invocation.settlement()`).
    Completed(Invocation),
    /// Waiting for a person (approval, answer, in-doubt resolution) or running elsewhere.
    Parked(Invocation),
    /// Recorded as a proposal; nothing was called.
    Proposed(Invocation),
    /// A person declined it, or its approval expired.
    Denied(Invocation),
}

impl Outcome {
    /// The row behind the outcome.
    #[must_use]
    pub fn invocation(&self) -> &Invocation {
        match self {
            Self::Completed(i) | Self::Parked(i) | Self::Proposed(i) | Self::Denied(i) => i,
        }
    }

    pub(crate) fn from_row(row: Invocation) -> Self {
        match row.state {
            InvocationState::Proposed => Self::Proposed(row),
            InvocationState::Denied | InvocationState::Expired => Self::Denied(row),
            InvocationState::Succeeded | InvocationState::Failed | InvocationState::Resolved => {
                Self::Completed(row)
            }
            InvocationState::Pending
            | InvocationState::AwaitingApproval
            | InvocationState::AwaitingAnswer
            | InvocationState::Approved
            | InvocationState::Running
            | InvocationState::InDoubt => Self::Parked(row),
        }
    }
}

/// Why a call could not even be recorded.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// No tool of that name in the scope.
    #[error("unknown tool `{0}`")]
    UnknownTool(String),
    /// No such scope (an agent that is not declared).
    #[error("unknown scope {0:?}")]
    UnknownScope(ScopeId),
    /// The ledger failed (database lost, corrupt row, …).
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// One scope's tools, prepared once: digest and compiled argument checks.
struct PreparedScope {
    scope: Scope,
    digest: String,
    checks: HashMap<String, ArgumentCheck>,
}

/// Everything a call needs, built once at boot.
pub struct Gateway {
    store: Arc<dyn Store>,
    egress: GuardedClient,
    mcp: McpClient,
    credentials: Arc<Credentials>,
    connections: BTreeMap<String, ApiConnection>,
    mcp_connections: HashMap<String, ConnectionSpec>,
    scopes: HashMap<ScopeId, PreparedScope>,
    local: HashMap<String, Arc<dyn LocalTool>>,
    limits: RateLimits,
    owner: String,
    lease: Duration,
}

/// Builds a [`Gateway`].
pub struct GatewayBuilder {
    gateway: Gateway,
}

impl GatewayBuilder {
    /// Adds a scope (the gateway scope, or an agent's).
    #[must_use]
    pub fn scope(mut self, scope: Scope) -> Self {
        let checks = scope
            .tools()
            .iter()
            .filter_map(|t| {
                let check = ArgumentCheck::new(&t.definition.input_schema).ok()?;
                Some((t.definition.name.to_string(), check))
            })
            .collect();
        let digest = scope.digest();
        self.gateway.scopes.insert(
            scope.id.clone(),
            PreparedScope {
                scope,
                digest,
                checks,
            },
        );
        self
    }

    /// Registers a local tool's implementation (its definition must be in a scope too).
    #[must_use]
    pub fn local(mut self, tool: Arc<dyn LocalTool>) -> Self {
        self.gateway
            .local
            .insert(tool.definition().name.to_string(), tool);
        self
    }

    /// The `[connections]` of `airlock.toml`.
    #[must_use]
    pub fn connections(mut self, connections: BTreeMap<String, ApiConnection>) -> Self {
        self.gateway.connections = connections;
        self
    }

    /// The connection files whose discovered tools are in the gateway scope.
    #[must_use]
    pub fn mcp_connections(mut self, connections: Vec<ConnectionSpec>) -> Self {
        self.gateway.mcp_connections = connections
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

    /// The gateway.
    #[must_use]
    pub fn build(self) -> Gateway {
        self.gateway
    }
}

impl Gateway {
    /// Starts building a gateway over `store`, sending through `egress`.
    #[must_use]
    pub fn builder(
        store: Arc<dyn Store>,
        egress: GuardedClient,
        credentials: Arc<Credentials>,
    ) -> GatewayBuilder {
        let owner = format!("airlock-{}-{}", std::process::id(), uuid_suffix());
        GatewayBuilder {
            gateway: Gateway {
                store,
                mcp: McpClient::new(egress.clone()),
                egress,
                credentials,
                connections: BTreeMap::new(),
                mcp_connections: HashMap::new(),
                scopes: HashMap::new(),
                local: HashMap::new(),
                limits: RateLimits::default(),
                owner,
                lease: LEASE,
            },
        }
    }

    /// The ledger.
    #[must_use]
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The tools of a scope.
    #[must_use]
    pub fn scope(&self, id: &ScopeId) -> Option<&Scope> {
        self.scopes.get(id).map(|p| &p.scope)
    }

    /// Opens a session for a caller on `channel` in `scope`.
    pub async fn open_session(
        &self,
        channel: &str,
        principal: Option<String>,
        scope: &ScopeId,
    ) -> Result<SessionId, GatewayError> {
        let id = SessionId::new();
        self.open_session_as(id, channel, principal, scope).await?;
        Ok(id)
    }

    /// Opens session `id` (a fresh [`SessionId::new`]). A caller that starts its first call
    /// alongside, without waiting for this, gets both written in one commit.
    pub async fn open_session_as(
        &self,
        id: SessionId,
        channel: &str,
        principal: Option<String>,
        scope: &ScopeId,
    ) -> Result<(), GatewayError> {
        let metadata = json!({ "scope": scope_key(scope) });
        let new = NewSession {
            channel: channel.to_owned(),
            principal,
            metadata,
        };
        self.store.create_session(id, new).await?;
        Ok(())
    }

    /// Calls `tool` with `arguments` along the one path.
    pub async fn call(
        &self,
        ctx: &CallContext,
        tool: &str,
        arguments: Value,
    ) -> Result<Outcome, GatewayError> {
        let outcome = self.record_and_run(ctx, tool, arguments).await;
        if let Ok(outcome) = &outcome {
            count(outcome);
        }
        outcome
    }

    async fn record_and_run(
        &self,
        ctx: &CallContext,
        tool: &str,
        arguments: Value,
    ) -> Result<Outcome, GatewayError> {
        let prepared = self
            .scopes
            .get(&ctx.scope)
            .ok_or_else(|| GatewayError::UnknownScope(ctx.scope.clone()))?;
        let spec = prepared
            .scope
            .get(tool)
            .ok_or_else(|| GatewayError::UnknownTool(tool.to_owned()))?;
        let invalid = prepared
            .checks
            .get(tool)
            .and_then(|c| c.prepare(&arguments).err())
            .or_else(|| oversized_proposal(spec, &arguments));
        let new = new_invocation(ctx, spec, arguments, &prepared.digest, invalid.is_some());
        // An ungated call is recorded and claimed in one durable commit; rate-limited and
        // transactional calls take the general path (limit first; the transaction claims).
        let fast = invalid.is_none()
            && spec.policy.rate_limit.is_none()
            && spec.policy.effect != airlock_spec::Effect::Transactional;
        let recorded = if fast {
            self.store
                .record_and_claim(new, &self.owner, self.lease)
                .await?
        } else {
            self.store.record(new).await?
        };
        if recorded.created && recorded.invocation.state == InvocationState::Running {
            return self.run_claimed(prepared, spec, recorded.invocation).await;
        }
        if let (Some(error), true) = (invalid, recorded.created) {
            // Bad arguments are stored on their own row and never run, whatever the policy.
            let id = recorded.invocation.id;
            self.store.claim(id, &self.owner, self.lease).await?;
            let row = self.store.finish(id, &self.owner, Err(error)).await?;
            return Ok(Outcome::Completed(row));
        }
        self.advance(prepared, spec, recorded.invocation).await
    }

    /// Runs an approved row if this caller claims it first (the await tool, the worker).
    pub async fn continue_approved(&self, id: InvocationId) -> Result<Outcome, GatewayError> {
        let row = self.store.get(id).await?;
        let session = self.store.get_session(row.session_id).await?;
        let scope = session
            .metadata
            .get("scope")
            .and_then(Value::as_str)
            .and_then(parse_scope_key);
        let prepared = scope.as_ref().and_then(|s| self.scopes.get(s));
        match prepared.and_then(|p| Some((p, p.scope.get(&row.tool)?))) {
            Some((prepared, spec)) => self.advance(prepared, spec, row).await,
            // An approved call whose tool is gone fails once, instead of waiting forever.
            None if row.state == InvocationState::Approved => {
                let error = crate::ToolError::new(
                    crate::ToolErrorKind::BadDeclaration,
                    format!(
                        "tool `{}` is no longer declared in this call's scope",
                        row.tool
                    ),
                );
                Ok(Outcome::from_row(self.fail_unclaimed(row, error).await?))
            }
            None => Ok(Outcome::from_row(row)),
        }
    }

    /// Claims and executes a pending or approved row; any other state is returned as it is.
    ///
    /// An approved row runs on the person's approval, without the policy again (ledger case
    /// 14: no rate limit), but only under the definitions it was approved for (case 15) —
    /// whichever way it arrives here: the await tool, the worker, or a client's retry of the
    /// same call id.
    async fn advance(
        &self,
        prepared: &PreparedScope,
        spec: &ToolSpec,
        row: Invocation,
    ) -> Result<Outcome, GatewayError> {
        let refusal = match row.state {
            InvocationState::Approved if prepared.digest != row.definitions_digest => {
                Some(crate::ToolError::new(
                    crate::ToolErrorKind::BadDeclaration,
                    "the tool's declaration changed after this call was recorded; call it again",
                ))
            }
            InvocationState::Approved => None,
            InvocationState::Pending => {
                self.limits
                    .check(&prepared.scope.id, spec, row.principal.as_deref())
            }
            _ => return Ok(Outcome::from_row(row)),
        };
        if let Some(err) = refusal {
            return Ok(Outcome::Completed(self.fail_unclaimed(row, err).await?));
        }
        if let Some(body) = self.transactional_body(spec, &row) {
            return match self
                .store
                .run_transactional(row.id, &self.owner, body)
                .await
            {
                Ok(done) => Ok(Outcome::from_row(done)),
                Err(LedgerError::Taken { .. }) => {
                    Ok(Outcome::from_row(self.store.get(row.id).await?))
                }
                Err(e) => Err(e.into()),
            };
        }
        let claimed = match self.store.claim(row.id, &self.owner, self.lease).await {
            Ok(claimed) => claimed,
            // Another claimer won the race: it runs the call, we report where it stands.
            Err(LedgerError::Taken { .. }) => {
                return Ok(Outcome::from_row(self.store.get(row.id).await?));
            }
            Err(e) => return Err(e.into()),
        };
        self.run_claimed(prepared, spec, claimed).await
    }

    /// Executes a row this gateway has claimed, and stores its result.
    async fn run_claimed(
        &self,
        prepared: &PreparedScope,
        spec: &ToolSpec,
        claimed: Invocation,
    ) -> Result<Outcome, GatewayError> {
        let arguments = prepared
            .checks
            .get(spec.definition.name.as_str())
            .map(|c| c.prepare(&claimed.arguments));
        let finished = self.execute(spec, claimed, arguments).await?;
        let outcome = if finished.state == InvocationState::Failed {
            "failed"
        } else {
            "succeeded"
        };
        metrics::counter!("airlock_tool_runs_total", "tool" => finished.tool.clone(), "outcome" => outcome)
            .increment(1);
        Ok(Outcome::from_row(finished))
    }

    /// A call refused before it ran (rate limit, stale approval) is stored as failed. If
    /// another claimer got the row first (the worker settling the same stale approval as a
    /// client's retry), the row is returned as that claimer leaves it.
    async fn fail_unclaimed(
        &self,
        row: Invocation,
        error: crate::ToolError,
    ) -> Result<Invocation, GatewayError> {
        match self.store.claim(row.id, &self.owner, self.lease).await {
            Ok(_) => {}
            Err(LedgerError::Taken { .. }) => return Ok(self.store.get(row.id).await?),
            Err(e) => return Err(e.into()),
        }
        Ok(self.store.finish(row.id, &self.owner, Err(error)).await?)
    }
}

/// Counts a call answered by [`Gateway::call`] by tool and the outcome its caller saw
/// (`airlock_tool_calls_total`, served at `/metrics`; a retry of a call id is answered, and
/// counted, again), and a failed one also by its kind (`airlock_tool_failures_total`, the
/// stored word). Executions, however they were started, are `airlock_tool_runs_total`.
fn count(outcome: &Outcome) {
    let row = outcome.invocation();
    let what = match outcome {
        Outcome::Completed(_) if row.state == InvocationState::Failed => "failed",
        Outcome::Completed(_) => "succeeded",
        Outcome::Parked(_) => "parked",
        Outcome::Proposed(_) => "proposed",
        Outcome::Denied(_) => "denied",
    };
    metrics::counter!("airlock_tool_calls_total", "tool" => row.tool.clone(), "outcome" => what)
        .increment(1);
    if let (Outcome::Completed(_), Some(error)) = (outcome, &row.error) {
        metrics::counter!("airlock_tool_failures_total", "tool" => row.tool.clone(), "kind" => error.kind.as_str())
            .increment(1);
    }
}

/// Seed 001: a proposal's arguments are at most 16 KB (it is returned to the caller whole).
const MAX_PROPOSAL_BYTES: usize = 16 * 1024;

/// A proposal whose arguments are over [`MAX_PROPOSAL_BYTES`], as the tool error the model gets.
fn oversized_proposal(spec: &ToolSpec, arguments: &Value) -> Option<crate::ToolError> {
    if spec.policy.mode != airlock_spec::Mode::Propose {
        return None;
    }
    let size = serde_json::to_string(arguments).map_or(usize::MAX, |s| s.len());
    (size > MAX_PROPOSAL_BYTES).then(|| {
        crate::ToolError::new(
            crate::ToolErrorKind::BadArguments,
            format!(
                "the proposal's arguments are {size} bytes as JSON; the limit is {MAX_PROPOSAL_BYTES}: nothing was proposed"
            ),
        )
    })
}

fn new_invocation(
    ctx: &CallContext,
    spec: &ToolSpec,
    arguments: Value,
    digest: &str,
    invalid: bool,
) -> NewInvocation {
    let mut new = NewInvocation::new(
        ctx.session,
        ctx.call_id.clone(),
        spec.definition.name.as_str(),
        arguments,
        digest,
    );
    new.source_kind = spec.source.kind();
    new.effect = spec.policy.effect;
    new.principal = ctx.principal.clone();
    new.approval_ttl = spec.policy.approval_ttl;
    if !invalid {
        new.approval = spec.policy.approval;
        new.mode = spec.policy.mode;
        if matches!(spec.source, ToolSource::Builtin(Builtin::AskHuman)) {
            new.kind = CallKind::Question;
        }
    }
    new
}

/// How a scope is written in session metadata.
pub(crate) fn scope_key(scope: &ScopeId) -> String {
    match scope {
        ScopeId::Gateway => "gateway".to_owned(),
        ScopeId::Agent(name) => format!("agent:{name}"),
    }
}

fn parse_scope_key(key: &str) -> Option<ScopeId> {
    match key {
        "gateway" => Some(ScopeId::Gateway),
        other => other
            .strip_prefix("agent:")
            .map(|n| ScopeId::Agent(n.to_owned())),
    }
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
