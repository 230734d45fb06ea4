//! Telemetry of the group-commit writer: a span per write a traced call waits for, and the
//! commit latency and batch size histograms (docs/rules.md LEDGER-38, LEDGER-39).
//!
//! Guarantees: a write of an untraced call (no tracer in its OpenTelemetry context, as every
//! call when telemetry is off) costs one thread-local read and starts nothing; a span records
//! the lane and the outcome, never a row's arguments or result.

use std::sync::Arc;
use std::time::Instant;

use opentelemetry::global::BoxedTracer;
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, KeyValue};

use crate::vocabulary::error::LedgerError;

/// The span of one write, from queueing to the commit that holds it.
pub(crate) struct CommitSpan(Context);

impl CommitSpan {
    /// Starts the span under the current context when it carries a tracer (the shared
    /// convention: `Arc<BoxedTracer>` as a context value, set where the trace started).
    pub(crate) fn start(lane: usize) -> Option<Self> {
        Context::map_current(|cx| {
            let tracer = cx.get::<Arc<BoxedTracer>>()?;
            let span = tracer
                .span_builder("ledger commit")
                .with_kind(SpanKind::Internal)
                .with_attributes([
                    KeyValue::new("db.operation.name", "COMMIT"),
                    KeyValue::new("airlock.ledger.lane", i64::try_from(lane).unwrap_or(-1)),
                ])
                .start_with_context(tracer.as_ref(), cx);
            Some(Self(cx.with_span(span)))
        })
    }

    /// Ends the span; a failed write sets `error.type` to the ledger error's kind.
    pub(crate) fn finish<T>(self, result: &Result<T, LedgerError>) {
        let span = self.0.span();
        if let Err(e) = result {
            span.set_attribute(KeyValue::new("error.type", e.kind()));
            span.set_status(Status::error(""));
        }
        span.end();
    }
}

/// Records one committed transaction: how long it took from `begun` and how many jobs it held
/// (`airlock_ledger_commit_duration_seconds`, `airlock_ledger_commit_batch_size`).
pub(crate) fn committed(begun: Instant, jobs: usize) {
    metrics::histogram!("airlock_ledger_commit_duration_seconds")
        .record(begun.elapsed().as_secs_f64());
    #[allow(clippy::cast_precision_loss)] // a batch holds at most MAX_BATCH jobs
    metrics::histogram!("airlock_ledger_commit_batch_size").record(jobs as f64);
}
