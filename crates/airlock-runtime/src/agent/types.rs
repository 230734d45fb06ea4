//! The typed interface of agent runs, as every surface (HTTP, WebSocket, CLI) uses it: what a
//! caller asks for ([`RunRequest`]), what it hears while the run goes ([`RunEvent`]), what it
//! gets back ([`RunReport`]) and why a run could not even start ([`AgentError`]).
//!
//! Guarantees: a supplied connection's credential is a [`SecretString`] (redacted in `Debug`)
//! and is in no event, report or error; a report's `proposals` is always present.

use std::collections::BTreeMap;

use airlock_ledger::{InvocationId, LedgerError, RunId, SessionId};
use airlock_model::Usage;
use serde::Serialize;
use serde_json::Value;

/// A run to start.
#[derive(Debug, Clone, Default)]
pub struct RunRequest {
    /// The agent (`agents/<name>.yml`).
    pub agent: String,
    /// What the person asks.
    pub input: String,
    /// The session to run in; a new one when `None`. One run at a time per session.
    pub session_id: Option<SessionId>,
    /// Extra context shown to the model with the input (a JSON value).
    pub context: Option<Value>,
    /// Connections supplied for this run only, by `[connections]` name: held in memory while
    /// the run is served, never stored, logged or shown (docs/rules.md AGENT-12).
    pub connections: BTreeMap<String, RunConnection>,
    /// The authenticated caller, if any.
    pub principal: Option<String>,
    /// The groups of a caller authenticated by a token, which `[[access]]` holds the run to;
    /// `None`: the operator's own CLI, which it does not (docs/rules.md POLICY-47).
    pub groups: Option<Vec<String>>,
    /// Whether the caller receives proposals (an HTTP or WebSocket caller does); when not, a
    /// proposing tool refuses (docs/rules.md POLICY-12).
    pub proposals_enabled: bool,
}

pub use crate::execute::RunCredential;

/// A connection supplied with a run.
#[derive(Debug, Clone)]
pub struct RunConnection {
    /// Its base URL (reached through the public-only egress guard, docs/rules.md EGRESS-38).
    pub base_url: String,
    /// The credential sent to it, sent as the tool's `auth.scheme` says.
    pub credential: RunCredential,
}

/// Where a run is, as its caller sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// The loop is going.
    Running,
    /// Some call waits for a person; the run resumes when the last one is decided.
    Parked,
    /// The model answered.
    Completed,
    /// The run stopped on an error (the report's `error` says which).
    Failed,
    /// Cancelled by its caller.
    Cancelled,
}

impl RunState {
    /// The caller's word for a stored run status.
    #[must_use]
    pub fn from_status(status: airlock_ledger::RunStatus) -> Self {
        use airlock_ledger::RunStatus as S;
        match status {
            S::Running => Self::Running,
            S::Parked => Self::Parked,
            S::Succeeded => Self::Completed,
            S::Failed => Self::Failed,
            S::Cancelled => Self::Cancelled,
        }
    }
}

/// A write a tool proposed instead of executing it (docs/rules.md POLICY-9, POLICY-11).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Proposal {
    /// The proposal's ledger row (what a person decides on).
    pub id: InvocationId,
    /// The tool the model called.
    pub tool: String,
    /// `api` or `mcp`.
    pub kind: &'static str,
    /// The declaration's name (the api's slug, the mcp tool's slug or connection).
    pub target: String,
    /// The operation (api) or the remote tool's name (mcp).
    pub operation: String,
    /// The arguments, validated against the tool's schema.
    pub arguments: Value,
    /// The arguments it runs with instead, when the person who approved it edited them
    /// (docs/rules.md DECIDE-20).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved_arguments: Option<Value>,
    /// The sub-agent it came through, for a proposal made below the run (AGENT-22).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// How it stands now (docs/rules.md DECIDE-14): `proposed`; `approved`, `running`,
    /// `succeeded`, `failed` when approved and executed by airlock; `denied`; or, settled by
    /// the caller's own record, `succeeded`, `failed` or `denied` with `decision` `recorded`.
    pub state: &'static str,
    /// Who decided it and how (`approved`, `edited`, `denied`, `recorded`), once someone did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<ProposalDecision>,
}

/// Who decided a proposal and how (docs/rules.md DECIDE-14).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProposalDecision {
    /// The decider (the person, or the caller that recorded its own outcome).
    pub by: String,
    /// `approved`, `edited` (approved with edited arguments), `denied` or `recorded`.
    pub decision: &'static str,
    /// The reason given with a denial or a rejection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One call the run made, as its row stands.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunInvocation {
    /// The row.
    pub id: InvocationId,
    /// The tool.
    pub tool: String,
    /// Its state word.
    pub state: &'static str,
}

/// The deployment's definitions differ from those the run started with (docs/rules.md
/// AGENT-15): reported, never fatal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Drift {
    /// Tools the run started with that the deployment no longer serves.
    pub removed: Vec<String>,
    /// Tools the deployment serves now that the run did not start with (not offered to it).
    pub added: Vec<String>,
    /// Tools whose model-visible definition changed.
    pub changed: Vec<String>,
}

/// What a run came to (also read back later, from the ledger).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunReport {
    /// The run.
    pub run_id: RunId,
    /// Its session.
    pub session_id: SessionId,
    /// The agent.
    pub agent: String,
    /// Where it is.
    pub status: RunState,
    /// The model's answer, once completed.
    pub answer: Option<String>,
    /// Why it failed, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Model turns taken.
    pub steps: u32,
    /// Tokens spent, summed over its turns (its sub-agents' included).
    pub usage: Usage,
    /// What it proposed, its sub-agents' included; always present.
    pub proposals: Vec<Proposal>,
    /// Its calls (its sub-agents' included), in the order they were recorded.
    pub invocations: Vec<RunInvocation>,
    /// Calls waiting for a person, when parked.
    pub waiting: Vec<InvocationId>,
    /// Drift of the deployment since the run started, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<Drift>,
    /// A call of this run waiting for the person's consent: airlock's notice, which surfaces
    /// show the person beside the answer (POLICY-32).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmation: Option<super::ConfirmationNotice>,
}

/// How a person decides a parked call, for the caller to show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HowToApprove {
    /// The command line (`airlock approve <id> --dir …`), when the serving binary said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cli: Option<String>,
    /// The HTTP route.
    pub http: String,
}

/// What a caller hears while its run goes; `done` is always the last event of a run that
/// ends (completed, failed, cancelled), after every other.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RunEvent {
    /// The run changed state (`running` when it starts or resumes, `parked`, …).
    Status {
        /// The run.
        run_id: RunId,
        /// Its state.
        status: RunState,
    },
    /// Model text, as it streams.
    Token {
        /// The piece.
        text: String,
    },
    /// The model called a tool.
    ToolCall {
        /// The step.
        step: u32,
        /// The model's call id.
        call_id: String,
        /// The tool.
        tool: String,
        /// The arguments.
        arguments: Value,
    },
    /// A call settled; this is what the model is shown.
    ToolResult {
        /// The step.
        step: u32,
        /// The model's call id.
        call_id: String,
        /// The tool.
        tool: String,
        /// What the model reads.
        content: String,
        /// Whether it failed.
        is_error: bool,
    },
    /// A call waits for a person.
    ApprovalRequired {
        /// The row to decide.
        invocation_id: InvocationId,
        /// The tool.
        tool: String,
        /// How to decide it.
        how: HowToApprove,
    },
    /// A call waits for its principal's credential for the connection it goes through
    /// (docs/rules.md CALL-12): the run resumes once they provide it.
    CredentialRequired {
        /// The waiting row.
        invocation_id: InvocationId,
        /// The tool.
        tool: String,
        /// How to provide the credential.
        message: String,
    },
    /// A call waits for the person's consent; their next message decides (POLICY-32). Sent
    /// by airlock, whatever the model says.
    ConfirmationRequired {
        /// What to show the person.
        notice: super::ConfirmationNotice,
    },
    /// The run ended; nothing follows.
    Done {
        /// The run.
        run_id: RunId,
        /// How it ended.
        status: RunState,
        /// The model's answer, if it completed.
        answer: Option<String>,
        /// The session, to continue the conversation.
        session_id: SessionId,
        /// Tokens spent.
        usage: Usage,
        /// What it proposed.
        proposals: Vec<Proposal>,
    },
}

/// Why a run could not start, or a run could not be read or cancelled.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// No agent of that name is served.
    #[error("unknown agent `{0}`")]
    UnknownAgent(String),
    /// The session already has a run that has not ended (409 at the edge).
    #[error("session {session} already has run {run} in progress")]
    SessionBusy {
        /// The session.
        session: SessionId,
        /// The run in progress.
        run: RunId,
    },
    /// No such session.
    #[error("unknown session {0}")]
    UnknownSession(SessionId),
    /// The session was opened for another agent or principal.
    #[error("session {0} belongs to another agent or caller")]
    ForeignSession(SessionId),
    /// No such run.
    #[error("unknown run {0}")]
    RunNotFound(RunId),
    /// The run already ended.
    #[error("run {run} has already ended ({status:?})")]
    RunEnded {
        /// The run.
        run: RunId,
        /// How it ended.
        status: RunState,
    },
    /// The request itself is wrong (names the field and why).
    #[error("bad request: {0}")]
    BadRequest(String),
    /// The ledger failed (database lost, corrupt row).
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}
