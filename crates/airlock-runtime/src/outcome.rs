//! What became of a call, as its caller sees it: always read from the row it reports.
//!
//! An [`Outcome`] holds only its row, and its kind is derived from the row's state, so it can
//! never claim more than the ledger says — a row another claimer still runs is parked, not
//! completed, whoever builds the outcome.

use airlock_ledger::{Invocation, InvocationState};

/// What became of a call: its row, read as [`OutcomeKind`].
#[derive(Debug, Clone)]
pub struct Outcome {
    row: Invocation,
}

/// The kinds of [`Outcome`], by the state of its row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutcomeKind {
    /// Settled with a result or a tool error (`invocation().settlement()`).
    Completed,
    /// Waiting for a person (approval, answer, a credential, in-doubt resolution) or running
    /// elsewhere.
    Parked,
    /// Recorded as a proposal; nothing was called.
    Proposed,
    /// A person declined it (or its caller withdrew it).
    Denied,
    /// Nobody decided before it expired; nothing ran (docs/rules.md POLICY-15).
    Expired,
    /// A person gave up on it while it was in doubt, with a reason; it never runs
    /// (docs/rules.md DECIDE-4).
    Abandoned,
    /// A relayed MCP round whose upstream needs the client's input first (docs/rules.md
    /// LEDGER-61); the next round is another call.
    InputRequired,
}

impl Outcome {
    /// The outcome `row` reports.
    pub(crate) fn from_row(row: Invocation) -> Self {
        Self { row }
    }

    /// What became of the call.
    #[must_use]
    pub fn kind(&self) -> OutcomeKind {
        match self.row.state {
            InvocationState::Proposed => OutcomeKind::Proposed,
            InvocationState::Denied => OutcomeKind::Denied,
            InvocationState::Expired => OutcomeKind::Expired,
            InvocationState::Abandoned => OutcomeKind::Abandoned,
            InvocationState::InputRequired => OutcomeKind::InputRequired,
            InvocationState::Succeeded | InvocationState::Failed | InvocationState::Resolved => {
                OutcomeKind::Completed
            }
            InvocationState::Pending
            | InvocationState::AwaitingApproval
            | InvocationState::AwaitingAnswer
            | InvocationState::AwaitingCredential
            | InvocationState::Approved
            | InvocationState::Running
            | InvocationState::InDoubt => OutcomeKind::Parked,
        }
    }

    /// The row behind the outcome.
    #[must_use]
    pub fn invocation(&self) -> &Invocation {
        &self.row
    }

    /// The row behind the outcome, owned.
    #[must_use]
    pub fn into_invocation(self) -> Invocation {
        self.row
    }
}
