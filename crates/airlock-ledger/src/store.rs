//! The store's roles, the only ways anything changes an invocation's state, and [`Store`],
//! their union.
//!
//! Guarantees: every write is committed durably before its future resolves, and every
//! transition is a compare-and-swap, so of any number of concurrent callers exactly one wins.
//! Each role is a whole concern with nothing left optional: a store plays it fully or not at
//! all, so no caller meets a method that answers "this store keeps none". Whatever plays every
//! role is a [`Store`]; a test double plays one role and takes the rest from a real store
//! ([`WithInvocations`](crate::WithInvocations)).
//!
//! Methods return boxed futures rather than `async fn` so the traits are dyn-compatible: the
//! runtime holds an `Arc<dyn Store>` chosen at boot from configuration, and tests run one suite
//! against both backends through the same object type. (RPITIT `async fn` in traits is not
//! dyn-compatible; the box costs one allocation per call, small next to a database write.)
//! A role's methods are callable on `dyn Store` without importing the role; on a concrete
//! store, import it from [`roles`](crate::roles).

use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;
use time::OffsetDateTime;
use tokio::sync::watch;
use tokio::time::Instant;
use uuid::Uuid;

use crate::audit_trail::AuditTrail;
use crate::sql::tx::TxTool;
use crate::support::notice::{Notice, NoticeRecord};
use crate::transitions::agent_runs::{RunDetail, RunStep};
use crate::transitions::confirmations::{Answered, Confirmation};
use crate::transitions::decide::{Slots, Voted};
use crate::transitions::delegations::Delegation;
use crate::transitions::freezes::{Freeze, FreezeTarget};
use crate::transitions::grants::Grant;
use crate::transitions::pins::ToolPin;
use crate::transitions::rate::{RateBudget, RateRefusal};
use crate::transitions::request_states::StateUse;
use crate::transitions::vault::SealedCredential;
use crate::vocabulary::budget::{BudgetUse, LimitUsage};
use crate::vocabulary::credential::CredentialUse;
use crate::vocabulary::error::{LedgerError, ToolError};
use crate::vocabulary::ids::{InvocationId, RunId, SessionId};
use crate::vocabulary::model::RunLease;
use crate::vocabulary::model::{
    ApprovalFilter, AuditReport, Decision, Invocation, NewInvocation, NewRun, NewSession, Recorded,
    ResumeOutcome, Run, Session, SweepReport,
};
use crate::vocabulary::state::{InvocationState, RunStatus};

/// A result in the future, as every role's method returns.
pub type LedgerFuture<'a, T> = BoxFuture<'a, Result<T, LedgerError>>;

/// The ledger: durable rows for sessions, runs and invocations, and their state machine; every
/// role at once, so an `Arc<dyn Store>` reaches every method and upcasts to any one role.
pub trait Store:
    Sessions
    + AgentRuns
    + Invocations
    + Reads
    + Confirmations
    + Pins
    + Rates
    + Freezes
    + Delegations
    + Budgets
    + Vault
    + Outbox
    + 'static
{
}

impl<T> Store for T where
    T: Sessions
        + AgentRuns
        + Invocations
        + Reads
        + Confirmations
        + Pins
        + Rates
        + Freezes
        + Delegations
        + Budgets
        + Vault
        + Outbox
        + 'static
{
}

/// Sessions and the runs in them: opening, parking, resuming, cancelling and ending a run.
pub trait Sessions: Send + Sync {
    /// Opens session `id` (a fresh [`SessionId::new`]). The caller names the id so it can queue
    /// the session's first call right behind it without waiting: both then share one commit.
    fn create_session(&self, id: SessionId, new: NewSession) -> LedgerFuture<'_, Session>;
    /// Reads a session.
    fn get_session(&self, id: SessionId) -> LedgerFuture<'_, Session>;
    /// Starts a run (status `running`).
    fn create_run(&self, new: NewRun) -> LedgerFuture<'_, Run>;
    /// Reads a run.
    fn get_run(&self, id: RunId) -> LedgerFuture<'_, Run>;
    /// `running → parked`: the run waits for decisions.
    fn park_run(&self, id: RunId) -> LedgerFuture<'_, Run>;
    /// `parked → running` if nothing of the run waits for a person any more; exactly one of
    /// several concurrent callers gets [`ResumeOutcome::Resumed`].
    fn resume_run(&self, id: RunId) -> LedgerFuture<'_, ResumeOutcome>;
    /// Ends a run with a terminal status and a reason.
    fn end_run(
        &self,
        id: RunId,
        status: RunStatus,
        reason: Option<String>,
    ) -> LedgerFuture<'_, Run>;
    /// Cancels a run that has not ended: `cancelled`, and its calls still waiting for a person
    /// expire in the same commit (docs/rules.md AGENT-9).
    fn cancel_run(&self, id: RunId) -> LedgerFuture<'_, Run>;
    /// The run of session `session` that has not ended and no other run started, if any.
    fn open_run_in_session(&self, session: SessionId) -> LedgerFuture<'_, Option<RunId>>;
}

/// What an agent run stores (its steps and details, its sub-agents) and who drives it (its
/// lease).
pub trait AgentRuns: Send + Sync {
    /// Starts agent run `detail.run_id` (status `running`) with its details in one commit;
    /// `consent` — whether the person's message that started it consents — answers what its
    /// session held in the same commit (`None`: no person's message, a sub-agent's run).
    /// docs/rules.md LEDGER-35.
    fn start_run(
        &self,
        new: NewRun,
        detail: RunDetail,
        consent: Option<bool>,
    ) -> LedgerFuture<'_, (Run, Answered)>;
    /// Stores (or replaces) `steps` of agent run `detail.run_id` and the run's details in one
    /// commit (docs/rules.md AGENT-5, AGENT-8, LEDGER-35); returns the run's status as that
    /// commit saw it.
    fn save_run_steps(&self, steps: Vec<RunStep>, detail: RunDetail)
    -> LedgerFuture<'_, RunStatus>;
    /// Stores `steps` and the details of agent run `detail.run_id` and moves it to `status`
    /// (parked, or ended with `reason`; a cancel also cancels its nested runs), one commit
    /// (docs/rules.md LEDGER-35). A run not in a state that allows it is refused as
    /// `RunWrongState` and nothing is stored.
    fn finish_run(
        &self,
        steps: Vec<RunStep>,
        detail: RunDetail,
        status: RunStatus,
        reason: Option<String>,
    ) -> LedgerFuture<'_, Run>;
    /// The stored steps of agent run `run`, in order.
    fn run_steps(&self, run: RunId) -> LedgerFuture<'_, Vec<RunStep>>;
    /// An agent run's details, if any were stored.
    fn run_detail(&self, run: RunId) -> LedgerFuture<'_, Option<RunDetail>>;
    /// The sub-agent run that call `call_id` of run `parent` started, if any.
    fn child_run(&self, parent: RunId, call_id: String) -> LedgerFuture<'_, Option<RunId>>;
    /// Up to `limit` parked runs that no other run started and none of whose calls waits for a
    /// person, longest parked first: what a resume worker tries (docs/rules.md AGENT-7).
    fn parked_root_runs(&self, limit: u32) -> LedgerFuture<'_, Vec<RunId>>;
    /// [`Sessions::resume_run`], the run then held under `lease` in the same swap
    /// (docs/rules.md LEDGER-56): the resumer drives it, renewing the lease, until it parks or
    /// ends.
    fn resume_run_leased(&self, id: RunId, lease: RunLease) -> LedgerFuture<'_, ResumeOutcome>;
    /// Extends `owner`'s lease on running run `id` by `ttl` (LEDGER-57); `false` when another
    /// owner holds the run now, so the caller must stop driving it.
    fn renew_run_lease(&self, id: RunId, owner: &str, ttl: Duration) -> LedgerFuture<'_, bool>;
    /// Takes over up to `limit` running runs whose lease ran out (their driver died or
    /// stalled), each now held under `lease`: the runs the caller is to drive. Of concurrent
    /// takers, in any process, exactly one gets each run (LEDGER-58).
    fn take_over_runs(&self, lease: RunLease, limit: u32) -> LedgerFuture<'_, Vec<RunId>>;
}

/// An invocation's writes: recording a call, leasing and settling it, a person's decision, an
/// upstream task it was handed to, and the sweep of expired leases and overdue rows.
pub trait Invocations: Send + Sync {
    /// Records a call, or returns the existing row for its (session, call id). The approval
    /// policy picks the first state atomically with the insert: `never` → `pending`;
    /// `always` → `awaiting_approval`; `once` → `pending` if an identical call in the same
    /// session or by the same principal was approved by a person, else `awaiting_approval`;
    /// `mode: propose` → `proposed`; a question → `awaiting_answer`.
    fn record(&self, new: NewInvocation) -> LedgerFuture<'_, Recorded>;
    /// [`Invocations::record`], then — only if that created the row and it may run now
    /// (`pending`: approval `never`, or `once` already approved) — [`Invocations::claim`] under
    /// `owner`'s lease, both in one durable commit. A row parked for a person is returned
    /// unclaimed, and so is an existing row for the same (session, call id): a retried call is
    /// never claimed twice. Check `created && invocation.state == Running` before dispatching.
    ///
    /// The default takes two commits, through `self`'s own `record` and `claim` (what a double
    /// that overrides `claim` wants); the built-in store overrides it with one.
    fn record_and_claim(
        &self,
        new: NewInvocation,
        owner: &str,
        lease: Duration,
    ) -> LedgerFuture<'_, Recorded> {
        let owner = owner.to_owned();
        Box::pin(async move {
            let mut recorded = self.record(new).await?;
            if recorded.created && recorded.invocation.state == InvocationState::Pending {
                let id = recorded.invocation.id;
                recorded.invocation = self.claim(id, &owner, lease).await?;
            }
            Ok(recorded)
        })
    }
    /// `pending | approved → running` under `owner`'s lease. Exactly one concurrent claimer
    /// wins; the others get [`LedgerError::Taken`].
    fn claim(&self, id: InvocationId, owner: &str, lease: Duration)
    -> LedgerFuture<'_, Invocation>;
    /// Extends `owner`'s lease on a running row.
    fn renew_lease(
        &self,
        id: InvocationId,
        owner: &str,
        lease: Duration,
    ) -> LedgerFuture<'_, Invocation>;
    /// Stores the result: `running → succeeded | failed`. Only the lease owner may; a second
    /// finish is [`LedgerError::AlreadyFinished`]. The owner's result also settles its row
    /// after the sweeper marked it `in_doubt`, unless a person resolved it first (LEDGER-20).
    /// An error marked [`ToolError::unanswered`](field@ToolError::unanswered) parks an
    /// at-most-once row `in_doubt` instead of `failed`, with the error on the row (LEDGER-19).
    fn finish(
        &self,
        id: InvocationId,
        owner: &str,
        outcome: Result<Value, ToolError>,
    ) -> LedgerFuture<'_, Invocation>;
    /// Claims the row and runs `tool` inside the ledger's own transaction: the tool's writes
    /// and `succeeded` commit together; if the tool fails its writes roll back and the row
    /// commits as `failed`. The tool must not call the store (it would wait on itself).
    fn run_transactional(
        &self,
        id: InvocationId,
        owner: &str,
        tool: TxTool,
    ) -> LedgerFuture<'_, Invocation>;
    /// A named person's decision, as one compare-and-swap. A second decision fails naming
    /// the first; overdue rows expire instead; rows of cancelled or failed runs are refused.
    fn decide(
        &self,
        id: InvocationId,
        by: &str,
        decision: Decision,
    ) -> LedgerFuture<'_, Invocation>;
    /// One decision — an approval or a denial — on up to 100 rows at once (docs/rules.md
    /// DECIDE-19): all of them take it in one commit, or none does and the first refusal (as
    /// [`Invocations::decide`] would give it) names its row.
    fn decide_all(
        &self,
        ids: Vec<InvocationId>,
        by: &str,
        decision: Decision,
    ) -> LedgerFuture<'_, Vec<Invocation>>;
    /// Escalates the waiting call `id` to `to` once it has waited `after` (docs/rules.md
    /// LEDGER-78): whether this call escalated it (once, of any number of callers on any
    /// number of replicas), telling the outbox's routes in the same commit.
    fn escalate(
        &self,
        id: InvocationId,
        after: Duration,
        to: Vec<String>,
    ) -> LedgerFuture<'_, bool>;
    /// Approves `id` by `by` and, in the same commit, grants later calls of its principal
    /// through without asking again, as `grant` bounds them (docs/rules.md LEDGER-77).
    fn grant(&self, id: InvocationId, by: &str, grant: Grant) -> LedgerFuture<'_, Invocation>;
    /// `by`'s approval of a call that needs `needed` distinct approvals (docs/rules.md
    /// LEDGER-76): one compare-and-swap that leaves it waiting, or makes it approved when this
    /// vote completes the quorum. A second vote by `by` is [`LedgerError::AlreadyDecided`].
    /// `slots`, when given, are the roles the quorum needs filled: the vote fills the one
    /// [`Slots`] picks from the votes in its transaction, each once.
    fn vote(
        &self,
        id: InvocationId,
        by: &str,
        needed: u32,
        slots: Option<Slots>,
    ) -> LedgerFuture<'_, Voted>;
    /// A decision taken through a request state the MCP endpoint sealed (docs/rules.md
    /// LEDGER-46): [`Invocations::decide`] by `used.by`, then — for an approval, when
    /// `claim_for` names an owner and a lease — [`Invocations::claim`], and the state's nonce
    /// recorded as used, in one commit. A nonce used before is
    /// [`LedgerError::RequestStateUsed`], whatever the row's state; of concurrent uses exactly
    /// one decides.
    fn decide_once(
        &self,
        used: StateUse,
        claim_for: Option<(String, Duration)>,
    ) -> LedgerFuture<'_, Invocation>;
    /// Hands the running row `id`, held by `owner`, to the upstream's task `task` that runs its
    /// call (docs/rules.md LEDGER-64): in one commit its lease passes to
    /// [`RELAY_OWNER`](crate::RELAY_OWNER) until `lease` from now and `task` is stored beside
    /// it. Whoever follows the task then renews that lease ([`Invocations::renew_lease`]) and
    /// settles the row ([`Invocations::finish`]) as `RELAY_OWNER`. A row `owner` no longer
    /// holds is [`LedgerError::LeaseLost`].
    fn relay_task(
        &self,
        id: InvocationId,
        owner: &str,
        task: String,
        lease: Duration,
    ) -> LedgerFuture<'_, Invocation>;
    /// The upstream task row `id` was handed to ([`Invocations::relay_task`]), if any.
    fn relayed_task(&self, id: InvocationId) -> LedgerFuture<'_, Option<String>>;
    /// Expired leases → `in_doubt` (at-most-once) or `approved` (idempotent, re-run); parked
    /// rows past `expires_at` → `expired`.
    fn sweep(&self, now: OffsetDateTime) -> LedgerFuture<'_, SweepReport>;
}

/// Reading invocations (a row, the rows in a state, a session's or a run's), waiting for them
/// to change, and checking the audit chain.
pub trait Reads: Send + Sync {
    /// Reads a row (expiring it first if it is overdue).
    fn get(&self, id: InvocationId) -> LedgerFuture<'_, Invocation>;
    /// Waits until the row's version differs from `seen` (default: its version now), or until
    /// `deadline`; returns the row as it then is. Woken by notification, never by polling.
    fn wait_for_change(
        &self,
        id: InvocationId,
        seen: Option<i64>,
        deadline: Instant,
    ) -> LedgerFuture<'_, Invocation>;
    /// Changes whenever a row may have become approved — decided, resolved "did not run", swept
    /// for a re-run — or an agent run's call was settled by a person (or expired, or finished
    /// after a decision), through this store or, on PostgreSQL and on a SQLite store opened
    /// with [`StoreConfig::listen`](crate::StoreConfig::listen), through another process. What
    /// a worker waits on before [`Reads::approved_unclaimed`] or
    /// [`AgentRuns::parked_root_runs`]; a hint: the rows say what is so.
    fn approvals(&self) -> watch::Receiver<()>;
    /// Rows waiting for a person's approval or answer, oldest first.
    fn pending_approvals(&self, filter: ApprovalFilter) -> LedgerFuture<'_, Vec<Invocation>>;
    /// Rows in doubt, oldest first.
    fn in_doubt(&self) -> LedgerFuture<'_, Vec<Invocation>>;
    /// How many rows are open (not settled) in each open state, zero included. One grouped
    /// count over the open rows' index, cheap enough for every metrics scrape.
    fn open_counts(&self) -> LedgerFuture<'_, Vec<(InvocationState, u64)>>;
    /// Up to `limit` rows a person approved (or resolved as "did not run") that nobody has
    /// claimed yet and that belong to no agent run (a run claims its own when it resumes),
    /// oldest first — what a background worker picks up. Reading guarantees
    /// nothing: run them through [`Invocations::claim`], which lets exactly one claimer win.
    fn approved_unclaimed(&self, limit: u32) -> LedgerFuture<'_, Vec<Invocation>>;
    /// Whether the call `id` was escalated (LEDGER-78).
    fn escalated(&self, id: InvocationId) -> LedgerFuture<'_, bool>;
    /// A session's invocations in the order they were recorded.
    fn session_invocations(&self, id: SessionId) -> LedgerFuture<'_, Vec<Invocation>>;
    /// A run's invocations in the order they were recorded.
    fn run_invocations(&self, id: RunId) -> LedgerFuture<'_, Vec<Invocation>>;
    /// Checks the audit chain against every row; names the first break.
    fn verify(&self) -> LedgerFuture<'_, AuditReport>;
    /// The audit chain's events with their rows, the freezes and the pins, in one read
    /// snapshot: what `airlock audit export` writes out (docs/rules.md LEDGER-80).
    fn audit_trail(&self) -> LedgerFuture<'_, AuditTrail>;
}

/// What the person at a client says: a call held for their consent in a session (docs/rules.md
/// POLICY-31 … POLICY-34), and their client's answers to requests relayed to it (LEDGER-87).
pub trait Confirmations: Send + Sync {
    /// Settles the running row `id` of `principal` with its MCP client's answer to a request
    /// relayed on its call's stream: `running → succeeded | failed`, whoever holds the lease
    /// (docs/rules.md LEDGER-87). Another principal's row is [`LedgerError::NotFound`]; a row
    /// no longer running is refused as [`Invocations::finish`] refuses it.
    fn answer_relayed(
        &self,
        id: InvocationId,
        principal: &str,
        outcome: Result<Value, ToolError>,
    ) -> LedgerFuture<'_, Invocation>;
    /// Holds `held` for the person's consent, replacing what its session held (docs/rules.md
    /// POLICY-31).
    fn hold_confirmation(&self, held: Confirmation) -> LedgerFuture<'_, ()>;
    /// A person's message in `session` started run `run`: grants the held call to `run` when
    /// the message is a `consent` and the call waits, else removes it (POLICY-33).
    fn answer_confirmation(
        &self,
        session: SessionId,
        run: RunId,
        consent: bool,
    ) -> LedgerFuture<'_, Answered>;
    /// Whether call `call_id` of run `run` goes through on the consent held in `session` for
    /// (`tool`, arguments `fingerprint`): true once for one call, and again for that call only
    /// (POLICY-34).
    fn take_confirmation(
        &self,
        session: SessionId,
        run: RunId,
        held: (String, String),
        call_id: String,
    ) -> LedgerFuture<'_, bool>;
    /// What session `session` holds for the person's consent, if anything.
    fn held_confirmation(&self, session: SessionId) -> LedgerFuture<'_, Option<Confirmation>>;
}

/// Pinned tool definitions (docs/rules.md LEDGER-49).
pub trait Pins: Send + Sync {
    /// Every pinned tool definition, by connection then tool.
    fn tool_pins(&self) -> LedgerFuture<'_, Vec<ToolPin>>;
    /// Pins `pin`'s definition (replacing the one pinned before); its time is the ledger's.
    fn pin_tool(&self, pin: ToolPin) -> LedgerFuture<'_, ()>;
    /// Removes the pin of `tool` of `connection` (a removed tool the operator accepted).
    fn unpin_tool(&self, connection: String, tool: String) -> LedgerFuture<'_, ()>;
}

/// Rate-limit budgets (POLICY-16).
pub trait Rates: Send + Sync {
    /// Takes one call from every budget in `budgets`, or from none: `None` when the call may
    /// run now, else the budget that refused it and when it has room. Budgets are shared by
    /// every store on the same database, at the store's clock.
    fn take_rate(&self, budgets: Vec<RateBudget>) -> LedgerFuture<'_, Option<RateRefusal>>;
}

/// Delegations (docs/rules.md LEDGER-79): deciders handing their role on for a while.
pub trait Delegations: Send + Sync {
    /// Records that `from` hands their role to `to` for `lasts`, from the ledger's time.
    fn delegate(&self, from: String, to: String, lasts: Duration) -> LedgerFuture<'_, Delegation>;
    /// The delegations to `principal` in force now.
    fn delegations_to(&self, principal: String) -> LedgerFuture<'_, Vec<Delegation>>;
}

/// Credentials per principal (docs/rules.md LEDGER-81 … LEDGER-84): sealed by the serving
/// process, stored and released here.
pub trait Vault: Send + Sync {
    /// Stores `credential` for its (connection, principal), replacing the one before, and
    /// releases every call of that principal waiting for it there (`awaiting_credential →
    /// approved`) in the same commit; returns the released calls.
    fn set_credential(&self, credential: SealedCredential) -> LedgerFuture<'_, Vec<InvocationId>>;
    /// Removes `principal`'s credential on `connection` (on every connection when `None`), in
    /// `by`'s name; returns how many were removed.
    fn revoke_credential(
        &self,
        connection: Option<String>,
        principal: String,
        by: String,
    ) -> LedgerFuture<'_, u32>;
    /// Marks a connect flow's state (by its `nonce`) used; `false` when it was used before
    /// (LEDGER-85).
    fn use_connect_state(&self, nonce: String) -> LedgerFuture<'_, bool>;
    /// The stored credential of (`connection`, `principal`), sealed.
    fn credential(
        &self,
        connection: String,
        principal: String,
    ) -> LedgerFuture<'_, Option<SealedCredential>>;
    /// Every stored credential (of `principal`, when given), sealed.
    fn credentials(&self, principal: Option<String>) -> LedgerFuture<'_, Vec<SealedCredential>>;
    /// A number that changes whenever any credential is set or revoked.
    fn credentials_epoch(&self) -> LedgerFuture<'_, i64>;
    /// Parks the running call `id` held by `owner` (nothing was sent) until its principal has
    /// a credential for `connection`; `message` is what its caller reads meanwhile.
    fn await_credential(
        &self,
        id: InvocationId,
        owner: &str,
        connection: String,
        message: String,
    ) -> LedgerFuture<'_, Invocation>;
    /// [`Invocations::finish`], recording on the row which credential the attempt carried
    /// (LEDGER-84).
    fn finish_with_credential(
        &self,
        id: InvocationId,
        owner: &str,
        outcome: Result<Value, ToolError>,
        used: CredentialUse,
    ) -> LedgerFuture<'_, Invocation>;
}

/// Freezes (docs/rules.md LEDGER-73): the kill switch every replica reads.
pub trait Freezes: Send + Sync {
    /// Freezes `freeze.target` (its time is the ledger's) and returns the freeze in force: a
    /// target frozen already keeps its first freeze.
    fn freeze(&self, freeze: Freeze) -> LedgerFuture<'_, Freeze>;
    /// Lifts the freeze of `target` in `by`'s name; `None` when it was not frozen.
    fn unfreeze(&self, target: FreezeTarget, by: String) -> LedgerFuture<'_, Option<Freeze>>;
    /// Every freeze in force, oldest first: one small read, every replica's view of them.
    fn freezes(&self) -> LedgerFuture<'_, Vec<Freeze>>;
}

/// Budgets (docs/rules.md LEDGER-74): what calls reserved of their tools' limits. The shares are
/// judged and written by [`Invocations::record`]; this role reads them.
pub trait Budgets: Send + Sync {
    /// The shares call `id` reserved, with what each limit held when it was recorded.
    fn budget_uses(&self, id: InvocationId) -> LedgerFuture<'_, Vec<BudgetUse>>;
    /// Every limit with shares counting in its window now, and what it holds.
    fn limit_usage(&self) -> LedgerFuture<'_, Vec<LimitUsage>>;
}

/// The notification outbox: rows the state machine wrote with its transitions (see
/// [`StoreConfig::outbox`](crate::StoreConfig::outbox)), claimed and settled by a delivery
/// worker (LEDGER-31 … LEDGER-34).
pub trait Outbox: Send + Sync {
    /// Claims up to `limit` notices due now under `owner`'s lease, oldest due first, counting
    /// an attempt on each. While the lease lasts no other claimer gets them, in this process
    /// or another; when it ends undelivered (a crash), they are due again.
    fn claim_notices(
        &self,
        owner: &str,
        lease: Duration,
        limit: u32,
    ) -> LedgerFuture<'_, Vec<Notice>>;
    /// Marks notice `id` delivered, keeping `reference` for its invocation and destination.
    /// `true` for the one mark that delivered it; `false` when `owner` no longer holds it or
    /// it was settled already.
    fn notice_delivered(
        &self,
        id: Uuid,
        owner: &str,
        reference: Option<String>,
    ) -> LedgerFuture<'_, bool>;
    /// Gives notice `id` back undelivered with `error`: due again after `retry_in`, or failed
    /// for good when `None`. `false` when `owner` no longer holds it.
    fn notice_undelivered(
        &self,
        id: Uuid,
        owner: &str,
        retry_in: Option<Duration>,
        error: String,
    ) -> LedgerFuture<'_, bool>;
    /// The reference a delivered notice to `destination` kept for `invocation`.
    fn notice_reference(
        &self,
        invocation: InvocationId,
        destination: &str,
    ) -> LedgerFuture<'_, Option<String>>;
    /// Every notice of `invocation`, in the order they were written.
    fn notices_of(&self, invocation: InvocationId) -> LedgerFuture<'_, Vec<NoticeRecord>>;
    /// Changes whenever this process committed new notices (a delivery worker looks then, and
    /// now and then for other processes' notices and for retries that fell due).
    fn notices(&self) -> watch::Receiver<()>;
}
