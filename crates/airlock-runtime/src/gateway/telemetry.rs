//! What the one path tells metrics and the call's trace (docs/rules.md OPS-25, OPS-27,
//! OPS-28): the count and latency histogram of every answered call, the count of parked calls, and the
//! airlock attributes of the caller's server span; and where the traces the gateway begins
//! itself start (OPS-80: [`Gateway::trace_parent`]).
//!
//! Guarantees: attributes go only on a span that records (a traced call; nothing when
//! telemetry is off) and never carry an argument or a result; histogram and counter labels are
//! the declared tool's name and fixed words.

use std::time::Instant;

use airlock_ledger::{Invocation, InvocationState};
use opentelemetry::trace::{Status, TraceContextExt};
use opentelemetry::{Context, KeyValue};

use airlock_egress::trace::{RequestTracer, root};

use super::Gateway;
use crate::outcome::{Outcome, OutcomeKind};

impl Gateway {
    /// Where a span of this process's own work starts (OPS-80): the current context when it is
    /// traced (a request's trace goes on), else a new trace when `[telemetry]` is configured;
    /// `None` when neither (nothing is started).
    pub(crate) fn trace_parent(&self) -> Option<Context> {
        Context::map_current(|cx| cx.get::<RequestTracer>().map(|_| cx.clone()))
            .or_else(|| self.tracer.as_ref().map(root))
    }
}

/// An answered call: `airlock_tool_call_duration_seconds{channel, tool, outcome}` (the
/// `mcp.server.operation.duration` of channel `mcp`, in Prometheus' words), and the span.
pub(super) fn answered(
    channel: &'static str,
    outcome: &Outcome,
    what: &'static str,
    began: Instant,
) {
    let row = outcome.invocation();
    metrics::histogram!(
        "airlock_tool_call_duration_seconds",
        "channel" => channel,
        "tool" => row.tool.clone(),
        "outcome" => what
    )
    .record(began.elapsed().as_secs_f64());
    Context::map_current(|cx| {
        let span = cx.span();
        if !span.is_recording() {
            return;
        }
        span.set_attribute(KeyValue::new("airlock.invocation.id", row.id.to_string()));
        span.set_attribute(KeyValue::new(
            "airlock.policy.approval",
            row.approval.as_str(),
        ));
        span.set_attribute(KeyValue::new("airlock.policy.verdict", verdict(outcome)));
        span.set_attribute(KeyValue::new("airlock.outcome", what));
        if let (OutcomeKind::Completed, Some(error)) = (outcome.kind(), &row.error) {
            span.set_attribute(KeyValue::new("airlock.error.kind", error.kind.as_str()));
            span.set_status(Status::error(""));
        }
    });
}

/// What the approval policy made of the call: `allowed` (no person needed, or an earlier
/// approval covered it), `awaiting_approval`, or a person's decision.
fn verdict(outcome: &Outcome) -> &'static str {
    let row = outcome.invocation();
    match (&row.decision, row.state) {
        (Some(decision), _) => decision.decision.as_str(),
        (
            None,
            InvocationState::AwaitingApproval
            | InvocationState::AwaitingAnswer
            | InvocationState::Proposed,
        ) => row.state.as_str(),
        (None, _) => "allowed",
    }
}

/// A row just recorded as parked for a person: `airlock_parks_total{tool, state}`.
pub(super) fn recorded(row: &Invocation) {
    if matches!(
        row.state,
        InvocationState::AwaitingApproval
            | InvocationState::AwaitingAnswer
            | InvocationState::AwaitingCredential
    ) {
        metrics::counter!("airlock_parks_total", "tool" => row.tool.clone(), "state" => row.state.as_str())
            .increment(1);
    }
}

/// Counts a call answered by [`Gateway::call`] by tool and the outcome its caller saw
/// (`airlock_tool_calls_total`, served at `/metrics`; a retry of a call id is answered, and
/// counted, again), and a failed one also by its kind (`airlock_tool_failures_total`, the
/// stored word). Executions, however they were started, are `airlock_tool_runs_total`.
/// Returns the outcome word it counted.
pub(super) fn count(outcome: &Outcome) -> &'static str {
    let row = outcome.invocation();
    let what = match outcome.kind() {
        OutcomeKind::Completed if row.state == InvocationState::Failed => "failed",
        OutcomeKind::Completed => "succeeded",
        OutcomeKind::Parked => "parked",
        OutcomeKind::Proposed => "proposed",
        OutcomeKind::Denied => "denied",
        OutcomeKind::Expired => "expired",
        OutcomeKind::Abandoned => "abandoned",
        OutcomeKind::InputRequired => "input_required",
    };
    metrics::counter!("airlock_tool_calls_total", "tool" => row.tool.clone(), "outcome" => what)
        .increment(1);
    if let (OutcomeKind::Completed, Some(error)) = (outcome.kind(), &row.error) {
        metrics::counter!("airlock_tool_failures_total", "tool" => row.tool.clone(), "kind" => error.kind.as_str())
            .increment(1);
    }
    what
}
