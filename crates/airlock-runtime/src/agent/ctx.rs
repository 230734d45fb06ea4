//! A run being driven in this process ([`RunCtx`]): loaded from the ledger, its events, its
//! time spent (docs/rules.md AGENT-10), and how its ending is written ([`finish`]).

use std::sync::Arc;
use std::time::Duration;

use airlock_ledger::{Clock, LedgerError, RunId, RunStatus, RunStep, SessionId};
use airlock_model::{ToolResult, Turn};
use airlock_spec::{AgentSpec, ScopeId};
use time::OffsetDateTime;
use tokio::sync::mpsc::Sender;
use tokio_util::sync::CancellationToken;

use super::Agents;
use super::record::{Detail, Snapshot};
use super::types::{AgentError, RunEvent, RunReport};

/// How a run's driving stopped.
#[derive(Debug, Clone)]
pub(super) enum Ending {
    /// The model answered.
    Completed(String),
    /// A bound was reached, or the model failed; the reason.
    Failed(String),
    /// Its caller cancelled it.
    Cancelled,
    /// Some call (here or below) waits for a person.
    Parked,
    /// A freeze covers its next call (here or in a sub-agent's run below): it ends failed,
    /// and a caller above it stops too (POLICY-55).
    Stopped(String),
}

/// One stored step, read back.
pub(super) struct Step {
    pub(super) turn: Turn,
    pub(super) results: Option<Vec<ToolResult>>,
}

/// A run being driven in this process.
pub(super) struct RunCtx<'e> {
    pub(super) run: RunId,
    pub(super) session: SessionId,
    pub(super) agent: Arc<AgentSpec>,
    pub(super) scope: ScopeId,
    pub(super) detail: Detail,
    pub(super) parent: Option<(RunId, String)>,
    pub(super) snapshot: Snapshot,
    pub(super) steps: Vec<Step>,
    /// Steps changed here and not yet stored: they go with the run's next commit
    /// (docs/rules.md AGENT-53).
    unsaved: Vec<RunStep>,
    pub(super) status: RunStatus,
    pub(super) events: Option<&'e Sender<RunEvent>>,
    /// A sub-agent's run: its tokens, status and `done` are not the caller's events.
    pub(super) nested: bool,
    pub(super) cancel: CancellationToken,
    /// The budget's clock (AGENT-35) and when this process took the run up.
    clock: Arc<dyn Clock>,
    since: OffsetDateTime,
}

impl<'e> RunCtx<'e> {
    /// Loads run `run` from the ledger.
    pub(super) async fn load(
        agents: &Agents,
        run: RunId,
        parent: Option<(RunId, String)>,
        events: Option<&'e Sender<RunEvent>>,
        cancel: &CancellationToken,
    ) -> Result<Self, AgentError> {
        let store = agents.store();
        let row = store.get_run(run).await?;
        let (detail, _) = Detail::load(store, run).await?;
        let snapshot = Snapshot::read(&row.definitions_snapshot)?;
        let steps = store
            .run_steps(run)
            .await?
            .into_iter()
            .map(read_step)
            .collect::<Result<_, _>>()?;
        let agent = agents
            .inner
            .agents
            .get(&row.agent)
            .cloned()
            .unwrap_or_else(|| placeholder(&row.agent));
        let ctx = Self {
            run,
            session: row.session_id,
            agent: Arc::new(agent),
            scope: ScopeId::Agent(row.agent.clone()),
            detail,
            nested: parent.is_some(),
            parent,
            snapshot,
            steps,
            unsaved: Vec::new(),
            status: row.status,
            events,
            cancel: cancel.clone(),
            clock: Arc::clone(&agents.inner.clock),
            since: agents.inner.clock.now(),
        };
        ctx.report_drift(agents);
        Ok(ctx)
    }

    /// Sends `event` to the caller, if it listens; a caller gone does not stop the run.
    pub(super) async fn emit(&self, event: RunEvent) {
        let caller_only = matches!(
            event,
            RunEvent::Token { .. } | RunEvent::Status { .. } | RunEvent::Done { .. }
        );
        if self.nested && caller_only {
            return;
        }
        if let Some(events) = self.events {
            let _ = events.send(event).await;
        }
    }

    /// Time spent running, over every resume (AGENT-10).
    pub(super) fn elapsed(&self) -> Duration {
        Duration::from_millis(self.detail.elapsed_ms) + self.since_taken()
    }

    /// Time since this process took the run up (or last saved it); never negative.
    fn since_taken(&self) -> Duration {
        (self.clock.now() - self.since)
            .try_into()
            .unwrap_or_default()
    }

    /// Stores `step`, the steps not yet stored and the details (time spent folded in) in one
    /// commit; returns the run's status as that commit saw it (AGENT-53).
    pub(super) async fn save_step(
        &mut self,
        agents: &Agents,
        step: RunStep,
    ) -> Result<RunStatus, AgentError> {
        self.fold_elapsed();
        self.defer_step(step);
        let detail = self.detail.row(self.run, self.parent.clone())?;
        let steps = std::mem::take(&mut self.unsaved);
        let status = agents.store().save_run_steps(steps, detail).await?;
        self.status = status;
        Ok(status)
    }

    /// Keeps `step` for the run's next commit: what it records can be found again without it
    /// (its calls' rows, or a model turn that may be asked again) (AGENT-53).
    pub(super) fn defer_step(&mut self, step: RunStep) {
        // A step stored twice in one commit would be one upsert hitting its row twice.
        self.unsaved.retain(|s| s.step != step.step);
        self.unsaved.push(step);
    }

    fn fold_elapsed(&mut self) {
        let spent = u64::try_from(self.since_taken().as_millis()).unwrap_or(u64::MAX);
        self.detail.elapsed_ms = self.detail.elapsed_ms.saturating_add(spent);
        self.since = self.clock.now();
    }

    /// Logs drift of the deployment since the run started (AGENT-15); never fatal.
    fn report_drift(&self, agents: &Agents) {
        if let Some(drift) = self.snapshot.drift(agents.scope(&self.agent.name).as_ref()) {
            tracing::warn!(
                target: crate::EVENTS,
                run = %self.run,
                agent = %self.agent.name,
                removed = ?drift.removed,
                added = ?drift.added,
                changed = ?drift.changed,
                "definitions drifted since the run started; it goes on with its snapshot"
            );
        }
    }
}

/// An agent no longer declared: its run fails at its next model turn, saying so.
fn placeholder(name: &str) -> AgentSpec {
    AgentSpec {
        name: name.to_owned(),
        file: std::path::PathBuf::new(),
        description: None,
        model: airlock_spec::ModelSpec {
            provider: String::new(),
            model: String::new(),
            endpoint: None,
            credential: None,
            script: None,
        },
        system_prompt: String::new(),
        tools: Vec::new(),
    }
}

fn read_step(step: RunStep) -> Result<Step, LedgerError> {
    let bad = |e: serde_json::Error| LedgerError::Invalid(format!("stored run step: {e}"));
    Ok(Step {
        turn: serde_json::from_value(step.turn).map_err(bad)?,
        results: step
            .results
            .map(serde_json::from_value)
            .transpose()
            .map_err(bad)?,
    })
}

/// Writes `ending` to the ledger: answer or error in the details, then the run's status.
pub(super) async fn finish(
    agents: &Agents,
    ctx: &mut RunCtx<'_>,
    ending: Ending,
) -> Result<(), AgentError> {
    let store = agents.store();
    let (status, reason) = match ending {
        Ending::Completed(answer) => {
            ctx.detail.answer = Some(answer);
            (RunStatus::Succeeded, None)
        }
        Ending::Failed(reason) => {
            ctx.detail.error = Some(reason.clone());
            (RunStatus::Failed, Some(reason))
        }
        Ending::Cancelled => (RunStatus::Cancelled, Some("cancelled".to_owned())),
        Ending::Parked => (RunStatus::Parked, None),
        Ending::Stopped(freeze) => {
            let reason = format!("stopped by a freeze: {freeze}");
            ctx.detail.error = Some(reason.clone());
            (RunStatus::Failed, Some(reason))
        }
    };
    // The steps not yet stored, the details and the status: one commit (AGENT-53).
    ctx.fold_elapsed();
    let detail = ctx.detail.row(ctx.run, ctx.parent.clone())?;
    let steps = std::mem::take(&mut ctx.unsaved);
    match store
        .finish_run(steps.clone(), detail.clone(), status, reason)
        .await
    {
        Ok(run) => ctx.status = run.status,
        // Ended meanwhile by someone else (a cancel, an expired approval): that stands, and
        // what this run did up to there is still stored.
        Err(LedgerError::RunWrongState { .. }) => {
            ctx.status = store.save_run_steps(steps, detail).await?;
        }
        Err(e) => return Err(e.into()),
    }
    let (run, status) = (ctx.run, ctx.status.as_str());
    tracing::info!(target: crate::EVENTS, %run, status, steps = ctx.steps.len(), "run stopped");
    Ok(())
}

/// Sends the last event of a run served to its caller: `done`, with the status it stopped in
/// (`parked` too: the caller's stream ends there; the run resumes without it).
pub(super) async fn send_done(events: &Sender<RunEvent>, report: &RunReport) {
    let done = RunEvent::Done {
        run_id: report.run_id,
        status: report.status,
        answer: report.answer.clone(),
        session_id: report.session_id,
        usage: report.usage,
        proposals: report.proposals.clone(),
    };
    let _ = events.send(done).await;
}

/// The failure reason of a run that spent its wall-clock budget.
pub(super) fn budget_spent(budget: Duration) -> String {
    format!(
        "the run spent its wall-clock budget of {} s",
        budget.as_secs()
    )
}
