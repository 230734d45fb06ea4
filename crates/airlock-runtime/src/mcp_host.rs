//! The MCP endpoint's adapter: [`McpHost`], the gateway as the endpoint's [`ToolHost`] and
//! [`OfferHost`](airlock_mcp::OfferHost), translating rows into what an MCP client sees. What
//! only the endpoint needs lives here, so [`Gateway`] keeps the one call path. Every `tools/call` is its own session on
//! channel `mcp`, recorded under the authenticated principal, through [`Gateway::call`]; a call
//! under the client's own key has the session that key names, so a re-send is the same row. The
//! await tool (and a task's `get`) long-polls the ledger (woken by its wakeups, never by
//! polling), runs an approved call itself if it claims it first, and only shows a caller its
//! own calls made on the MCP channel from the same scope, with who decided them.
//! Withdrawing (a cancelled task) is a denial recorded under the caller's own name with a
//! fixed reason, so a withdrawn call reads back as withdrawn after any restart. A call its
//! upstream runs as a task is the exception: a `get` looks once, a cancel is forwarded
//! (`upstream_task`, `gateway::upstream_task`, MCP-78, MCP-79, MCP-83, MCP-84).

mod asked;
mod caller;
mod offers;
mod rounds;
mod upstream_task;
mod view;

use view::{descriptor, host_call};

use std::sync::Arc;
use std::time::Duration;

use airlock_ledger::InvocationState;
use airlock_ledger::{Decision, Invocation, InvocationId};
use airlock_ledger::{LedgerError, NewSession, SessionId};
use airlock_mcp::{
    CallKey, Caller, CallerPrompt, CallerRefusal, CallerUse, HostCall, HostError, ParkedStatus,
    RoundCall, ToolDescriptor, ToolHost,
};
use airlock_spec::{Mode, ScopeId, ToolSource, ToolSpec};
use futures::future::BoxFuture;
use serde_json::{Map, Value, json};

use crate::gateway::{CallContext, Gateway, GatewayError, Resolved};
use crate::outcome::{Outcome, OutcomeKind};
use crate::session;

/// The gateway as the MCP endpoint sees it: every `tools/call`, await, withdrawal, round and
/// offer of the endpoint goes through one of these onto the gateway's one call path.
#[derive(Clone)]
pub struct McpHost {
    gateway: Arc<Gateway>,
}

impl McpHost {
    /// The endpoint's host for `gateway`.
    pub fn new(gateway: Arc<Gateway>) -> Self {
        Self { gateway }
    }
}

/// The endpoint names an unknown scope by its agent: only an agent's URL can name none.
fn unknown_scope(scope: &ScopeId) -> HostError {
    match scope {
        ScopeId::Gateway => HostError::UnknownScope(scope.to_string()),
        ScopeId::Agent(name) => HostError::UnknownScope(name.clone()),
    }
}

/// What the endpoint answers for a call the gateway could not record.
fn host_error(error: GatewayError) -> HostError {
    match error {
        GatewayError::UnknownTool(name) => HostError::UnknownTool(name),
        e @ (GatewayError::CallIdReused { .. } | GatewayError::BadEdit { .. }) => {
            HostError::InvalidParams(e.to_string())
        }
        e @ (GatewayError::UnknownScope(_) | GatewayError::Ledger(_)) => internal(&e),
    }
}

fn internal(error: &GatewayError) -> HostError {
    tracing::error!(%error, "MCP call failed inside the gateway");
    HostError::Internal(error.to_string())
}

impl McpHost {
    async fn mcp_call(
        &self,
        scope: &ScopeId,
        caller: &Caller,
        name: &str,
        arguments: Value,
        key: Option<&CallKey>,
    ) -> Result<HostCall, HostError> {
        // The call's one lookup, before anything is written: an unknown name leaves no empty
        // session behind (and costs no commit).
        let tool = match self.gateway.resolve(scope, name) {
            Ok(tool) => tool,
            Err(GatewayError::UnknownScope(_)) => return Err(unknown_scope(scope)),
            Err(e) => return Err(host_error(e)),
        };
        let principal = Some(caller.principal.clone());
        let new = session::on_mcp(scope, &caller.principal);
        let ctx = CallContext {
            scope: scope.clone(),
            session: SessionId::new(),
            call_id: "mcp".to_owned(),
            principal,
            groups: Some(caller.groups.clone()),
            channel: "mcp",
            downstream: caller.downstream.clone(),
        };
        let called = match key {
            // The session is opened by the job that records the call, in its commit
            // (LEDGER-90).
            None => {
                self.gateway
                    .call_resolved(&ctx, tool, arguments, Some(new))
                    .await
            }
            Some(key) => self.keyed_call(ctx, new, tool, arguments, key).await?,
        };
        called
            .map(|outcome| host_call(&outcome))
            .map_err(host_error)
    }

    /// A call under the client's own key (MCP-22). Its session is derived from the principal,
    /// the scope and the key, so a re-send — a new JSON-RPC id, a later HTTP request, another
    /// replica — finds the row the first send recorded: the ledger's (session, call id) dedupe,
    /// exact across processes, makes concurrent sends one row. A re-send naming another tool or
    /// other arguments is refused, never answered with the first call's result.
    async fn keyed_call(
        &self,
        mut ctx: CallContext,
        mut new: NewSession,
        tool: Resolved<'_>,
        arguments: Value,
        key: &CallKey,
    ) -> Result<Result<Outcome, GatewayError>, HostError> {
        let seed = json!(["mcp", ctx.principal, ctx.scope.to_string(), key.as_str()]);
        ctx.session = SessionId::derived(&seed.to_string());
        new.metadata["call_key"] = Value::String(key.as_str().to_owned());
        match self.gateway.store().get_session(ctx.session).await {
            Ok(_) => {
                let name = tool.1.spec.definition.name.as_str();
                self.same_call(&ctx, name, &arguments, key).await?;
                Ok(self
                    .gateway
                    .call_resolved(&ctx, tool, arguments, None)
                    .await)
            }
            Err(LedgerError::SessionNotFound(_)) => {
                // Concurrent sends of one key open one session: its own job, whose conflict
                // is answered below, not the record's, whose conflict would fail the call.
                let (opened, called) = futures::join!(
                    self.gateway.store().create_session(ctx.session, new),
                    self.gateway.call_resolved(&ctx, tool, arguments, None)
                );
                if let Err(e) = opened {
                    // A concurrent send of the same key opened it first; otherwise it failed.
                    let theirs = self.gateway.store().get_session(ctx.session).await;
                    theirs.map_err(|_| internal(&e.into()))?;
                }
                Ok(called)
            }
            Err(e) => Err(internal(&e.into())),
        }
    }

    /// Refuses a re-send under `key` that is not the call first recorded under it.
    async fn same_call(
        &self,
        ctx: &CallContext,
        name: &str,
        arguments: &Value,
        key: &CallKey,
    ) -> Result<(), HostError> {
        let rows = self.gateway.store().session_invocations(ctx.session).await;
        let rows = rows.map_err(|e| internal(&e.into()))?;
        match rows.iter().find(|r| r.call_id == ctx.call_id) {
            Some(first) if first.tool != name || first.arguments != *arguments => {
                Err(HostError::InvalidParams(format!(
                    "call key `{}` was already used for another call (tool `{}`, other arguments or both): use a new key for a new call",
                    key.as_str(),
                    first.tool
                )))
            }
            _ => Ok(()),
        }
    }

    /// The row `id`, if `caller` may see it from `scope`: its own call, made through the MCP
    /// endpoint of that scope. Anything else is refused naming why: unknown, made on another
    /// channel (settled there), another principal's, or made through another endpoint URL.
    async fn mcp_row(
        &self,
        scope: &ScopeId,
        caller: &Caller,
        id: &str,
    ) -> Result<Invocation, HostError> {
        let not_found = || HostError::NotFound(format!("invocation {id}"));
        let id: InvocationId = id.parse().map_err(|_| not_found())?;
        let row = match self.gateway.store().get(id).await {
            Ok(row) => row,
            Err(LedgerError::NotFound(_)) => return Err(not_found()),
            Err(e) => return Err(internal(&e.into())),
        };
        // Calls made on other channels (an agent run, the CLI) are settled there, not here.
        let opened = self
            .gateway
            .store()
            .get_session(row.session_id)
            .await
            .map_err(|e| internal(&e.into()))?;
        if opened.channel != "mcp" {
            return Err(HostError::NotFound(format!(
                "invocation {id} was not made through the MCP endpoint"
            )));
        }
        if row.principal.as_deref() != Some(caller.principal.as_str()) {
            return Err(HostError::NotFound(format!(
                "invocation {id} belongs to another principal"
            )));
        }
        if session::scope(&opened).as_ref() != Some(scope) {
            // Worded for the model reading it, not in the scope's written form.
            let url = match scope {
                ScopeId::Gateway => "gateway".to_owned(),
                ScopeId::Agent(name) => format!("agent {name}"),
            };
            return Err(HostError::NotFound(format!(
                "invocation {id} was not made through this endpoint URL ({url})"
            )));
        }
        Ok(row)
    }

    async fn mcp_await(
        &self,
        scope: &ScopeId,
        caller: &Caller,
        id: &str,
        wait: Duration,
    ) -> Result<HostCall, HostError> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut row = self.mcp_row(scope, caller, id).await?;
        if row.runs_as_upstream_task() {
            match self.look_at_upstream_task(row).await? {
                Ok(running) => return Ok(running),
                Err(settled) => row = settled,
            }
        }
        loop {
            if row.state == InvocationState::Approved {
                // Run it if we claim it first; if someone else did, wait for their result.
                let outcome = self
                    .gateway
                    .continue_approved(row.id)
                    .await
                    .map_err(|e| internal(&e))?;
                row = outcome.invocation().clone();
            }
            let outcome = Outcome::from_row(row.clone());
            if outcome.kind() != OutcomeKind::Parked || tokio::time::Instant::now() >= deadline {
                return Ok(host_call(&outcome));
            }
            // Only the wait is cut short at shutdown, never a call this await runs above.
            let changed = tokio::select! {
                changed = self.gateway.store().wait_for_change(row.id, Some(row.version), deadline) => changed,
                () = self.gateway.until_long_polls_end() => return Ok(host_call(&outcome)),
            };
            row = changed.map_err(|e| internal(&e.into()))?;
        }
    }

    async fn mcp_withdraw(
        &self,
        scope: &ScopeId,
        caller: &Caller,
        id: &str,
    ) -> Result<HostCall, HostError> {
        let row = self.mcp_row(scope, caller, id).await?;
        let waiting = matches!(
            row.state,
            InvocationState::AwaitingApproval
                | InvocationState::AwaitingAnswer
                | InvocationState::AwaitingCredential
        );
        let row = if row.runs_as_upstream_task() {
            self.cancel_upstream_task(row)
                .await
                .map_err(|e| internal(&e))?
        } else if waiting {
            match crate::decisions::record(
                self.gateway.store().as_ref(),
                &[],
                row.id,
                &caller.principal,
                Decision::Withdraw,
                "mcp",
            )
            .await
            {
                Ok(row) => row,
                // Decided, expired or moved on a moment ago: report what stands.
                Err(
                    LedgerError::AlreadyDecided { .. }
                    | LedgerError::WrongState { .. }
                    | LedgerError::Expired { .. },
                ) => self.mcp_row(scope, caller, id).await?,
                Err(e) => return Err(internal(&e.into())),
            }
        } else {
            row
        };
        Ok(host_call(&Outcome::from_row(row)))
    }
}

impl McpHost {
    /// Whether the MCP `caller` may see `spec` of `scope` under `[[access]]`.
    fn caller_sees(&self, scope: &ScopeId, caller: &Caller, spec: &ToolSpec) -> bool {
        let name = spec.definition.name.as_str();
        self.gateway
            .may_see(scope, Some(&caller.principal), Some(&caller.groups), name)
    }
}

/// A sub-agent, a consent-gated action, a proposing write: only a run calls them (POLICY-50).
fn only_in_a_run(spec: &ToolSpec) -> bool {
    let proposes = spec.policy.mode == Mode::Propose;
    matches!(spec.source, ToolSource::Agent(_)) || spec.policy.confirm || proposes
}

impl ToolHost for McpHost {
    fn list_tools(
        &self,
        scope: &ScopeId,
        caller: &Caller,
    ) -> Result<Vec<ToolDescriptor>, HostError> {
        let tools = self
            .gateway
            .scope(scope)
            .ok_or_else(|| unknown_scope(scope))?;
        // A sub-agent runs only inside an agent run: not a tool here (docs/rules.md AGENT-30);
        // a tool no `[[access]]` rule grants the caller is not shown (POLICY-46).
        let callable = tools
            .tools()
            .iter()
            .filter(|t| !only_in_a_run(t) && self.caller_sees(scope, caller, t))
            .filter(|t| {
                !self
                    .gateway
                    .definitions()
                    .is_removed(t.definition.name.as_str())
            });
        Ok(callable.map(descriptor).collect())
    }

    fn input_schema(
        &self,
        scope: &ScopeId,
        caller: &Caller,
        name: &str,
    ) -> Option<Map<String, Value>> {
        let spec = self
            .gateway
            .scope(scope)?
            .get(name)
            .filter(|t| !only_in_a_run(t))?;
        if !self.caller_sees(scope, caller, spec) {
            return None;
        }
        spec.definition.input_schema.as_object().cloned()
    }

    fn requires_tasks(&self, scope: &ScopeId, caller: &Caller, name: &str) -> bool {
        let spec = self.gateway.scope(scope).and_then(|tools| tools.get(name));
        spec.is_some_and(|t| {
            matches!(&t.source, ToolSource::McpInline(m) if m.requires_tasks)
                && self.caller_sees(scope, caller, t)
        })
    }

    fn call_tool<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        name: &'a str,
        arguments: Value,
    ) -> BoxFuture<'a, Result<HostCall, HostError>> {
        Box::pin(self.mcp_call(scope, caller, name, arguments, None))
    }

    fn call_tool_keyed<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        name: &'a str,
        arguments: Value,
        key: Option<&'a CallKey>,
    ) -> BoxFuture<'a, Result<HostCall, HostError>> {
        Box::pin(self.mcp_call(scope, caller, name, arguments, key))
    }

    fn await_decision<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        invocation_id: &'a str,
        wait: Duration,
    ) -> BoxFuture<'a, Result<HostCall, HostError>> {
        Box::pin(self.mcp_await(scope, caller, invocation_id, wait))
    }

    fn withdraw<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        invocation_id: &'a str,
    ) -> BoxFuture<'a, Result<HostCall, HostError>> {
        Box::pin(self.mcp_withdraw(scope, caller, invocation_id))
    }

    fn update_task<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        invocation_id: &'a str,
        responses: &'a Map<String, Value>,
    ) -> BoxFuture<'a, Result<(), HostError>> {
        Box::pin(self.mcp_update(scope, caller, invocation_id, responses))
    }

    fn caller_prompt(
        &self,
        scope: &ScopeId,
        tool: &str,
        status: ParkedStatus,
        arguments: &Value,
    ) -> Option<CallerPrompt> {
        self.mcp_caller_prompt(scope, tool, status, arguments)
    }

    fn decide_as_caller<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        used: CallerUse,
    ) -> BoxFuture<'a, Result<HostCall, CallerRefusal>> {
        Box::pin(self.mcp_decide_as_caller(scope, caller, used))
    }

    fn continue_round<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        round: RoundCall,
    ) -> BoxFuture<'a, Result<HostCall, CallerRefusal>> {
        Box::pin(self.mcp_continue_round(scope, caller, round))
    }

    fn long_polls_ended(&self) -> bool {
        self.gateway.long_polls_ended()
    }
}
