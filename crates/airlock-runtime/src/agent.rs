//! Agent runs (docs/rules.md AGENT): the loop that asks an agent's model for a turn, sends each
//! of its tool calls along the one path ([`Gateway::call_in_run`], channel `run`), and feeds the
//! results back until the model answers — parking when a call waits for a person and resuming,
//! exactly once and in whichever process claims it, when the last one is decided.
//!
//! Guarantees:
//! - every step's model turn is stored before its calls are made, and its results once they all
//!   settled, so a resumed run rebuilds its conversation from the ledger: no completed model
//!   turn and no recorded call is repeated (AGENT-5, AGENT-6);
//! - a parked run resumes only through the ledger's `resume_run` compare-and-swap (AGENT-7);
//! - a running root run is held by the process driving it under a lease it renews; a run whose
//!   driver died is taken over by another process once the lease ran out, and replayed from
//!   the ledger (AGENT-57..AGENT-60);
//! - a run offers the model the definitions it started with (AGENT-14);
//! - connections supplied with a run live in memory for it only (AGENT-12);
//! - a sub-agent is a nested run whose calls belong to the root run, so a call parked anywhere
//!   in the tree parks the root, and the root resumes the tree (AGENT-20..AGENT-23);
//! - a `confirm: true` action runs only on the person's literal consent, once (`confirm`,
//!   POLICY-30..POLICY-35);
//! - with `[telemetry]`, a run, its steps and their calls are spans holding no content
//!   (`trace`, OPS-80).
//!
//! [`Agents`] is the interface every surface uses: [`Agents::run`], [`Agents::read`],
//! [`Agents::principal`] (whose run it is), [`Agents::cancel`]; [`resume::work`] is the background worker of a serving process.

mod confirm;
mod ctx;
mod drive;
mod gate;
mod hold;
mod record;
pub mod resume;
mod settle;
mod trace;
mod turn;
mod types;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use airlock_egress::trace::within;
use airlock_ledger::{Clock, NewRun, RunId, RunStatus, SessionId, Store, SystemClock};
use airlock_model::{Model, ModelError};
use airlock_spec::{AgentSpec, Scope, ScopeId};
use tokio::sync::mpsc::Sender;
use tokio_util::sync::CancellationToken;

use crate::execute::{RunConnections, SuppliedNames};
use crate::gateway::Gateway;
use crate::session;
use record::{Detail, Snapshot};

pub use confirm::{ConfirmationNotice, DEFAULT_YES_WORDS, YesWords};
pub use types::{
    AgentError, Drift, HowToApprove, Proposal, ProposalDecision, RunConnection, RunCredential,
    RunEvent, RunInvocation, RunReport, RunRequest, RunState,
};

/// Builds the model an agent runs against (the binary passes `airlock_model::connect` over the
/// guarded client and the credential the manifest names; tests pass fakes).
pub type ModelFactory = Arc<dyn Fn(&AgentSpec) -> Result<Arc<dyn Model>, ModelError> + Send + Sync>;

/// The channel a run's session and calls are recorded under.
pub const CHANNEL: &str = "run";

/// Bounds of every run (docs/rules.md AGENT-10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Model turns per run (each sub-agent run has its own count).
    pub max_steps: u32,
    /// Wall-clock time a run may spend running, parked time excluded, summed over resumes.
    pub budget: Duration,
}

impl Default for Limits {
    /// 25 steps and 10 minutes.
    fn default() -> Self {
        Self {
            max_steps: 25,
            budget: Duration::from_secs(600),
        }
    }
}

/// Runs agents over one gateway. Cheap to clone.
#[derive(Clone)]
pub struct Agents {
    inner: Arc<Inner>,
}

struct Inner {
    gateway: Arc<Gateway>,
    agents: BTreeMap<String, AgentSpec>,
    models: ModelFactory,
    limits: Limits,
    /// The messages that consent to a held call (POLICY-33).
    yes_words: YesWords,
    /// What a run's wall-clock budget is measured by (AGENT-10; tests inject one, AGENT-35).
    clock: Arc<dyn Clock>,
    live: Mutex<Live>,
}

/// What this process holds of the runs it serves.
#[derive(Default)]
struct Live {
    /// Sessions with a run being started or served here.
    sessions: HashSet<SessionId>,
    /// Cancellation of the runs served here, by root run.
    cancels: HashMap<RunId, CancellationToken>,
}

impl Agents {
    /// Agents `agents` (the deployment's manifests) over `gateway`, whose scopes hold each
    /// agent's tools; the default yes-words consent to a held call.
    #[must_use]
    pub fn new(
        gateway: Arc<Gateway>,
        agents: BTreeMap<String, AgentSpec>,
        models: ModelFactory,
        limits: Limits,
    ) -> Self {
        Self::build(
            gateway,
            agents,
            models,
            limits,
            YesWords::default(),
            Arc::new(SystemClock),
        )
    }

    /// [`Agents::new`] where `yes_words` consent to a held call (`[confirm] yes_words` of
    /// `airlock.toml`, POLICY-33).
    #[must_use]
    pub fn with_yes_words(
        gateway: Arc<Gateway>,
        agents: BTreeMap<String, AgentSpec>,
        models: ModelFactory,
        limits: Limits,
        yes_words: YesWords,
    ) -> Self {
        Self::build(
            gateway,
            agents,
            models,
            limits,
            yes_words,
            Arc::new(SystemClock),
        )
    }

    /// [`Agents::new`] measuring the runs' wall-clock budget by `clock` (AGENT-35).
    #[must_use]
    pub fn with_clock(
        gateway: Arc<Gateway>,
        agents: BTreeMap<String, AgentSpec>,
        models: ModelFactory,
        limits: Limits,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self::build(gateway, agents, models, limits, YesWords::default(), clock)
    }

    fn build(
        gateway: Arc<Gateway>,
        agents: BTreeMap<String, AgentSpec>,
        models: ModelFactory,
        limits: Limits,
        yes_words: YesWords,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let inner = Inner {
            gateway,
            agents,
            models,
            limits,
            yes_words,
            clock,
            live: Mutex::default(),
        };
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The gateway the runs call through.
    #[must_use]
    pub fn gateway(&self) -> &Arc<Gateway> {
        &self.inner.gateway
    }

    fn store(&self) -> &dyn Store {
        self.inner.gateway.store().as_ref()
    }

    fn live(&self) -> std::sync::MutexGuard<'_, Live> {
        self.inner
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The scope of agent `name` as the deployment serves it now.
    fn scope(&self, name: &str) -> Option<Scope> {
        self.inner
            .gateway
            .scope(&ScopeId::Agent(name.to_owned()))
            .cloned()
    }

    /// Starts a run and drives it until it completes, fails, is cancelled or parks; `events`
    /// hears it as it goes (`done` last), `cancel` stops it (recorded as cancelled).
    ///
    /// # Errors
    /// The run could not start: unknown agent, busy or foreign session, bad request, or the
    /// ledger failed. A run that started reports its failure in the [`RunReport`] instead.
    pub async fn run(
        &self,
        request: RunRequest,
        events: Option<Sender<RunEvent>>,
        cancel: CancellationToken,
    ) -> Result<RunReport, AgentError> {
        let scope = self
            .scope(&request.agent)
            .filter(|_| self.inner.agents.contains_key(&request.agent))
            .ok_or_else(|| AgentError::UnknownAgent(request.agent.clone()))?;
        check_request(&request)?;
        let cx = trace::run(self, &request.agent, false);
        let result = within(cx.as_ref(), self.start(request, &scope, events, cancel)).await;
        trace::ended(cx.as_ref(), &result);
        result
    }

    /// [`Agents::run`] once the request is known to be valid: the session, the run, serving it.
    async fn start(
        &self,
        request: RunRequest,
        scope: &Scope,
        events: Option<Sender<RunEvent>>,
        cancel: CancellationToken,
    ) -> Result<RunReport, AgentError> {
        let session = self.claim_session(&request, scope).await?;
        let run = match self.start_run(&request, scope, session).await {
            Ok(run) => run,
            Err(e) => {
                self.live().sessions.remove(&session);
                return Err(e);
            }
        };
        let connections = supplied(&request);
        self.inner.gateway.supplied().hold(run, connections);
        self.serve(run, events, cancel).await
    }

    /// The report of run `id`, read from the ledger (any process, after any restart).
    ///
    /// # Errors
    /// [`AgentError::RunNotFound`], or the ledger failed.
    pub async fn read(&self, id: RunId) -> Result<RunReport, AgentError> {
        let scopes = |name: &str| self.scope(name);
        let words = &self.inner.yes_words;
        match record::report(self.store(), id, &scopes, words).await {
            Ok(report) => Ok(report),
            Err(airlock_ledger::LedgerError::RunNotFound(_)) => Err(AgentError::RunNotFound(id)),
            Err(e) => Err(e.into()),
        }
    }

    /// The principal that started run `id` (`None`: a run started without one); a run below
    /// the root has its root's. What a surface checks before it shows or stops a run for a
    /// caller (docs/rules.md AGENT-67).
    ///
    /// # Errors
    /// [`AgentError::RunNotFound`], or the ledger failed.
    pub async fn principal(&self, id: RunId) -> Result<Option<String>, AgentError> {
        match Detail::load(self.store(), id).await {
            Ok((detail, _)) => Ok(detail.principal),
            Err(airlock_ledger::LedgerError::RunNotFound(_)) => Err(AgentError::RunNotFound(id)),
            Err(e) => Err(e.into()),
        }
    }

    /// Cancels run `id`: a run served here stops at its next step; a parked one is cancelled
    /// at once and its waiting calls expire (docs/rules.md AGENT-9).
    ///
    /// # Errors
    /// [`AgentError::RunNotFound`], [`AgentError::RunEnded`], or the ledger failed.
    pub async fn cancel(&self, id: RunId) -> Result<RunReport, AgentError> {
        let run = match self.store().get_run(id).await {
            Ok(run) => run,
            Err(airlock_ledger::LedgerError::RunNotFound(_)) => {
                return Err(AgentError::RunNotFound(id));
            }
            Err(e) => return Err(e.into()),
        };
        if run.status.is_terminal() {
            return Err(AgentError::RunEnded {
                run: id,
                status: RunState::from_status(run.status),
            });
        }
        if let Some(token) = self.live().cancels.get(&id) {
            token.cancel();
        }
        match self.store().cancel_run(id).await {
            // The loop served here may have ended it first; the report says how.
            Ok(_) | Err(airlock_ledger::LedgerError::RunWrongState { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        // A cancelled run makes no more calls: what its caller supplied is not kept for it.
        self.inner.gateway.supplied().release(id);
        tracing::info!(target: crate::EVENTS, run = %id, "run cancelled");
        self.read(id).await
    }

    /// Drives a root run this caller just resumed (`resume_run` said so) or took over (its
    /// lease ran out, AGENT-59): the resume worker's entry. A run whose caller supplied
    /// connections goes on only where they are still held: elsewhere (after a restart, on
    /// another replica) it fails naming them, and never reaches `airlock.toml`'s connections
    /// of those names instead (AGENT-63).
    ///
    /// # Errors
    /// As [`Agents::read`].
    pub async fn continue_resumed(&self, id: RunId) -> Result<RunReport, AgentError> {
        let run = self.store().get_run(id).await?;
        let cx = trace::run(self, &run.agent, true);
        let result = within(cx.as_ref(), self.resume(id, run.session_id)).await;
        trace::ended(cx.as_ref(), &result);
        result
    }

    /// [`Agents::continue_resumed`] once the run is read.
    async fn resume(&self, id: RunId, session: SessionId) -> Result<RunReport, AgentError> {
        if self.inner.gateway.supplied().get(id).is_none() {
            let names = SuppliedNames::of(self.store(), id).await?;
            if !names.is_empty() {
                return self.fail_unsupplied(id, &names).await;
            }
            // Held as supplying nothing, so its calls need not ask the ledger again.
            let nothing = Arc::new(RunConnections::gone(names));
            self.inner.gateway.supplied().hold(id, nothing);
        }
        self.live().sessions.insert(session);
        self.serve(id, None, CancellationToken::new()).await
    }

    /// Ends run `id`, whose supplied connections this process does not hold, naming them.
    async fn fail_unsupplied(&self, id: RunId, names: &[String]) -> Result<RunReport, AgentError> {
        let reason = format!(
            "the connections its caller supplied ({}) are no longer held: the process restarted, \
             or another replica took the run over; airlock never sends the run's calls to another \
             connection, so start a new run supplying them",
            names
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        tracing::warn!(target: crate::EVENTS, run = %id, %reason, "run failed");
        match self
            .store()
            .end_run(id, RunStatus::Failed, Some(reason))
            .await
        {
            Ok(_) | Err(airlock_ledger::LedgerError::RunWrongState { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        self.read(id).await
    }

    /// Serves root run `run` until it ends or parks, then reports it.
    async fn serve(
        &self,
        run: RunId,
        events: Option<Sender<RunEvent>>,
        cancel: CancellationToken,
    ) -> Result<RunReport, AgentError> {
        trace::serving(run);
        self.live().cancels.insert(run, cancel.clone());
        let driving = drive::serve_root(self, run, events.as_ref(), &cancel);
        let driven = hold::while_held(self, run, driving).await;
        let report = self.read(run).await;
        self.release(run, report.as_ref().ok());
        driven?;
        let report = report?;
        if let Some(events) = &events {
            ctx::send_done(events, &report).await;
        }
        Ok(report)
    }

    /// Forgets what this process held for `run` once it no longer serves it.
    fn release(&self, run: RunId, report: Option<&RunReport>) {
        let mut live = self.live();
        live.cancels.remove(&run);
        if let Some(report) = report {
            live.sessions.remove(&report.session_id);
            // Kept while the run may go on: parked, or `running` because another serve (a
            // resume that won the run while this one finished) is using them now.
            if !matches!(report.status, RunState::Parked | RunState::Running) {
                self.inner.gateway.supplied().release(run);
            }
        }
    }

    /// The session to run in, marked busy here; refused if a run of it has not ended.
    async fn claim_session(
        &self,
        request: &RunRequest,
        scope: &Scope,
    ) -> Result<SessionId, AgentError> {
        let session = match request.session_id {
            Some(id) => self.existing_session(id, request, scope).await?,
            None => {
                let principal = request.principal.clone();
                self.inner
                    .gateway
                    .open_session(CHANNEL, principal, &scope.id)
                    .await
                    .map_err(ledger_of)?
            }
        };
        if !self.live().sessions.insert(session) {
            let run = self.store().open_run_in_session(session).await?;
            return Err(busy(session, run));
        }
        match self.store().open_run_in_session(session).await {
            Ok(None) => Ok(session),
            Ok(Some(run)) => {
                self.live().sessions.remove(&session);
                Err(AgentError::SessionBusy { session, run })
            }
            Err(e) => {
                self.live().sessions.remove(&session);
                Err(e.into())
            }
        }
    }

    async fn existing_session(
        &self,
        id: SessionId,
        request: &RunRequest,
        scope: &Scope,
    ) -> Result<SessionId, AgentError> {
        let opened = match self.store().get_session(id).await {
            Ok(s) => s,
            Err(airlock_ledger::LedgerError::SessionNotFound(_)) => {
                return Err(AgentError::UnknownSession(id));
            }
            Err(e) => return Err(e.into()),
        };
        let same_scope = session::scope(&opened).as_ref() == Some(&scope.id);
        if !same_scope || opened.principal != request.principal {
            return Err(AgentError::ForeignSession(id));
        }
        Ok(id)
    }

    /// Records the run (status `running`), its snapshot and its details, and answers with the
    /// person's message what the session held (POLICY-33) — one commit (LEDGER-35).
    async fn start_run(
        &self,
        request: &RunRequest,
        scope: &Scope,
        session: SessionId,
    ) -> Result<RunId, AgentError> {
        let snapshot = Snapshot::of(scope);
        let new = NewRun {
            session_id: session,
            agent: request.agent.clone(),
            definitions_digest: scope.digest(),
            definitions_snapshot: snapshot.to_value(),
            lease: Some(self.inner.gateway.run_lease()),
        };
        let id = RunId::new();
        let detail = Detail {
            input: request.input.clone(),
            context: request.context.clone(),
            principal: request.principal.clone(),
            groups: request.groups.clone(),
            proposals_enabled: request.proposals_enabled,
            root: id,
            via: None,
            usage: airlock_model::Usage::default(),
            elapsed_ms: 0,
            answer: None,
            error: None,
            supplied: SuppliedNames {
                supplied: request.connections.keys().cloned().collect(),
            },
        };
        let consent = self.inner.yes_words.consents(&request.input);
        let row = detail.row(id, None)?;
        let answered = match self.store().start_run(new, row, Some(consent)).await {
            Ok((_, answered)) => answered,
            // AGENT-32: another process started a run in this session first.
            Err(airlock_ledger::LedgerError::SessionBusy { session, run }) => {
                return Err(busy(session, run));
            }
            Err(e) => return Err(e.into()),
        };
        tracing::info!(target: crate::EVENTS, run = %id, agent = %request.agent, "run started");
        confirm::answered(id, &answered);
        Ok(id)
    }
}

/// Largest input accepted, in bytes.
pub const MAX_INPUT_BYTES: usize = 256 * 1024;

fn check_request(request: &RunRequest) -> Result<(), AgentError> {
    if request.input.trim().is_empty() {
        return Err(AgentError::BadRequest("`input` is empty".into()));
    }
    if request.input.len() > MAX_INPUT_BYTES {
        return Err(AgentError::BadRequest(format!(
            "`input` is {} bytes; the limit is {MAX_INPUT_BYTES}",
            request.input.len()
        )));
    }
    for (name, connection) in &request.connections {
        if url::Url::parse(&connection.base_url).is_err() {
            // The URL only: never the credential beside it.
            return Err(AgentError::BadRequest(format!(
                "`connections.{name}.base_url` is not a URL"
            )));
        }
    }
    Ok(())
}

/// The request's connections, in memory for this run only.
fn supplied(request: &RunRequest) -> Arc<RunConnections> {
    let mut connections = RunConnections::default();
    for (name, c) in &request.connections {
        connections.insert(name, &c.base_url, &c.credential);
    }
    Arc::new(connections)
}

fn busy(session: SessionId, run: Option<RunId>) -> AgentError {
    match run {
        Some(run) => AgentError::SessionBusy { session, run },
        // Being started right now (here, or in another process): no run row yet to name.
        None => AgentError::BadRequest(format!("session {session} is starting another run")),
    }
}

fn ledger_of(error: crate::GatewayError) -> AgentError {
    match error {
        crate::GatewayError::Ledger(e) => AgentError::Ledger(e),
        other => AgentError::BadRequest(other.to_string()),
    }
}

/// Whether a stored status is one the loop may go on from.
fn is_open(status: RunStatus) -> bool {
    matches!(status, RunStatus::Running | RunStatus::Parked)
}
