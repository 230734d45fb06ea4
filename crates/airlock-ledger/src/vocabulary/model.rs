//! The ledger's domain types: what callers hand in and what they get back.
//!
//! These are validated values; database rows (`*Row`, private) convert into them in one place.
//! A settled row is read as a typed [`Settlement`]; the ledger renders no presentation JSON.

use std::time::Duration;

use airlock_spec::{Approval, Effect, Mode, SourceKind};
use serde_json::Value;
use time::OffsetDateTime;

use crate::vocabulary::error::ToolError;
use crate::vocabulary::ids::{InvocationId, RunId, SessionId};
use crate::vocabulary::state::{CallKind, DecisionKind, InvocationState, Resolution, RunStatus};

/// A session to open: a conversation, a channel thread, or one MCP endpoint call.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSession {
    /// `mcp`, `api`, `cli`, `slack`, …
    pub channel: String,
    /// Who is calling (the authenticated identity), if known.
    pub principal: Option<String>,
    /// Free-form metadata (a JSON object).
    pub metadata: Value,
}

/// A stored session.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// Its id.
    pub id: SessionId,
    /// The channel it came from.
    pub channel: String,
    /// Who is calling, if known.
    pub principal: Option<String>,
    /// Free-form metadata.
    pub metadata: Value,
    /// When it was opened.
    pub created_at: OffsetDateTime,
}

/// A run to start.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRun {
    /// The session it runs in.
    pub session_id: SessionId,
    /// The agent's name.
    pub agent: String,
    /// SHA-256 of the agent's model-visible definitions.
    pub definitions_digest: String,
    /// The definitions themselves, so a parked run resumes against what the model saw.
    pub definitions_snapshot: Value,
    /// The lease its starter drives it under (LEDGER-56); `None`: no lease, never taken over.
    pub lease: Option<RunLease>,
}

/// A stored run.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// Its id.
    pub id: RunId,
    /// Its session.
    pub session_id: SessionId,
    /// The agent's name.
    pub agent: String,
    /// Where it is.
    pub status: RunStatus,
    /// Why it ended, when it failed or was cancelled (`approval_expired`, …).
    pub status_reason: Option<String>,
    /// SHA-256 of the model-visible definitions.
    pub definitions_digest: String,
    /// The definitions snapshot.
    pub definitions_snapshot: Value,
    /// Bumped on every change (compare-and-swap token).
    pub version: i64,
    /// When it started.
    pub created_at: OffsetDateTime,
    /// When it last changed.
    pub updated_at: OffsetDateTime,
}

/// What [`crate::roles::Sessions::resume_run`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResumeOutcome {
    /// This caller moved the run from `parked` to `running`: it, and only it, resumes the run.
    Resumed,
    /// Some of the run's invocations still wait for a person.
    StillWaiting,
    /// The run is not parked (someone else resumed it, or it ended).
    NotParked(RunStatus),
}

/// A tool call to record.
#[derive(Debug, Clone, PartialEq)]
pub struct NewInvocation {
    /// The session the call belongs to.
    pub session_id: SessionId,
    /// The run, when the call comes from an agent run.
    pub run_id: Option<RunId>,
    /// The caller's id for this call; (session, call id) is unique, so a retry finds its row.
    pub call_id: String,
    /// The tool's full name.
    pub tool: String,
    /// The arguments as given (stored verbatim, hashed canonically).
    pub arguments: Value,
    /// Where the tool runs.
    pub source_kind: SourceKind,
    /// The effect mode.
    pub effect: Effect,
    /// The approval policy.
    pub approval: Approval,
    /// Execute or propose.
    pub mode: Mode,
    /// A tool call, or a question for a person.
    pub kind: CallKind,
    /// Sent upstream for idempotent tools; default: the invocation id.
    pub idempotency_key: Option<String>,
    /// The scope principal for `once`; default: the session's principal.
    pub principal: Option<String>,
    /// The digest of the definition the call was made against: the called tool's own digest
    /// (rows written before tool digests hold their scope's). `once` grants match on it.
    pub definitions_digest: String,
    /// How long a parked row waits; default: the store's approval TTL.
    pub approval_ttl: Option<Duration>,
    /// Why the call is refused before any policy, when it is (the access policy, a freeze):
    /// the row is then born `denied`, decided in the refuser's name with this reason, and never
    /// runs (docs/rules.md LEDGER-48, LEDGER-73).
    pub refusal: Option<Refusal>,
    /// The call's shares of its tool's limits (docs/rules.md LEDGER-74): judged and reserved in
    /// the commit that records it; over a `deny` limit the row is born `failed` (`over_limit`),
    /// over an `approval` one it waits for a person.
    pub shares: Vec<crate::vocabulary::budget::BudgetShare>,
    /// The round this call continues, when it is the next round of a relayed MCP call
    /// (docs/rules.md LEDGER-62): the row is recorded ungated, and the sealed state's nonce is
    /// used in the same commit.
    pub follows: Option<RoundUse>,
    /// Whether a person's grant may let the call through (LEDGER-77): not when its tool names
    /// its approvers, whose quorum no one person's grant stands for (default `true`).
    pub grantable: bool,
    /// The session to open in the job that records the call, when the call has a new session
    /// of its own (an MCP request's): one commit for both, never the session's alone
    /// (LEDGER-90). `None` (the default): the session exists already.
    pub opens: Option<NewSession>,
}

/// The next round of a relayed MCP call: the sealed state's one-time nonce and the round it
/// was sealed for, which must have ended `input_required` (docs/rules.md LEDGER-62).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundUse {
    /// The state's random nonce (never the sealed state itself).
    pub nonce: String,
    /// The round the state was sealed for.
    pub previous: InvocationId,
    /// The principal who used it.
    pub by: String,
}

/// The key of an executor's result that marks an MCP round answered with input requests: the
/// row ends `input_required`, not `succeeded` (LEDGER-61). Only the MCP executor writes it;
/// an upstream's own result never reaches the key (its fields are copied one by one).
pub const INPUT_REQUIRED_KEY: &str = "io.airlock/input_required";

impl NewInvocation {
    /// A local, at-most-once, never-approved, executed tool call; set the other fields directly.
    pub fn new(
        session_id: SessionId,
        call_id: impl Into<String>,
        tool: impl Into<String>,
        arguments: Value,
        definitions_digest: impl Into<String>,
    ) -> Self {
        Self {
            session_id,
            run_id: None,
            call_id: call_id.into(),
            tool: tool.into(),
            arguments,
            source_kind: SourceKind::Local,
            effect: Effect::AtMostOnce,
            approval: Approval::Never,
            mode: Mode::Execute,
            kind: CallKind::Tool,
            idempotency_key: None,
            principal: None,
            definitions_digest: definitions_digest.into(),
            approval_ttl: None,
            refusal: None,
            shares: Vec::new(),
            follows: None,
            grantable: true,
            opens: None,
        }
    }
}

/// What [`crate::roles::Invocations::record`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    /// The row (new, or the existing one for this session and call id).
    pub invocation: Invocation,
    /// `false` when the (session, call id) was already recorded.
    pub created: bool,
}

/// A person's decision on a parked row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Let an `awaiting_approval` row run.
    Approve,
    /// Let an `awaiting_approval` or `proposed` row run with these arguments instead of the
    /// proposed ones (docs/rules.md DECIDE-20): the row keeps both, and runs with these. The
    /// surface checks them against the tool first; the ledger only requires an object.
    Edit {
        /// The arguments the call runs with.
        arguments: Value,
    },
    /// Decline an `awaiting_approval` row or an `awaiting_answer` question, with a reason.
    Deny {
        /// Shown to the model as `{"denied": reason}`.
        reason: String,
    },
    /// Answer an `awaiting_answer` question; the answer becomes the result.
    Answer {
        /// The answer.
        text: String,
    },
    /// Settle an `in_doubt` row.
    Resolve {
        /// Whether the call ran, or that it is given up.
        resolution: Resolution,
        /// The operator's note (kept on the row); for `abandoned`, the required reason.
        note: String,
    },
    /// The caller withdraws its own `awaiting_approval` or `awaiting_answer` call (a cancelled
    /// MCP task): the row is `denied`, its decision recorded as withdrawn.
    Withdraw,
    /// Settle a `proposed` row the caller executed (or rejected) itself, instead of approving
    /// it for airlock to execute (docs/rules.md DECIDE-13).
    Record {
        /// How it went.
        outcome: CallerOutcome,
    },
}

/// How a proposal the caller took into its own hands went (docs/rules.md DECIDE-13).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallerOutcome {
    /// The caller executed it; what it returned becomes the row's result (`succeeded`).
    Completed {
        /// The result.
        result: Value,
    },
    /// The caller executed it and the tool reported an error (`failed`, `tool_failed`).
    ToolError {
        /// The tool's error message.
        message: String,
    },
    /// The caller decided not to execute it (`denied`, with the reason).
    Rejected {
        /// Why.
        reason: String,
    },
}

impl Decision {
    /// Why this decision cannot be taken as written, whatever the row: giving up on a call
    /// needs a reason, since nobody will ever learn from the row itself whether it ran
    /// (docs/rules.md DECIDE-4). Every surface checks with this before deciding.
    #[must_use]
    pub fn problem(&self) -> Option<&'static str> {
        match self {
            Self::Resolve {
                resolution: Resolution::Abandoned,
                note,
            } if note.trim().is_empty() => {
                Some("abandoning a call in doubt needs a reason (the note)")
            }
            Self::Record {
                outcome: CallerOutcome::Rejected { reason },
            } if reason.trim().is_empty() => Some("rejecting a proposal needs a reason"),
            Self::Edit { arguments } if !arguments.is_object() => {
                Some("edited arguments are a JSON object")
            }
            Self::Approve
            | Self::Edit { .. }
            | Self::Withdraw
            | Self::Deny { .. }
            | Self::Answer { .. }
            | Self::Resolve { .. }
            | Self::Record { .. } => None,
        }
    }
}

/// Who decided what, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionRecord {
    /// The named decider.
    pub by: String,
    /// The decision.
    pub decision: DecisionKind,
    /// The reason (deny) or answer (answer).
    pub reason: Option<String>,
    /// When.
    pub at: OffsetDateTime,
}

/// How an in-doubt row was settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolutionRecord {
    /// The named operator.
    pub by: String,
    /// Whether the call ran.
    pub resolution: Resolution,
    /// The operator's note.
    pub note: String,
    /// When.
    pub at: OffsetDateTime,
}

/// A lease on a running row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// Who runs the call.
    pub owner: String,
    /// When the lease runs out unless renewed.
    pub deadline: OffsetDateTime,
}

/// One tool call: one ledger row.
#[derive(Debug, Clone, PartialEq)]
pub struct Invocation {
    /// Its id.
    pub id: InvocationId,
    /// Its session.
    pub session_id: SessionId,
    /// Its run, if any.
    pub run_id: Option<RunId>,
    /// The caller's call id.
    pub call_id: String,
    /// The tool's full name.
    pub tool: String,
    /// The arguments as given (proposed).
    pub arguments: Value,
    /// The arguments a person approved instead, when the approval edited them (DECIDE-20).
    pub approved_arguments: Option<Value>,
    /// Which principal's own credential its last attempt carried (LEDGER-84).
    pub credential_use: Option<crate::vocabulary::credential::CredentialUse>,
    /// SHA-256 of the canonical JSON of the arguments as given.
    pub arguments_hash: String,
    /// Where the tool runs.
    pub source_kind: SourceKind,
    /// The effect mode.
    pub effect: Effect,
    /// The approval policy in force when recorded.
    pub approval: Approval,
    /// Execute or propose.
    pub mode: Mode,
    /// Tool call or question.
    pub kind: CallKind,
    /// Where it is.
    pub state: InvocationState,
    /// Bumped on every change (compare-and-swap token, and what waiters compare).
    pub version: i64,
    /// The tool's result (succeeded), or the answer (`{"answer": …}`).
    pub result: Option<Value>,
    /// The tool's error (failed).
    pub error: Option<ToolError>,
    /// Sent upstream for idempotent tools.
    pub idempotency_key: String,
    /// The scope principal.
    pub principal: Option<String>,
    /// The called tool's digest when the call was recorded; an approval holds only under it
    /// (rows written before tool digests hold their scope's digest).
    pub definitions_digest: String,
    /// The approved invocation whose approval let this one run without parking (`once`).
    pub approval_ref: Option<InvocationId>,
    /// The person's decision, if any.
    pub decision: Option<DecisionRecord>,
    /// How an in-doubt row was settled, if it was.
    pub resolution: Option<ResolutionRecord>,
    /// When a parked row stops waiting.
    pub expires_at: Option<OffsetDateTime>,
    /// The lease (running; kept on in-doubt rows to name who was running).
    pub lease: Option<Lease>,
    /// How many times it was claimed.
    pub attempts: i64,
    /// When recorded.
    pub created_at: OffsetDateTime,
    /// When last changed.
    pub updated_at: OffsetDateTime,
}

/// What a withdrawn call's caller reads as its denial.
const WITHDRAWN: &str = "withdrawn by its caller";

/// Who decided a call the access policy refused (docs/rules.md LEDGER-48): never a person's
/// name, since principals and deciders are configured names without spaces.
pub const ACCESS_POLICY: &str = "access policy";

/// Who decided a call a freeze refused (docs/rules.md LEDGER-73), as [`ACCESS_POLICY`] is.
pub const FREEZE: &str = "airlock freeze";

/// What refuses a call before any policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refuser {
    /// No `[[access]]` rule grants the call.
    AccessPolicy,
    /// A freeze covers the call.
    Freeze,
}

impl Refuser {
    /// The decider its refusals are recorded under.
    #[must_use]
    pub fn decider(self) -> &'static str {
        match self {
            Self::AccessPolicy => ACCESS_POLICY,
            Self::Freeze => FREEZE,
        }
    }
}

/// A call refused before any policy: by what, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// What refused it.
    pub by: Refuser,
    /// Why, as the caller reads it.
    pub reason: String,
}

/// The reason an expired call is shown with, where a declined call shows the person's
/// (docs/rules.md POLICY-15).
pub const APPROVAL_EXPIRED: &str = "approval expired";

/// How a settled row ended, as typed values: each edge (the MCP endpoint, the HTTP API, the
/// CLI) renders its own shape from this, and nothing parses a rendering back.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Settlement<'a> {
    /// The tool's result, or a question's answer (`{"answer": …}`).
    Succeeded(&'a Value),
    /// The tool failed.
    Failed(&'a ToolError),
    /// A person declined it (a decline without a reason reads as `denied`).
    Denied {
        /// The person's reason.
        reason: &'a str,
    },
    /// Nobody decided before `expires_at`.
    Expired,
    /// An operator gave up on an in-doubt row: it never runs, and whether it ran is unknown.
    Abandoned {
        /// The operator's reason.
        reason: &'a str,
    },
    /// An operator settled an in-doubt row as run.
    Resolved {
        /// Whether the call ran.
        resolution: Resolution,
        /// The operator's note.
        note: &'a str,
    },
    /// A round of a relayed MCP call the upstream answered with input requests
    /// (docs/rules.md LEDGER-61): what it asked (`inputRequests`) and its own `requestState`.
    InputRequired(&'a Value),
    /// Recorded as a proposal; nothing was called.
    Proposed {
        /// The tool.
        tool: &'a str,
        /// Its arguments.
        arguments: &'a Value,
    },
}

impl<'a> Settlement<'a> {
    /// The reason a declined call is shown with: the person's, or `approval expired` when
    /// nobody decided in time; `None` for a call that was not declined.
    #[must_use]
    pub fn denied_reason(&self) -> Option<&'a str> {
        match *self {
            Self::Denied { reason } => Some(reason),
            Self::Expired => Some(APPROVAL_EXPIRED),
            Self::Succeeded(_)
            | Self::Failed(_)
            | Self::Resolved { .. }
            | Self::Abandoned { .. }
            | Self::InputRequired(_)
            | Self::Proposed { .. } => None,
        }
    }
}

impl Invocation {
    /// The arguments the call runs with: the approved ones when a person edited them, else
    /// those given (docs/rules.md DECIDE-20). Every executor reads them through this.
    #[must_use]
    pub fn effective_arguments(&self) -> &Value {
        self.approved_arguments.as_ref().unwrap_or(&self.arguments)
    }

    /// [`Self::effective_arguments`], taken out of the row: a call's arguments may be megabytes.
    pub fn take_effective_arguments(&mut self) -> Value {
        let arguments = self
            .approved_arguments
            .as_mut()
            .unwrap_or(&mut self.arguments);
        std::mem::take(arguments)
    }

    /// Whether the row is a proposal a caller receives: still `proposed`, or decided by a
    /// person since (docs/rules.md AGENT-31). A proposal refused before it was recorded (no
    /// receiver, POLICY-12) is a failed call nobody decided, and is not one.
    #[must_use]
    pub fn is_proposal(&self) -> bool {
        self.mode == Mode::Propose
            && (self.state == InvocationState::Proposed || self.decision.is_some())
    }

    /// Whether the row runs as its upstream's task (docs/rules.md LEDGER-64): `running` under
    /// the relay's lease, which no process can hold (a claim under its name is refused).
    #[must_use]
    pub fn runs_as_upstream_task(&self) -> bool {
        self.state == InvocationState::Running
            && self
                .lease
                .as_ref()
                .is_some_and(|l| l.owner == crate::RELAY_OWNER)
    }

    /// How the row ended, or `None` while it is not settled. A terminal row always carries
    /// what its state names (the ledger writes them together); one that does not (edited by
    /// hand) reads as unsettled rather than as an invented result.
    #[must_use]
    pub fn settlement(&self) -> Option<Settlement<'_>> {
        match self.state {
            InvocationState::Succeeded => self.result.as_ref().map(Settlement::Succeeded),
            InvocationState::Failed => self.error.as_ref().map(Settlement::Failed),
            InvocationState::Denied => Some(Settlement::Denied {
                reason: match &self.decision {
                    Some(d) if d.decision == DecisionKind::Withdrawn => WITHDRAWN,
                    Some(d) => d.reason.as_deref().unwrap_or("denied"),
                    None => "denied",
                },
            }),
            InvocationState::Expired => Some(Settlement::Expired),
            InvocationState::Resolved => self.resolution.as_ref().map(|r| Settlement::Resolved {
                resolution: r.resolution,
                note: &r.note,
            }),
            InvocationState::Abandoned => self
                .resolution
                .as_ref()
                .map(|r| Settlement::Abandoned { reason: &r.note }),
            InvocationState::InputRequired => self.result.as_ref().map(Settlement::InputRequired),
            InvocationState::Proposed => Some(Settlement::Proposed {
                tool: &self.tool,
                arguments: &self.arguments,
            }),
            InvocationState::Pending
            | InvocationState::AwaitingApproval
            | InvocationState::AwaitingAnswer
            | InvocationState::AwaitingCredential
            | InvocationState::Approved
            | InvocationState::Running
            | InvocationState::InDoubt => None,
        }
    }
}

/// Filters for [`crate::roles::Reads::pending_approvals`]; empty means everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApprovalFilter {
    /// Only this tool.
    pub tool: Option<String>,
    /// Only this principal.
    pub principal: Option<String>,
    /// Only rows recorded at or before this time (older than a given age).
    pub recorded_before: Option<OffsetDateTime>,
    /// At most this many rows (default 500).
    pub limit: Option<u32>,
    /// Newest first instead of oldest first (the limit then keeps the newest rows).
    pub newest_first: bool,
    /// Only rows in this state (`awaiting_approval`, `awaiting_answer`, `awaiting_credential`,
    /// `proposed`, or `in_doubt` with [`ApprovalFilter::with_in_doubt`]).
    pub state: Option<InvocationState>,
    /// The calls in doubt too, in the same order (they wait for a person to say whether they
    /// ran).
    pub with_in_doubt: bool,
    /// Rows of the list to skip first (the database skips them in its index, docs/rules.md
    /// LEDGER-86).
    pub offset: Option<u32>,
}

/// What one [`crate::roles::Invocations::sweep`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// At-most-once rows whose lease ran out: now `in_doubt`.
    pub in_doubt: Vec<InvocationId>,
    /// Idempotent rows whose lease ran out: back to `approved` for a re-run.
    pub retried: Vec<InvocationId>,
    /// Parked rows past `expires_at`: now `expired`.
    pub expired: Vec<InvocationId>,
}

/// The result of [`crate::roles::Reads::verify`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditReport {
    /// Chain events checked.
    pub events: u64,
    /// Rows checked.
    pub rows: u64,
    /// The first break found, if any.
    pub first_break: Option<ChainBreak>,
}

/// Where the audit chain is broken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainBreak {
    /// `invocation`, `session`, `run` or `event`.
    pub entity: String,
    /// The row's id (for `event`: `lane/seq`).
    pub id: String,
    /// What is wrong.
    pub reason: String,
}

impl std::fmt::Display for ChainBreak {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.entity, self.id, self.reason)
    }
}

/// Who drives a run, and for how long each grant or renewal holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunLease {
    /// The driving process (unique per process, as a call's lease owner).
    pub owner: String,
    /// How long a grant or renewal lasts.
    pub ttl: Duration,
}
