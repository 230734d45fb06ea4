//! One call of a step along the one path (docs/rules.md AGENT-2..AGENT-4, AGENT-16): under a
//! call id derived from (run, step, index), so a replay after a park or a restart finds the row
//! it recorded instead of recording it again; what the model is shown for the row, or that it
//! waits for a person; and whether a proposal may be recorded (POLICY-10, POLICY-12).

use std::time::Duration;

use airlock_ledger::{FREEZE, Invocation, InvocationState, Settlement, SourceKind};
use airlock_model::ToolCall;
use airlock_spec::Mode;
use serde_json::Value;

use super::ctx::RunCtx;
use super::types::{AgentError, HowToApprove, RunEvent};
use super::{Agents, CHANNEL};
use crate::freeze::{self, Covered};
use crate::gateway::{CallContext, GatewayError, MAX_PROPOSALS_PER_RUN, ProposalRoom, RunCall};
use crate::outcome::{Outcome, OutcomeKind};

/// One call's state.
pub(super) enum Settled {
    /// Settled: what the model reads.
    Result { content: String, is_error: bool },
    /// Waits for a person.
    Waiting,
    /// The run was cancelled meanwhile.
    Cancelled,
    /// A freeze covers the call: the run stops before it, with this reason (POLICY-55).
    Stopped(String),
}

pub(super) fn error(content: String) -> Settled {
    Settled::Result {
        content,
        is_error: true,
    }
}

/// A call along the one path ([`crate::Gateway::call_in_run`]), channel `run`.
pub(super) async fn through_gateway(
    agents: &Agents,
    ctx: &RunCtx<'_>,
    call_id: &str,
    call: &ToolCall,
) -> Result<Settled, AgentError> {
    let context = CallContext {
        scope: ctx.scope.clone(),
        session: ctx.session,
        call_id: call_id.to_owned(),
        principal: ctx.detail.principal.clone(),
        groups: ctx.detail.groups.clone(),
        channel: CHANNEL,
        downstream: Default::default(),
    };
    let run = RunCall {
        run: ctx.detail.root,
        proposals: room(agents, ctx, &call.name).await?,
    };
    let gateway = agents.gateway();
    let outcome = match gateway
        .call_in_run(&context, &run, &call.name, call.arguments.clone())
        .await
    {
        Ok(outcome) => outcome,
        // In the snapshot, gone from the deployment (AGENT-16): loud, naming the tool.
        Err(GatewayError::UnknownTool(_)) => {
            tracing::warn!(target: crate::EVENTS, run = %ctx.run, tool = %call.name, "a tool of the run's snapshot is no longer served");
            return Ok(error(format!(
                "tool `{}` is no longer served by this deployment (it was when this run started); nothing was called",
                call.name
            )));
        }
        Err(
            e @ (GatewayError::CallIdReused { .. }
            | GatewayError::UnknownScope(_)
            | GatewayError::BadEdit { .. }),
        ) => {
            return Ok(error(e.to_string()));
        }
        Err(GatewayError::Ledger(e)) => return Err(e.into()),
    };
    settled(agents, ctx, outcome).await
}

/// Whether a proposal may be recorded now: the run's caller receives proposals and the tree
/// holds fewer than [`MAX_PROPOSALS_PER_RUN`] (POLICY-10, POLICY-12).
async fn room(agents: &Agents, ctx: &RunCtx<'_>, tool: &str) -> Result<ProposalRoom, AgentError> {
    let proposes = agents
        .gateway()
        .scope(&ctx.scope)
        .and_then(|s| s.get(tool))
        .is_some_and(|t| t.policy.mode == Mode::Propose);
    if !proposes {
        return Ok(ProposalRoom::Open);
    }
    if !ctx.detail.proposals_enabled {
        return Ok(ProposalRoom::NoReceiver);
    }
    let rows = agents.store().run_invocations(ctx.detail.root).await?;
    let held = rows.iter().filter(|r| r.is_proposal()).count();
    Ok(if held >= MAX_PROPOSALS_PER_RUN {
        ProposalRoom::Full
    } else {
        ProposalRoom::Open
    })
}

/// How long one wait for a row another claimer runs lasts before looking again.
const WAIT: Duration = Duration::from_secs(30);
/// Most looks at a row another claimer runs before the step parks on it.
const MAX_WAITS: usize = 20;

/// What the model is shown for `outcome`, or that it waits. A row approved but not yet run is
/// run here if this caller claims it first; one another claimer runs is waited for.
async fn settled(
    agents: &Agents,
    ctx: &RunCtx<'_>,
    outcome: Outcome,
) -> Result<Settled, AgentError> {
    let mut row = outcome.into_invocation();
    for _ in 0..MAX_WAITS {
        match row.state {
            InvocationState::Approved | InvocationState::Pending => {
                row = match agents.gateway().continue_approved(row.id).await {
                    Ok(outcome) => outcome.into_invocation(),
                    Err(GatewayError::Ledger(e)) => return Err(e.into()),
                    Err(e) => return Ok(error(e.to_string())),
                };
                // Held back or failed by a freeze (POLICY-53): the run stops here.
                if let Some(freeze) = frozen_call(agents, ctx, &row.tool) {
                    return Ok(Settled::Stopped(freeze));
                }
            }
            InvocationState::Running => {
                let deadline = tokio::time::Instant::now() + WAIT;
                let waited = agents
                    .store()
                    .wait_for_change(row.id, Some(row.version), deadline);
                row = tokio::select! {
                    () = ctx.cancel.cancelled() => return Ok(Settled::Cancelled),
                    row = waited => row?,
                };
            }
            _ => return Ok(shown(agents, ctx, &row).await),
        }
    }
    Ok(Settled::Waiting)
}

/// What freezes the run's call of `tool` now, if anything: the freeze as people read it.
pub(super) fn frozen_call(agents: &Agents, ctx: &RunCtx<'_>, tool: &str) -> Option<String> {
    let principal = ctx.detail.principal.as_deref();
    let gateway = agents.gateway();
    let spec = gateway.scope(&ctx.scope).and_then(|s| s.get(tool));
    let covered = match spec {
        Some(spec) => Covered::call(&ctx.scope, principal, spec),
        None => Covered {
            agent: freeze::agent_of(&ctx.scope),
            principal,
            tool,
            connection: None,
        },
    };
    let frozen = gateway.freezes().covering(&covered)?;
    Some(freeze::describe(&frozen))
}

/// What the model reads for a row that left the claimers' hands; a call a freeze refused stops
/// the run instead (POLICY-55).
pub(super) async fn shown(agents: &Agents, ctx: &RunCtx<'_>, row: &Invocation) -> Settled {
    let by_freeze = row.decision.as_ref().filter(|d| d.by == FREEZE);
    if let (InvocationState::Denied, Some(decision)) = (row.state, by_freeze) {
        return Settled::Stopped(decision.reason.clone().unwrap_or_default());
    }
    let outcome = Outcome::from_row(row.clone());
    match outcome.kind() {
        OutcomeKind::Parked if row.state == InvocationState::AwaitingCredential => {
            let message = row.error.as_ref().map(|e| e.message.clone());
            ctx.emit(RunEvent::CredentialRequired {
                invocation_id: row.id,
                tool: row.tool.clone(),
                message: message.unwrap_or_default(),
            })
            .await;
            Settled::Waiting
        }
        OutcomeKind::Parked => {
            let how = HowToApprove {
                cli: agents.gateway().how_to_decide(row),
                http: format!("POST /v1/approvals/{}/decision", row.id),
            };
            let (invocation_id, tool) = (row.id, row.tool.clone());
            ctx.emit(RunEvent::ApprovalRequired {
                invocation_id,
                tool,
                how,
            })
            .await;
            Settled::Waiting
        }
        OutcomeKind::Proposed => Settled::Result {
            content: format!(
                "Recorded as proposal {} for a person's approval. It was NOT executed: do not say it was done.",
                row.id
            ),
            is_error: false,
        },
        OutcomeKind::Completed
        | OutcomeKind::Denied
        | OutcomeKind::Expired
        | OutcomeKind::Abandoned
        | OutcomeKind::InputRequired => told_what_ran(row, settlement_text(row)),
    }
}

/// The model is told which arguments ran when a person edited them into the approval
/// (docs/rules.md DECIDE-20): the result it reads is not that of the call it made.
fn told_what_ran(row: &Invocation, settled: Settled) -> Settled {
    let edited = row
        .approved_arguments
        .as_ref()
        .filter(|a| **a != row.arguments);
    match (edited, settled) {
        (Some(ran), Settled::Result { content, is_error }) => Settled::Result {
            content: format!(
                "A person edited the arguments before approving this call; it ran with {ran}, \
                 not with the arguments you proposed. Result: {content}"
            ),
            is_error,
        },
        (_, settled) => settled,
    }
}

fn settlement_text(row: &Invocation) -> Settled {
    let ok = |content: String| Settled::Result {
        content,
        is_error: false,
    };
    match row.settlement() {
        Some(Settlement::Succeeded(Value::String(text))) => ok(text.clone()),
        // An MCP result's blocks are for MCP clients; the model reads its text (with
        // placeholders for media) and structured content, never the bytes (MCP-33).
        Some(Settlement::Succeeded(Value::Object(result)))
            if row.source_kind == SourceKind::Mcp =>
        {
            let mut result = result.clone();
            result.remove("content");
            ok(Value::Object(result).to_string())
        }
        Some(Settlement::Succeeded(value)) => ok(value.to_string()),
        Some(Settlement::Failed(e)) => error(format!("{}: {}", e.kind.as_str(), e.message)),
        Some(Settlement::Denied { reason }) => error(format!(
            "a person declined this call ({reason}); it was not executed"
        )),
        Some(Settlement::Expired) => {
            error("nobody decided on this call in time; it was not executed".into())
        }
        Some(Settlement::Abandoned { reason }) => error(format!(
            "an operator gave up on this call ({reason}); whether it ran is unknown"
        )),
        Some(Settlement::Resolved { note, .. }) => {
            ok(format!("an operator recorded that this call ran: {note}"))
        }
        // An agent run relays no input round: its upstream is told no client capabilities.
        Some(Settlement::InputRequired(_)) => {
            error("the tool's server asked for a client's input, which an agent run cannot give; it did not finish".into())
        }
        Some(Settlement::Proposed { .. }) | None => error(format!("the call is {}", row.state)),
    }
}
