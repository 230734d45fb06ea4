//! The spans of a run (docs/rules.md OPS-80), after the OpenTelemetry GenAI conventions for
//! agents: the run is `invoke_agent {agent}`, each step `step {n}` under it (its model request,
//! `chat {model}`, is the model crate's), each call of a step `execute_tool {tool}` under the
//! step — the spans of the call's ledger commits and upstream requests below it, and the
//! gateway's `airlock.*` attributes on it (OPS-25).
//!
//! Guarantees: nothing is started unless the run's context is traced or `[telemetry]` is
//! configured (a run nobody's request carries, like the resume worker's, begins its own
//! trace); no attribute holds the input, the context, a prompt, a message, an argument or a
//! result: names, ids, numbers and fixed words only.

use airlock_egress::trace::child_span;
use airlock_ledger::RunId;
use airlock_model::ToolCall;
use opentelemetry::trace::{SpanKind, Status, TraceContextExt as _};
use opentelemetry::{Context, KeyValue};

use super::Agents;
use super::types::{AgentError, RunReport, RunState};

/// Starts the span of a run of `agent`, started now or `resumed` (a parked run whose last call
/// was decided, or one taken over): under the current trace, else a new one.
pub(super) fn run(agents: &Agents, agent: &str, resumed: bool) -> Option<Context> {
    let parent = agents.gateway().trace_parent()?;
    let attributes = vec![
        KeyValue::new("gen_ai.operation.name", "invoke_agent"),
        KeyValue::new("gen_ai.agent.name", agent.to_owned()),
        KeyValue::new("airlock.run.resumed", resumed),
    ];
    child_span(
        &parent,
        format!("invoke_agent {agent}"),
        SpanKind::Internal,
        attributes,
    )
}

/// Names the run on the current span, once its id is known.
pub(super) fn serving(run: RunId) {
    Context::map_current(|cx| {
        let span = cx.span();
        if span.is_recording() {
            span.set_attribute(KeyValue::new("airlock.run.id", run.to_string()));
        }
    });
}

/// Ends a run's span with how the run stood (`airlock.run.status`), or its error.
pub(super) fn ended(cx: Option<&Context>, result: &Result<RunReport, AgentError>) {
    let Some(cx) = cx else { return };
    let span = cx.span();
    match result {
        Ok(report) => {
            span.set_attribute(KeyValue::new("airlock.run.status", state(report.status)));
            if report.status == RunState::Failed {
                span.set_attribute(KeyValue::new("error.type", "run_failed"));
                span.set_status(Status::error(""));
            }
        }
        Err(error) => {
            span.set_attribute(KeyValue::new("error.type", error_type(error)));
            span.set_status(Status::error(""));
        }
    }
    span.end();
}

/// Starts the span of step `number` under the current context (the run's).
pub(super) fn step(number: u32) -> Option<Context> {
    Context::map_current(|cx| {
        child_span(
            cx,
            format!("step {number}"),
            SpanKind::Internal,
            vec![KeyValue::new("airlock.run.step", i64::from(number))],
        )
    })
}

/// Starts the span of a step's call of a tool the run's snapshot holds, under the current
/// context (its step's); `call_id` is the ledger's (`<run>:<step>:<index>`).
pub(super) fn tool(call: &ToolCall, call_id: &str) -> Option<Context> {
    let attributes = vec![
        KeyValue::new("gen_ai.operation.name", "execute_tool"),
        KeyValue::new("gen_ai.tool.name", call.name.clone()),
        KeyValue::new("gen_ai.tool.call.id", call.id.clone()),
        KeyValue::new("airlock.call.id", call_id.to_owned()),
    ];
    let name = format!("execute_tool {}", call.name);
    Context::map_current(|cx| child_span(cx, name, SpanKind::Internal, attributes))
}

fn state(state: RunState) -> &'static str {
    match state {
        RunState::Running => "running",
        RunState::Parked => "parked",
        RunState::Completed => "completed",
        RunState::Failed => "failed",
        RunState::Cancelled => "cancelled",
    }
}

/// A run that could not start or be served: its error's variant, in snake case.
fn error_type(error: &AgentError) -> &'static str {
    match error {
        AgentError::UnknownAgent(_) => "unknown_agent",
        AgentError::SessionBusy { .. } => "session_busy",
        AgentError::UnknownSession(_) => "unknown_session",
        AgentError::ForeignSession(_) => "foreign_session",
        AgentError::RunNotFound(_) => "run_not_found",
        AgentError::RunEnded { .. } => "run_ended",
        AgentError::BadRequest(_) => "bad_request",
        AgentError::Ledger(_) => "ledger",
    }
}
