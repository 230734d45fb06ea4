//! Running a row this gateway has claimed: the tool executes under the claim's lease, which is
//! renewed while it works, and its answer is stored.
//!
//! Guarantees: a live call is never taken for a crash, since its lease is renewed every third
//! of its length; a lost lease does not abandon the call, its answer is still recorded
//! (LEDGER-20); a finish that can no longer win (a person settled the row, another owner runs
//! it) reports the row where it stands, never an internal error. A row handed to an upstream's
//! task is left running for the relay instead of being finished here. A call through a
//! per-principal connection carries its row's principal's own credential, resolved before
//! anything is sent; without one the row waits for it, nothing sent (CALL-11, CALL-12).

use std::sync::Arc;

use airlock_ledger::{
    CredentialUse, Invocation, InvocationId, InvocationState, LedgerError, Store,
};
use airlock_mcp::Downstream;
use airlock_spec::{ToolSource, ToolSpec};
use serde_json::Value;

use super::{Gateway, GatewayError, PreparedTool, events};
use crate::error::{ToolError, ToolErrorKind};
use crate::execute::{Ran, Reach, RunConnections, SuppliedNames};
use crate::outcome::Outcome;
use crate::vault::{Unresolved, carried};

impl Gateway {
    /// Executes a row this gateway has claimed, renewing its lease while it runs, and stores
    /// the result.
    pub(super) async fn run_claimed(
        &self,
        tool: &PreparedTool,
        mut claimed: Invocation,
        downstream: &Downstream,
    ) -> Result<Outcome, GatewayError> {
        let started = std::time::Instant::now();
        let this = (self.store.as_ref(), self.owner.as_str());
        let supplied = match self.supplied_for(&tool.spec, &claimed).await {
            Ok(supplied) => supplied,
            Err(e) => return settle(this, claimed.id, (Err(e), None), started).await,
        };
        let vault = self.vault.as_deref();
        let connections = &self.executors.connections;
        let call = (&tool.spec, &claimed);
        let carried = match carried(vault, connections, call, supplied.as_deref(), downstream).await
        {
            Ok(carried) => carried,
            Err(Unresolved::Waiting {
                connection,
                message,
            }) => return await_credential(this, claimed.id, connection, message).await,
            Err(Unresolved::Failed(e)) => {
                return settle(this, claimed.id, (Err(e), None), started).await;
            }
        };
        // Moved, not copied, to the request: a call's arguments may be megabytes. They were
        // checked when the row was recorded, under this definition (`advance`), or when a
        // person edited them into the approval (DECIDE-21).
        let result = match tool.check.complete(claimed.take_effective_arguments()) {
            Err(e) => Err(e),
            Ok(map) => {
                let reach = Reach {
                    supplied: supplied.as_deref(),
                    carried: carried.as_ref().map(|c| &c.pair),
                    downstream,
                };
                self.execute(&tool.spec, &claimed, Value::Object(map), reach)
                    .await
            }
        };
        let result = match result {
            Ok(Ran::Task(task)) => return self.relay(claimed.id, task).await,
            Ok(Ran::Value(value)) => Ok(value),
            Err(e) => Err(e),
        };
        let used = carried.map(|c| c.used);
        settle(this, claimed.id, (result, used), started).await
    }

    /// Stores the result in hand. If the lease was lost meanwhile and the result could not
    /// win (a person settled the row, another owner runs it), the row is returned as it
    /// stands: the caller learns where its call is, never an internal error (LEDGER-20).
    pub(super) async fn finish(
        &self,
        id: InvocationId,
        result: Result<Value, ToolError>,
    ) -> Result<Invocation, GatewayError> {
        stored((self.store.as_ref(), &self.owner), id, (result, None)).await
    }

    /// Runs `spec` for the claimed `row` with validated `arguments` as `reach` says, renewing the lease so a
    /// live call is never taken for a crash. A lost lease (the sweeper marked the row in doubt
    /// during a stall) does not abandon the call: its answer is still recorded (LEDGER-20).
    async fn execute(
        &self,
        spec: &ToolSpec,
        row: &Invocation,
        arguments: Value,
        reach: Reach<'_>,
    ) -> Result<Ran, ToolError> {
        let work = self
            .executors
            .run(spec, arguments, &row.idempotency_key, reach);
        tokio::pin!(work);
        // The first renewal is a period away: `interval`'s "immediate" first tick still waits
        // for the timer driver's next millisecond, which cost every call about 1 ms.
        let period = self.lease / 3;
        let mut renew = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        let mut renewing = true;
        loop {
            tokio::select! {
                result = &mut work => return result,
                _ = renew.tick(), if renewing => {
                    renewing = self.renew(row.id).await;
                }
            }
        }
    }

    /// The connections `row`'s run supplied, when its tool reaches one through `[connections]`:
    /// what this process holds for the run, or — after a restart or a takeover — the names its
    /// caller supplied, so a call through one fails instead of reaching `airlock.toml`'s
    /// connection of that name (docs/rules.md AGENT-63). Read from the row's run id, never from
    /// the task that happens to run the call.
    pub(crate) async fn supplied_for(
        &self,
        spec: &ToolSpec,
        row: &Invocation,
    ) -> Result<Option<Arc<RunConnections>>, ToolError> {
        let through_connection =
            matches!(spec.source, ToolSource::Api(_) | ToolSource::McpInline(_));
        let Some(run) = row.run_id.filter(|_| through_connection) else {
            return Ok(None);
        };
        if let Some(held) = self.supplied.get(run) {
            return Ok(Some(held));
        }
        let names = SuppliedNames::of(self.store.as_ref(), run)
            .await
            .map_err(|e| ToolError::new(ToolErrorKind::Database, e.to_string()))?;
        Ok((!names.is_empty()).then(|| Arc::new(RunConnections::gone(names))))
    }

    /// The connections supplied with the runs this process serves or holds parked.
    pub(crate) fn supplied(&self) -> &crate::execute::SuppliedRuns {
        &self.supplied
    }

    /// Renews the lease on `id`; `false` once it is lost for good. A database error is only
    /// logged: the next tick tries again, and the finish decides.
    pub(super) async fn renew(&self, id: InvocationId) -> bool {
        match self.store.renew_lease(id, &self.owner, self.lease).await {
            Ok(_) => true,
            Err(error @ LedgerError::LeaseLost { .. }) => {
                tracing::warn!(%error, "lease lost while the call runs; its answer will still be recorded");
                false
            }
            Err(error) => {
                tracing::warn!(%error, "lease renewal failed; retrying at the next tick");
                true
            }
        }
    }
}

/// The store and the lease owner a claimed row is settled with.
type Holder<'a> = (&'a dyn Store, &'a str);

/// [`Gateway::finish`], recording which principal's credential the attempt carried, if its
/// principal's own (LEDGER-84).
async fn stored(
    (store, owner): Holder<'_>,
    id: InvocationId,
    (result, used): (Result<Value, ToolError>, Option<CredentialUse>),
) -> Result<Invocation, GatewayError> {
    let written = match used {
        None => store.finish(id, owner, result).await,
        Some(used) => store.finish_with_credential(id, owner, result, used).await,
    };
    match written {
        Ok(row) => Ok(row),
        Err(LedgerError::LeaseLost { .. } | LedgerError::AlreadyFinished { .. }) => {
            Ok(store.get(id).await?)
        }
        Err(e) => Err(e.into()),
    }
}

/// Stores the result of a run that began at `started`, and counts it.
async fn settle(
    holder: Holder<'_>,
    id: InvocationId,
    finished: (Result<Value, ToolError>, Option<CredentialUse>),
    started: std::time::Instant,
) -> Result<Outcome, GatewayError> {
    let finished = stored(holder, id, finished).await?;
    events::ran(&finished, started.elapsed());
    let outcome = match finished.state {
        InvocationState::Failed => "failed",
        InvocationState::InDoubt => "in_doubt",
        InvocationState::InputRequired => "input_required",
        _ => "succeeded",
    };
    metrics::counter!("airlock_tool_runs_total", "tool" => finished.tool.clone(), "outcome" => outcome)
        .increment(1);
    Ok(Outcome::from_row(finished))
}

/// Parks the claimed row `id` until its principal's credential exists (nothing was sent).
async fn await_credential(
    (store, owner): Holder<'_>,
    id: InvocationId,
    connection: String,
    message: String,
) -> Result<Outcome, GatewayError> {
    match store.await_credential(id, owner, connection, message).await {
        Ok(row) => {
            events::recorded(&row, None);
            super::telemetry::recorded(&row);
            Ok(Outcome::from_row(row))
        }
        Err(LedgerError::LeaseLost { .. } | LedgerError::AlreadyFinished { .. }) => {
            Ok(Outcome::from_row(store.get(id).await?))
        }
        Err(e) => Err(e.into()),
    }
}
