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
    CredentialUse, Invocation, InvocationId, InvocationState, LedgerError, RunId,
};
use airlock_mcp::Downstream;
use airlock_spec::{ApiConnection, Credentials, ToolSource, ToolSpec};
use serde_json::Value;

use super::{Gateway, GatewayError, PreparedTool, events};
use crate::error::{ToolError, ToolErrorKind};
use crate::execute::{Ran, Reach, RunConnections, SuppliedNames, sending};
use crate::outcome::Outcome;
use crate::vault::Unresolved;

/// A principal's own credential as one call carries it: the connection that sends it, and
/// what the audit records of it.
pub(crate) struct Carried {
    pub(crate) pair: (ApiConnection, Credentials),
    used: CredentialUse,
}

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
        let supplied = match self.supplied_for(&tool.spec, &claimed).await {
            Ok(supplied) => supplied,
            Err(e) => return self.settle(claimed.id, Err(e), None, started).await,
        };
        let carried = match self
            .carried_for(&tool.spec, &claimed, supplied.as_deref(), downstream)
            .await
        {
            Ok(carried) => carried,
            Err(Unresolved::Waiting {
                connection,
                message,
            }) => return self.await_credential(claimed.id, connection, message).await,
            Err(Unresolved::Failed(e)) => {
                return self.settle(claimed.id, Err(e), None, started).await;
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
        self.settle(claimed.id, result, used, started).await
    }

    /// Stores the result of a run that began at `started` (with the credential it carried, if
    /// its principal's own), and counts it.
    async fn settle(
        &self,
        id: InvocationId,
        result: Result<Value, ToolError>,
        used: Option<CredentialUse>,
        started: std::time::Instant,
    ) -> Result<Outcome, GatewayError> {
        let finished = match used {
            None => self.finish(id, result).await?,
            Some(used) => self.finish_carrying(id, result, used).await?,
        };
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

    /// The credential `row`'s principal has for the connection `spec` reaches, when that
    /// connection takes each principal's own (and the run did not supply it).
    pub(crate) async fn carried_for(
        &self,
        spec: &ToolSpec,
        row: &Invocation,
        supplied: Option<&RunConnections>,
        downstream: &Downstream,
    ) -> Result<Option<Carried>, Unresolved> {
        let Some(vault) = &self.vault else {
            return Ok(None);
        };
        let through_connection =
            matches!(spec.source, ToolSource::Api(_) | ToolSource::McpInline(_));
        let Some(name) = spec.source.connection().filter(|_| through_connection) else {
            return Ok(None);
        };
        let by_run = supplied
            .map(|s| s.get(name))
            .transpose()
            .map_err(Unresolved::Failed)?
            .flatten();
        if vault.source(name).is_none() || by_run.is_some() {
            return Ok(None);
        }
        let Some(configured) = self.executors.connections.get(name) else {
            return Ok(None);
        };
        let subject = downstream.subject_token();
        let personal = vault
            .resolve(name, row.principal.as_deref(), subject)
            .await?;
        Ok(Some(Carried {
            pair: sending(&configured.base_url, &personal.credential),
            used: personal.used,
        }))
    }

    /// Parks the claimed row `id` until its principal's credential exists (nothing was sent).
    async fn await_credential(
        &self,
        id: InvocationId,
        connection: String,
        message: String,
    ) -> Result<Outcome, GatewayError> {
        match self
            .store
            .await_credential(id, &self.owner, connection, message)
            .await
        {
            Ok(row) => {
                events::recorded(&row, None);
                super::telemetry::recorded(&row);
                Ok(Outcome::from_row(row))
            }
            Err(LedgerError::LeaseLost { .. } | LedgerError::AlreadyFinished { .. }) => {
                Ok(Outcome::from_row(self.store.get(id).await?))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// [`Gateway::finish`], recording which principal's credential the attempt carried.
    async fn finish_carrying(
        &self,
        id: InvocationId,
        result: Result<Value, ToolError>,
        used: CredentialUse,
    ) -> Result<Invocation, GatewayError> {
        match self
            .store
            .finish_with_credential(id, &self.owner, result, used)
            .await
        {
            Ok(row) => Ok(row),
            Err(LedgerError::LeaseLost { .. } | LedgerError::AlreadyFinished { .. }) => {
                Ok(self.store.get(id).await?)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Stores the result in hand. If the lease was lost meanwhile and the result could not
    /// win (a person settled the row, another owner runs it), the row is returned as it
    /// stands: the caller learns where its call is, never an internal error (LEDGER-20).
    pub(super) async fn finish(
        &self,
        id: InvocationId,
        result: Result<Value, ToolError>,
    ) -> Result<Invocation, GatewayError> {
        match self.store.finish(id, &self.owner, result).await {
            Ok(row) => Ok(row),
            Err(LedgerError::LeaseLost { .. } | LedgerError::AlreadyFinished { .. }) => {
                Ok(self.store.get(id).await?)
            }
            Err(e) => Err(e.into()),
        }
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

    /// Holds the connections supplied with root run `run` while this process serves it.
    pub(crate) fn hold_supplied(&self, run: RunId, connections: Arc<RunConnections>) {
        self.supplied.hold(run, connections);
    }

    /// What this process holds for root run `run`.
    pub(crate) fn held_supplied(&self, run: RunId) -> Option<Arc<RunConnections>> {
        self.supplied.get(run)
    }

    /// Forgets the connections of root run `run` once this process no longer serves it.
    pub(crate) fn release_supplied(&self, run: RunId) {
        self.supplied.release(run);
    }

    /// Renews the lease on `id`; `false` once it is lost for good. A database error is only
    /// logged: the next tick tries again, and the finish decides.
    async fn renew(&self, id: InvocationId) -> bool {
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
