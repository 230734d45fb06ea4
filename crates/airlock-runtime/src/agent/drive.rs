//! The loop of one run (docs/rules.md AGENT-3..AGENT-10, AGENT-20..AGENT-23): rebuild the
//! conversation from the stored steps, settle a step whose calls are not all settled, ask the
//! model for the next turn, store it, and again — until the model answers, a bound is reached, a
//! call parks, or the run is cancelled. A sub-agent's call drives its nested run here, and
//! [`serve_root`] serves a root run to its stop.

use crate::execute::SuppliedNames;
use std::sync::Arc;

use airlock_egress::trace::within;
use airlock_ledger::{LedgerError, NewRun, ResumeOutcome, RunId, RunStatus, RunStep};
use airlock_model::{Model, ToolCall, ToolResult, Turn};
use futures::future::BoxFuture;
use opentelemetry::Context;
use serde_json::Value;
use tokio::sync::mpsc::Sender;
use tokio_util::sync::CancellationToken;

use super::confirm;
use super::ctx::{Ending, RunCtx, Step, budget_spent, finish};
use super::record::{self, Detail, Snapshot};
use super::settle::{self, Settled};
use super::trace;
use super::turn::{self, Asked};
use super::types::{AgentError, RunEvent, RunState};
use super::{Agents, CHANNEL, gate, is_open};

/// How a step's calls stood once each was sent.
enum StepEnd {
    /// Every call settled: the results the model is shown, in the calls' order.
    Settled(Vec<ToolResult>),
    /// At least one call waits for a person.
    Parked,
    /// The run was cancelled meanwhile.
    Cancelled,
    /// A freeze stopped the run before one of its calls, with this reason.
    Stopped(String),
}

/// Serves root run `run`: drives it, writes its ending, and — when it parked but its last
/// waiting call was decided meanwhile — resumes it at once through the same compare-and-swap
/// every resumer uses.
pub(super) async fn serve_root(
    agents: &Agents,
    run: RunId,
    events: Option<&Sender<RunEvent>>,
    cancel: &CancellationToken,
) -> Result<(), AgentError> {
    let mut ctx = RunCtx::load(agents, run, None, events, cancel).await?;
    loop {
        if !is_open(ctx.status) {
            return Ok(());
        }
        ctx.emit(RunEvent::Status {
            run_id: run,
            status: RunState::Running,
        })
        .await;
        let ending = match drive(agents, &mut ctx).await {
            Ok(ending) => ending,
            Err(error) => {
                if ends_the_run(&error) {
                    let reason = format!("internal error: {error}");
                    let _ = agents
                        .store()
                        .end_run(run, RunStatus::Failed, Some(reason))
                        .await;
                }
                return Err(error);
            }
        };
        let parked = matches!(ending, Ending::Parked);
        finish(agents, &mut ctx, ending).await?;
        if !parked {
            return Ok(());
        }
        ctx.emit(RunEvent::Status {
            run_id: run,
            status: RunState::Parked,
        })
        .await;
        // Decided between the calls' records and the park: nobody else would resume it.
        let lease = agents.gateway().run_lease();
        match agents.store().resume_run_leased(run, lease).await? {
            ResumeOutcome::Resumed => ctx.status = RunStatus::Running,
            ResumeOutcome::StillWaiting | ResumeOutcome::NotParked(_) => return Ok(()),
        }
    }
}

/// Whether a driving error ends the run `failed` (AGENT-61). A database that could not be
/// reached (a lost connection, a restart) says nothing about the run: it stays `running` under
/// its lease, which nobody renews now, and whoever takes it over replays it from the ledger
/// (AGENT-59, AGENT-60) — ending it instead left its approved calls with no run to execute them.
fn ends_the_run(error: &AgentError) -> bool {
    !matches!(
        error,
        AgentError::Ledger(LedgerError::Database(_) | LedgerError::Closed)
    )
}

/// Drives `ctx` until it ends or parks; ledger failures are errors, everything else an
/// [`Ending`]. Boxed: a sub-agent's run drives the loop again from inside a step (the agent
/// graph is acyclic, so the nesting is finite).
pub(super) fn drive<'a>(
    agents: &'a Agents,
    ctx: &'a mut RunCtx<'_>,
) -> BoxFuture<'a, Result<Ending, AgentError>> {
    Box::pin(drive_steps(agents, ctx))
}

async fn drive_steps(agents: &Agents, ctx: &mut RunCtx<'_>) -> Result<Ending, AgentError> {
    let limits = agents.inner.limits;
    let mut model: Option<Arc<dyn Model>> = None;
    // The span of the step whose model turn was just stored: its calls are settled under it
    // (a step found unsettled, as on resuming, gets its own). A span ends when dropped.
    let mut asked: Option<(usize, Context)> = None;
    // Each pass stores a step or settles one, and steps are bounded by `max_steps`.
    loop {
        if ctx.cancel.is_cancelled() {
            return Ok(Ending::Cancelled);
        }
        let pending = ctx.steps.last().is_some_and(|s| s.results.is_none());
        if pending {
            let number = ctx.steps.len();
            let cx = match asked.take() {
                Some((n, cx)) if n == number => Some(cx),
                _ => trace::step(step_number(number)),
            };
            match within(cx.as_ref(), step(agents, ctx)).await? {
                StepEnd::Settled(results) => store_results(ctx, results)?,
                StepEnd::Parked => return Ok(Ending::Parked),
                StepEnd::Cancelled => return Ok(Ending::Cancelled),
                StepEnd::Stopped(freeze) => return Ok(Ending::Stopped(freeze)),
            }
            continue;
        }
        if let Some(last) = ctx.steps.last().filter(|s| s.turn.tool_calls.is_empty()) {
            return Ok(Ending::Completed(last.turn.text.clone()));
        }
        if let Some(ending) = over_bounds(ctx, limits) {
            return Ok(ending);
        }
        let model = match &model {
            Some(m) => Arc::clone(m),
            None => match (agents.inner.models)(&ctx.agent) {
                Ok(m) => Arc::clone(model.insert(m)),
                Err(e) => return Ok(Ending::Failed(format!("model: {e}"))),
            },
        };
        let remaining = limits.budget.saturating_sub(ctx.elapsed());
        let number = ctx.steps.len() + 1;
        let cx = trace::step(step_number(number));
        let asking = turn::ask(agents, ctx, model.as_ref(), remaining);
        let turn = match within(cx.as_ref(), asking).await {
            Asked::Turn(turn) => turn,
            Asked::Failed(reason) => return Ok(Ending::Failed(reason)),
            Asked::Cancelled => return Ok(Ending::Cancelled),
        };
        if !within(cx.as_ref(), store_turn(agents, ctx, turn)).await? {
            // Cancelled or ended by another process meanwhile: its calls are not sent.
            return Ok(Ending::Cancelled);
        }
        asked = cx.map(|cx| (number, cx));
    }
}

/// A step's number as stored (1 for the first).
fn step_number(steps: usize) -> u32 {
    u32::try_from(steps).unwrap_or(u32::MAX)
}

/// The ending a bound imposes before another model turn, if any (AGENT-10); also stops a run
/// another process cancelled or failed, as the run's last commit saw it (AGENT-53).
fn over_bounds(ctx: &RunCtx<'_>, limits: super::Limits) -> Option<Ending> {
    let steps = u32::try_from(ctx.steps.len()).unwrap_or(u32::MAX);
    if steps >= limits.max_steps {
        let max = limits.max_steps;
        return Some(Ending::Failed(format!(
            "the run took {max} steps without an answer (max_steps {max})"
        )));
    }
    if ctx.elapsed() >= limits.budget {
        return Some(Ending::Failed(budget_spent(limits.budget)));
    }
    (!is_open(ctx.status)).then_some(Ending::Cancelled)
}

/// Stores the model's turn. A turn with calls commits (with the results of the step before it
/// and the details) before any of its calls is sent, so a replay sends the same calls under
/// the same ids; an answer waits for the run's ending commit (AGENT-53). Returns whether the
/// run is still open.
async fn store_turn(agents: &Agents, ctx: &mut RunCtx<'_>, turn: Turn) -> Result<bool, AgentError> {
    let number = u32::try_from(ctx.steps.len() + 1).unwrap_or(u32::MAX);
    let step = RunStep {
        step: number,
        turn: to_json(&turn)?,
        results: None,
    };
    ctx.detail.usage += turn.usage;
    let open = if turn.tool_calls.is_empty() {
        ctx.defer_step(step);
        true
    } else {
        is_open(ctx.save_step(agents, step).await?)
    };
    ctx.steps.push(Step {
        turn,
        results: None,
    });
    Ok(open)
}

/// Keeps a settled step's results for the run's next commit: until then, a replay finds them
/// again in its calls' rows (AGENT-53).
fn store_results(ctx: &mut RunCtx<'_>, results: Vec<ToolResult>) -> Result<(), AgentError> {
    let number = u32::try_from(ctx.steps.len()).unwrap_or(u32::MAX);
    let Some(last) = ctx.steps.last_mut() else {
        return Ok(());
    };
    let step = RunStep {
        step: number,
        turn: to_json(&last.turn)?,
        results: Some(to_json(&results)?),
    };
    last.results = Some(results);
    ctx.defer_step(step);
    Ok(())
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<serde_json::Value, AgentError> {
    serde_json::to_value(value).map_err(|e| AgentError::Ledger(LedgerError::Invalid(e.to_string())))
}

/// Sends every call of the last step and reports how they stand.
async fn step(agents: &Agents, ctx: &mut RunCtx<'_>) -> Result<StepEnd, AgentError> {
    let number = u32::try_from(ctx.steps.len()).unwrap_or(u32::MAX);
    let calls: Vec<ToolCall> = ctx
        .steps
        .last()
        .map(|s| s.turn.tool_calls.clone())
        .unwrap_or_default();
    let mut results = Vec::with_capacity(calls.len());
    let mut parked = false;
    for (index, call) in calls.iter().enumerate() {
        ctx.emit(RunEvent::ToolCall {
            step: number,
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
        })
        .await;
        let call_id = record::call_id(ctx.run, number, index);
        match one(agents, ctx, &call_id, call).await? {
            Settled::Result { content, is_error } => {
                ctx.emit(RunEvent::ToolResult {
                    step: number,
                    call_id: call.id.clone(),
                    tool: call.name.clone(),
                    content: content.clone(),
                    is_error,
                })
                .await;
                let call_id = call.id.clone();
                results.push(ToolResult {
                    call_id,
                    content,
                    is_error,
                });
            }
            Settled::Waiting => parked = true,
            Settled::Cancelled => return Ok(StepEnd::Cancelled),
            // Before the step's next call: the calls after it are not sent.
            Settled::Stopped(reason) => return Ok(StepEnd::Stopped(reason)),
        }
    }
    Ok(if parked {
        StepEnd::Parked
    } else {
        StepEnd::Settled(results)
    })
}

/// One call: a tool the snapshot lacks, a sub-agent, or the one path.
async fn one(
    agents: &Agents,
    ctx: &mut RunCtx<'_>,
    call_id: &str,
    call: &ToolCall,
) -> Result<Settled, AgentError> {
    let Some(tool) = ctx.snapshot.tool(&call.name) else {
        return Ok(settle::error(format!(
            "unknown tool `{}`: this agent has no tool of that name; nothing was called",
            call.name
        )));
    };
    // Named in a span only once the snapshot knows it, as the MCP endpoint does (OPS-24).
    let sub_agent = tool.sub_agent.clone();
    let cx = trace::tool(call, call_id);
    // Boxed: a sub-agent's run nests the loop again here, and its state must not grow the
    // stack of the task driving the root.
    let dispatched = Box::pin(dispatch(agents, ctx, call_id, call, sub_agent));
    within(cx.as_ref(), dispatched).await
}

/// Sends a known tool's call where it goes.
async fn dispatch(
    agents: &Agents,
    ctx: &mut RunCtx<'_>,
    call_id: &str,
    call: &ToolCall,
    sub_agent: Option<String>,
) -> Result<Settled, AgentError> {
    match sub_agent {
        Some(agent) => self::sub_agent(agents, ctx, call_id, &agent, call).await,
        None if confirm::confirms(agents, ctx, &call.name) => {
            confirm::gate(agents, ctx, call_id, call).await
        }
        None => settle::through_gateway(agents, ctx, call_id, call).await,
    }
}

/// A sub-agent's call (AGENT-20): its nested run, started once and found again on replay.
async fn sub_agent(
    agents: &Agents,
    ctx: &mut RunCtx<'_>,
    call_id: &str,
    agent: &str,
    call: &ToolCall,
) -> Result<Settled, AgentError> {
    // A freeze on the delegating agent, its principal or the sub-agent's tool stops the run
    // before the child starts (POLICY-55); the child's own calls are judged in its scope.
    if let Some(freeze) = settle::frozen_call(agents, ctx, &call.name) {
        return Ok(Settled::Stopped(freeze));
    }
    let Some(input) = call.arguments.get("input").and_then(Value::as_str) else {
        return Ok(settle::error(
            "`input` (a string) is required: what to ask the agent".into(),
        ));
    };
    let store = agents.store();
    let child = match store.child_run(ctx.run, call_id.to_owned()).await? {
        Some(child) => child,
        None => {
            let gate = gate::before_child(agents, ctx, call_id, &call.name, &call.arguments);
            if let Some(shown) = gate.await? {
                return Ok(shown);
            }
            match start_child(agents, ctx, call_id, agent, input).await? {
                Some(child) => child,
                None => {
                    return Ok(settle::error(format!(
                        "sub-agent `{agent}` is not served by this deployment"
                    )));
                }
            }
        }
    };
    let parent = Some((ctx.run, call_id.to_owned()));
    let mut run = RunCtx::load(agents, child, parent, ctx.events, &ctx.cancel).await?;
    let ending = match run.status {
        RunStatus::Succeeded => Ending::Completed(run.detail.answer.clone().unwrap_or_default()),
        RunStatus::Failed => Ending::Failed(run.detail.error.clone().unwrap_or_default()),
        RunStatus::Cancelled => return Ok(Settled::Cancelled),
        RunStatus::Parked | RunStatus::Running => {
            // The root was resumed by this caller alone, so the tree below is this caller's.
            if run.status == RunStatus::Parked {
                let resumed = store.resume_run(child).await?;
                if let ResumeOutcome::NotParked(status) = resumed {
                    run.status = status;
                }
            }
            let ending = drive(agents, &mut run).await?;
            finish(agents, &mut run, ending.clone()).await?;
            if !matches!(ending, Ending::Parked) {
                ctx.detail.usage += run.detail.usage;
            }
            ending
        }
    };
    Ok(match ending {
        Ending::Completed(answer) => Settled::Result {
            content: answer,
            is_error: false,
        },
        Ending::Failed(reason) => settle::error(format!("sub-agent `{agent}` failed: {reason}")),
        Ending::Cancelled => Settled::Cancelled,
        Ending::Parked => Settled::Waiting,
        Ending::Stopped(freeze) => Settled::Stopped(freeze),
    })
}

/// Starts the nested run of call `call_id`: its own session (in the sub-agent's scope, so a
/// decision on its calls resolves them there), its own snapshot, the root's tree.
async fn start_child(
    agents: &Agents,
    ctx: &RunCtx<'_>,
    call_id: &str,
    agent: &str,
    input: &str,
) -> Result<Option<RunId>, AgentError> {
    let Some(scope) = agents.scope(agent) else {
        return Ok(None);
    };
    let principal = ctx.detail.principal.clone();
    let session = agents
        .gateway()
        .open_session(CHANNEL, principal.clone(), &scope.id)
        .await
        .map_err(super::ledger_of)?;
    let new = NewRun {
        session_id: session,
        agent: agent.to_owned(),
        definitions_digest: scope.digest(),
        definitions_snapshot: Snapshot::of(&scope).to_value(),
        lease: None,
    };
    let id = RunId::new();
    let detail = Detail {
        input: input.to_owned(),
        context: None,
        principal,
        groups: ctx.detail.groups.clone(),
        proposals_enabled: ctx.detail.proposals_enabled,
        root: ctx.detail.root,
        // The root's direct sub-agent names every proposal below it (AGENT-22).
        via: ctx.detail.via.clone().or_else(|| Some(agent.to_owned())),
        usage: airlock_model::Usage::default(),
        elapsed_ms: 0,
        answer: None,
        error: None,
        // The root's caller supplied them; the calls of the whole tree carry the root's id.
        supplied: SuppliedNames::default(),
    };
    let row = detail.row(id, Some((ctx.run, call_id.to_owned())))?;
    // A model's words never answer what the session held (POLICY-35): no consent at all.
    agents.store().start_run(new, row, None).await?;
    Ok(Some(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// AGENT-61: a database that could not be reached leaves the run to be taken over; an error
    /// about the run itself ends it.
    #[test]
    fn only_errors_about_the_run_end_it() {
        let unreachable = AgentError::Ledger(LedgerError::Database(sqlx_error()));
        assert!(!ends_the_run(&unreachable));
        assert!(!ends_the_run(&AgentError::Ledger(LedgerError::Closed)));
        let corrupt = AgentError::Ledger(LedgerError::Corrupt {
            entity: "run",
            id: "r".into(),
            reason: "edited".into(),
        });
        assert!(ends_the_run(&corrupt));
        assert!(ends_the_run(&AgentError::BadRequest("no".into())));
    }

    fn sqlx_error() -> sqlx::Error {
        sqlx::Error::PoolTimedOut
    }
}
