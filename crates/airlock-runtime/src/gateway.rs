//! The one path of a tool call: every channel calls [`Gateway::call`], and nothing else
//! executes tools.
//!
//! resolve the tool in its scope → validate the arguments → record the row (dedupe on
//! session + call id; the ledger applies the approval policy atomically) → policy by state:
//! propose, park, refuse (rate limit, stale approval) or go on → claim → execute by source
//! through the egress guard, renewing the lease → finish. Every tool of a scope has its compiled
//! argument check (a scope with a schema that does not compile is refused when the gateway is
//! built), so no call is recorded runnable or executed unchecked. A call never raises for a tool's own
//! failure: that is stored on the row and returned as a tool error. Only an unknown tool or a
//! lost database is an `Err`. Every [`Outcome`] is read from the row it reports.

mod access;
mod asked;
mod budget;
mod builder;
mod edit;
mod events;
mod new_row;
mod pinned;
mod proposals;
mod reads;
mod run;
mod shutdown;
mod telemetry;
mod upstream_task;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use airlock_egress::GuardedClient;
use airlock_ledger::{
    Invocation, InvocationId, InvocationState, LedgerError, NewSession, RoundUse, SessionId, Store,
};
use airlock_mcp::Downstream;
use airlock_spec::{Credentials, Scope, ScopeId, ToolSource, ToolSpec};
use serde_json::Value;

pub use builder::{GatewayBuilder, InvalidSchema};
pub use events::{HowToDecide, TARGET as EVENTS};
pub use pinned::Definitions;
pub use proposals::{MAX_PROPOSALS_PER_RUN, ProposalRoom, RunCall};
use proposals::{oversized_proposal, proposal_refusal};
pub(crate) use reads::Read;
pub(crate) use upstream_task::{RELAY_LEASE, task_failure};

use crate::arguments::ArgumentCheck;
use crate::error::{ToolError, ToolErrorKind};
use crate::execute::Executors;
use crate::freeze::{self, Covered, FreezeWatch};
use crate::outcome::Outcome;
use crate::rate_limit;
use crate::session;
use new_row::{Carried, new_invocation};

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
    /// The groups of a caller authenticated by a token, held to `[[access]]`; `None`: the
    /// operator's own CLI, which the access policy does not bind (docs/rules.md POLICY-47).
    pub groups: Option<Vec<String>>,
    /// Where the call came from (`mcp`, `cli`, …), as its session was opened; logged.
    pub channel: &'static str,
    /// What the client of the endpoint request this call serves can take back from the
    /// upstream (an input round, the upstream's task, notices): handed on, as a value, to the
    /// MCP target the call runs against. None for every other caller.
    pub downstream: airlock_mcp::Downstream,
}

/// Why a call could not even be recorded.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// No tool of that name in the scope.
    #[error("unknown tool `{0}`")]
    UnknownTool(String),
    /// No such scope (an agent that is not declared).
    #[error("unknown scope `{0}`")]
    UnknownScope(ScopeId),
    /// The call id was recorded before for another tool: a retry must repeat its call.
    #[error("call id `{call_id}` was already used for a call of tool `{tool}`")]
    CallIdReused {
        /// The caller's call id.
        call_id: String,
        /// The tool it was first used for.
        tool: String,
    },
    /// The arguments a person edited into an approval fail a check (docs/rules.md
    /// DECIDE-21); nothing was decided.
    #[error("the edited arguments of {id} are refused: {error}")]
    BadEdit {
        /// The call.
        id: InvocationId,
        /// What is wrong, naming each field (a JSON pointer) or the limit.
        error: ToolError,
    },
    /// The ledger failed (database lost, corrupt row, …).
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// One scope's tools, prepared once: digests and compiled argument checks.
pub(crate) struct PreparedScope {
    scope: Scope,
    /// The scope's digest, which rows recorded before tool digests hold (see
    /// [`PreparedTool::recorded_under`]).
    digest: String,
    tools: HashMap<String, PreparedTool>,
}

/// One tool of a prepared scope: it cannot exist without its argument check.
pub(crate) struct PreparedTool {
    pub(crate) spec: ToolSpec,
    check: ArgumentCheck,
    /// The tool's own digest in its scope, stored on its rows; approvals and `once` grants
    /// are bound to it (docs/rules.md POLICY-6).
    digest: String,
}

impl PreparedTool {
    /// Whether a row recorded under `digest` was recorded against this tool's current
    /// definition. A row written before rows held tool digests holds its scope's digest: an
    /// unchanged scope means an unchanged tool, so it is accepted too.
    fn recorded_under(&self, digest: &str, scope: &PreparedScope) -> bool {
        digest == self.digest || digest == scope.digest
    }
}

/// A tool looked up in its prepared scope: the one lookup of a call.
pub(crate) type Resolved<'a> = (&'a PreparedScope, &'a PreparedTool);

/// Everything a call needs, built once at boot.
pub struct Gateway {
    store: Arc<dyn Store>,
    pub(crate) executors: Executors,
    scopes: HashMap<ScopeId, PreparedScope>,
    owner: String,
    lease: Duration,
    /// Cancelled at shutdown (see [`GatewayBuilder::shutdown`]).
    long_polls: tokio_util::sync::CancellationToken,
    /// What the serving process waits for at shutdown (see [`GatewayBuilder::shutdown`]).
    tasks: tokio_util::task::TaskTracker,
    /// What a park's log line says to do; the binary knows its commands and routes.
    how_to_decide: Option<HowToDecide>,
    /// `[[access]]`: who may see and call what (empty: no filtering).
    access: airlock_spec::AccessPolicy,
    /// Connection tools removed by their server or withheld at boot (OPS-49, OPS-51).
    definitions: Definitions,
    /// What the scopes' upstreams offer beside tools (docs/rules.md MCP-54).
    offered: crate::offered::Offered,
    /// The connections supplied with the runs this process serves or holds parked.
    supplied: crate::execute::SuppliedRuns,
    /// The principals' own credentials (docs/rules.md CALL-11), when any connection takes them.
    vault: Option<Arc<crate::vault::PersonalVault>>,
    /// This process's copy of the freezes in force (docs/rules.md POLICY-51).
    freezes: Arc<FreezeWatch>,
    /// `[telemetry]`'s tracer for the traces this process begins itself (OPS-80).
    tracer: Option<airlock_egress::trace::RequestTracer>,
}

impl Gateway {
    /// Starts building a gateway over `store`, sending through `egress`.
    #[must_use]
    pub fn builder(
        store: Arc<dyn Store>,
        egress: GuardedClient,
        credentials: Arc<Credentials>,
    ) -> GatewayBuilder {
        GatewayBuilder::new(store, egress, credentials)
    }

    /// The principals' own credentials, when a connection takes them (docs/rules.md CALL-11).
    #[must_use]
    pub fn vault(&self) -> Option<&Arc<crate::vault::PersonalVault>> {
        self.vault.as_ref()
    }

    /// The ledger.
    #[must_use]
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The lease this process drives an agent run under: the same owner and length as its
    /// calls' (docs/rules.md AGENT-57).
    pub(crate) fn run_lease(&self) -> airlock_ledger::RunLease {
        airlock_ledger::RunLease {
            owner: self.owner.clone(),
            ttl: self.lease,
        }
    }

    /// How an operator decides parked row `row`, as the serving binary words it (the command
    /// and route it set with [`GatewayBuilder::how_to_decide`]).
    #[must_use]
    pub fn how_to_decide(&self, row: &Invocation) -> Option<String> {
        self.how_to_decide.as_ref().and_then(|how| how(row))
    }

    /// What boot found of the connection tools' definitions against their pins.
    #[must_use]
    pub fn definitions(&self) -> &Definitions {
        &self.definitions
    }

    /// The freezes in force, and the way to change them.
    #[must_use]
    pub fn freezes(&self) -> &Arc<FreezeWatch> {
        &self.freezes
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
        let new = NewSession {
            channel: channel.to_owned(),
            principal,
            metadata: session::metadata(scope),
        };
        self.store.create_session(id, new).await?;
        Ok(())
    }

    /// Calls `tool` with `arguments` along the one path, for a caller outside an agent run:
    /// nobody receives a proposal there, so a proposing tool refuses (docs/rules.md POLICY-12).
    pub async fn call(
        &self,
        ctx: &CallContext,
        tool: &str,
        arguments: Value,
    ) -> Result<Outcome, GatewayError> {
        let tool = self.resolve(&ctx.scope, tool)?;
        self.call_as(ctx, None, tool, arguments, Carried::default())
            .await
    }

    /// [`Gateway::call`] of a tool its caller has already resolved, so that a call looks its
    /// tool up once (the MCP endpoint refuses an unknown one before it writes anything). `opens`:
    /// the call's new session, opened in the commit that records it (LEDGER-90).
    pub(crate) async fn call_resolved(
        &self,
        ctx: &CallContext,
        tool: Resolved<'_>,
        arguments: Value,
        opens: Option<NewSession>,
    ) -> Result<Outcome, GatewayError> {
        let carried = Carried {
            follows: None,
            opens,
        };
        self.call_as(ctx, None, tool, arguments, carried).await
    }

    /// Calls `tool` with `arguments` as the next round of a relayed MCP call (docs/rules.md
    /// LEDGER-62): recorded without gating again, its state's nonce used in the commit that
    /// records it, with its new session `opens` (LEDGER-90).
    pub(crate) async fn call_round(
        &self,
        ctx: &CallContext,
        (tool, arguments): (&str, Value),
        follows: RoundUse,
        opens: NewSession,
    ) -> Result<Outcome, GatewayError> {
        let tool = self.resolve(&ctx.scope, tool)?;
        let carried = Carried {
            follows: Some(follows),
            opens: Some(opens),
        };
        self.call_as(ctx, None, tool, arguments, carried).await
    }

    /// Calls `tool` with `arguments` along the one path for agent run `run` (docs/rules.md
    /// AGENT-2): the row carries the run's id, and a proposal is recorded only when the run has
    /// room for it and a caller to receive it.
    pub async fn call_in_run(
        &self,
        ctx: &CallContext,
        run: &RunCall,
        tool: &str,
        arguments: Value,
    ) -> Result<Outcome, GatewayError> {
        let tool = self.resolve(&ctx.scope, tool)?;
        self.call_as(ctx, Some(run), tool, arguments, Carried::default())
            .await
    }

    async fn call_as(
        &self,
        ctx: &CallContext,
        run: Option<&RunCall>,
        tool: Resolved<'_>,
        arguments: Value,
        carried: Carried,
    ) -> Result<Outcome, GatewayError> {
        events::received(ctx, tool.1.spec.definition.name.as_str());
        let began = std::time::Instant::now();
        let outcome = self
            .record_and_run(ctx, run, tool, arguments, carried)
            .await;
        if let Ok(outcome) = &outcome {
            let what = telemetry::count(outcome);
            telemetry::answered(ctx.channel, outcome, what, began);
        }
        outcome
    }

    /// Validate, record; then run at once, fail a bad call, or go on by state.
    async fn record_and_run(
        &self,
        ctx: &CallContext,
        run: Option<&RunCall>,
        (prepared, tool): Resolved<'_>,
        arguments: Value,
        carried: Carried,
    ) -> Result<Outcome, GatewayError> {
        let spec = &tool.spec;
        let room = run.map_or(ProposalRoom::NoReceiver, |r| r.proposals);
        let shares = budget::shares(spec, ctx, run, &arguments);
        let invalid = self
            .definitions
            .removed_refusal(spec)
            .or_else(|| validate(tool, &arguments))
            .or_else(|| shares.as_ref().err().cloned())
            .or_else(|| proposal_refusal(spec, room))
            .or_else(|| confirm_refusal(spec, run));
        let verdict = self.verdict(ctx, spec.definition.name.as_str());
        let mut new = new_invocation(ctx, spec, arguments, &tool.digest, invalid.is_some());
        new.run_id = run.map(|r| r.run);
        new.follows = carried.follows;
        new.opens = carried.opens;
        // A later round of a relayed call is the same call: its first round took the shares.
        if invalid.is_none() && new.follows.is_none() {
            new.shares = shares.unwrap_or_default();
        }
        let covered = Covered::call(&ctx.scope, ctx.principal.as_deref(), spec);
        if let Some(frozen) = self.freezes.covering(&covered) {
            // Refused before any policy, in the freeze's name (POLICY-52).
            new.refusal = Some(freeze::refusal(&frozen));
        } else if verdict == airlock_spec::Verdict::Refused {
            // Recorded as the policy's denial, never as a runnable call (POLICY-45).
            new.refusal = Some(access::refusal(ctx, spec.definition.name.as_str()));
        } else if invalid.is_none() {
            new.approval = access::approval(verdict, new.approval);
        }
        // An ungated call is recorded and claimed in one durable commit; rate-limited and
        // transactional calls take the general path (limit first; the transaction claims).
        let fast = invalid.is_none()
            && new.refusal.is_none()
            && !rate_limit::is_limited(spec)
            && spec.policy.effect != airlock_spec::Effect::Transactional;
        let recorded = if fast {
            self.store
                .record_and_claim(new, &self.owner, self.lease)
                .await?
        } else {
            self.store.record(new).await?
        };
        if !recorded.created && recorded.invocation.tool != spec.definition.name.as_str() {
            // Never run (or report) one tool's row as another's.
            return Err(GatewayError::CallIdReused {
                call_id: ctx.call_id.clone(),
                tool: recorded.invocation.tool,
            });
        }
        if recorded.created {
            events::recorded(&recorded.invocation, self.how_to_decide.as_ref());
            telemetry::recorded(&recorded.invocation);
        }
        if recorded.created && recorded.invocation.state == InvocationState::Running {
            return self
                .run_claimed(tool, recorded.invocation, &ctx.downstream)
                .await;
        }
        let refused = recorded.invocation.state == InvocationState::Denied;
        if let (Some(error), true, false) = (invalid, recorded.created, refused) {
            // Bad arguments are stored on their own row and never run, whatever the policy.
            let row = self.fail_unclaimed(recorded.invocation, error).await?;
            return Ok(Outcome::from_row(row));
        }
        self.advance(prepared, tool, recorded.invocation, &ctx.downstream)
            .await
    }

    /// The prepared scope and the tool `name` in it.
    pub(crate) fn resolve(
        &self,
        scope: &ScopeId,
        name: &str,
    ) -> Result<Resolved<'_>, GatewayError> {
        let prepared = self
            .scopes
            .get(scope)
            .ok_or_else(|| GatewayError::UnknownScope(scope.clone()))?;
        // A sub-agent runs inside its caller's agent run (the runtime's `agent` module), never
        // as a call of this path: outside a run it is not a tool (docs/rules.md AGENT-30).
        let tool = prepared
            .tools
            .get(name)
            .filter(|t| !matches!(t.spec.source, ToolSource::Agent(_)))
            .ok_or_else(|| GatewayError::UnknownTool(name.to_owned()))?;
        Ok((prepared, tool))
    }

    /// Runs an approved row if this caller claims it first (the await tool, the worker).
    pub async fn continue_approved(&self, id: InvocationId) -> Result<Outcome, GatewayError> {
        let row = self.store.get(id).await?;
        let opened = self.store.get_session(row.session_id).await?;
        let resolved = session::scope(&opened).and_then(|s| self.resolve(&s, &row.tool).ok());
        match resolved {
            // Nobody's request waits on it: its upstream relays nothing.
            Some((prepared, tool)) => {
                self.advance(prepared, tool, row, &Downstream::default())
                    .await
            }
            // An approved call whose tool is gone fails once, instead of waiting forever.
            None if row.state == InvocationState::Approved => {
                let error = ToolError::new(
                    ToolErrorKind::BadDeclaration,
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

    /// The owner and lease under which a decision claims its call in its own commit (docs/rules.md
    /// MCP-49): `None` when it must not, because the tool is gone or is transactional (its
    /// claim is the ledger transaction that runs it).
    pub(crate) fn claim_in_decision(
        &self,
        scope: &ScopeId,
        tool: &str,
    ) -> Option<(String, Duration)> {
        let (_, tool) = self.resolve(scope, tool).ok()?;
        let transactional = tool.spec.policy.effect == airlock_spec::Effect::Transactional;
        (!transactional).then(|| (self.owner.clone(), self.lease))
    }

    /// Runs a row a decision claimed for this gateway in its own commit (see
    /// [`Gateway::claim_in_decision`]) under the definition it was recorded for; a row whose
    /// tool changed or is gone since fails, as a stale approval does.
    pub(crate) async fn run_claimed_row(
        &self,
        row: Invocation,
        downstream: &Downstream,
    ) -> Result<Outcome, GatewayError> {
        let opened = self.store.get_session(row.session_id).await?;
        let current = session::scope(&opened)
            .and_then(|s| self.resolve(&s, &row.tool).ok())
            .filter(|(prepared, tool)| tool.recorded_under(&row.definitions_digest, prepared));
        if let Some((_, tool)) = current {
            return self.run_claimed(tool, row, downstream).await;
        }
        Ok(Outcome::from_row(
            self.finish(row.id, Err(declaration_changed())).await?,
        ))
    }

    /// The policy by state, then the claim: a pending or approved row is refused or claimed
    /// and executed; any other state is returned as it is.
    ///
    /// An approved row runs on the person's approval without the policy again (a rate limit
    /// spent nothing while it waited), but only under the definition of its tool it was
    /// approved for — whichever way it arrives here: the await tool, the worker, or a client's
    /// retry of the same call id. Another tool of the scope changing does not matter.
    async fn advance(
        &self,
        prepared: &PreparedScope,
        tool: &PreparedTool,
        row: Invocation,
        downstream: &Downstream,
    ) -> Result<Outcome, GatewayError> {
        let spec = &tool.spec;
        // A row's arguments were checked once, when it was recorded, against the definition
        // it was recorded under: it never runs under another (a retry can find its row pending
        // after a restart changed the tool).
        let changed = !tool.recorded_under(&row.definitions_digest, prepared);
        let covered = Covered::call(&prepared.scope.id, row.principal.as_deref(), spec);
        let frozen = matches!(
            row.state,
            InvocationState::Approved | InvocationState::Pending
        )
        .then(|| self.freezes.covering(&covered))
        .flatten();
        let refusal = match row.state {
            // An approved call the worker runs waits out the freeze and runs once it is lifted;
            // a run's own call fails instead, and its run stops (POLICY-53, POLICY-55).
            InvocationState::Approved if frozen.is_some() && waits_out_freezes(&row) => {
                return Ok(Outcome::from_row(row));
            }
            InvocationState::Approved | InvocationState::Pending if let Some(frozen) = &frozen => {
                Some(ToolError::new(
                    ToolErrorKind::Unavailable,
                    freeze::reason(frozen),
                ))
            }
            InvocationState::Approved | InvocationState::Pending if changed => {
                Some(declaration_changed())
            }
            InvocationState::Approved => None,
            InvocationState::Pending => {
                let (store, principal) = (self.store.as_ref(), row.principal.as_deref());
                rate_limit::refusal(store, &prepared.scope.id, spec, principal).await?
            }
            _ => return Ok(Outcome::from_row(row)),
        };
        if let Some(error) = refusal {
            return Ok(Outcome::from_row(self.fail_unclaimed(row, error).await?));
        }
        if let Some(body) = self.executors.transactional_body(spec, &row) {
            let ran = self
                .store
                .run_transactional(row.id, &self.owner, body)
                .await;
            return self.as_it_stands(row.id, ran).await;
        }
        let claimed = self.store.claim(row.id, &self.owner, self.lease).await;
        match claimed {
            Ok(claimed) => self.run_claimed(tool, claimed, downstream).await,
            taken @ Err(LedgerError::Taken { .. }) => self.as_it_stands(row.id, taken).await,
            Err(e) => Err(e.into()),
        }
    }

    /// The row a claim (or a transaction) left; if another claimer won the race, it runs the
    /// call, and the row is reported where it stands.
    async fn as_it_stands(
        &self,
        id: InvocationId,
        claimed: Result<Invocation, LedgerError>,
    ) -> Result<Outcome, GatewayError> {
        match claimed {
            Ok(row) => Ok(Outcome::from_row(row)),
            Err(LedgerError::Taken { .. }) => Ok(Outcome::from_row(self.store.get(id).await?)),
            Err(e) => Err(e.into()),
        }
    }

    /// A call refused before it ran (bad arguments, rate limit, stale approval) is stored as
    /// failed. If another claimer got the row first (the worker settling the same stale
    /// approval as a client's retry), the row is returned as that claimer leaves it.
    async fn fail_unclaimed(
        &self,
        row: Invocation,
        error: ToolError,
    ) -> Result<Invocation, GatewayError> {
        match self.store.claim(row.id, &self.owner, self.lease).await {
            Ok(_) => {}
            Err(LedgerError::Taken { .. }) => return Ok(self.store.get(row.id).await?),
            Err(e) => return Err(e.into()),
        }
        let failed = self.store.finish(row.id, &self.owner, Err(error)).await?;
        events::refused(&failed);
        Ok(failed)
    }
}

/// Whether an approved `row` a freeze holds back waits for the lift: a call the decisions
/// worker runs (outside any run, or a run's proposal) does; a run's own call is the run's.
fn waits_out_freezes(row: &Invocation) -> bool {
    row.run_id.is_none() || row.mode == airlock_spec::Mode::Propose
}

/// A row recorded under a definition its tool no longer has: it never runs.
fn declaration_changed() -> ToolError {
    ToolError::new(
        ToolErrorKind::BadDeclaration,
        "the tool's declaration changed after this call was recorded; call it again",
    )
}

/// Why `arguments` cannot be recorded for `tool` as a runnable call, if they cannot.
fn validate(tool: &PreparedTool, arguments: &Value) -> Option<ToolError> {
    tool.check
        .check(arguments)
        .err()
        .or_else(|| oversized_proposal(&tool.spec, arguments))
}

/// A `confirm: true` action outside an agent run, as the tool error the caller gets: only a
/// person's message in a run's conversation consents, and no such person is on this channel.
/// The call is stored as failed and nothing runs (POLICY-35). Inside a run, the loop's gate
/// sends the call only once the person consented (POLICY-34).
fn confirm_refusal(spec: &ToolSpec, run: Option<&RunCall>) -> Option<ToolError> {
    (spec.policy.confirm && run.is_none()).then(|| {
        ToolError::new(
            ToolErrorKind::Unavailable,
            "not executed: this action runs only after a person confirms it in an agent conversation, and this channel has none",
        )
    })
}
