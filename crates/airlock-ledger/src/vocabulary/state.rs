//! The states of an invocation and of a run, and which transitions are legal (docs/rules.md
//! LEDGER-2).
//!
//! The table in [`InvocationState::can_become`] is the whole state machine: every write the
//! ledger makes checks it before the compare-and-swap, so an illegal transition is refused
//! even if a caller's own checks were wrong.

use std::fmt;
use std::str::FromStr;

macro_rules! words {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $word:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($(#[$vmeta])* $variant),+ }

        impl $name {
            /// Every value, in declaration order.
            #[allow(dead_code, reason = "read by tests of the schema")]
            pub(crate) const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// The one spelling of this value (as stored in the database).
            #[must_use]
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $word),+ }
            }
        }

        impl FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($word => Ok(Self::$variant),)+
                    other => Err(format!("unknown {} {other:?}", stringify!($name))),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

words! {
    /// Where an invocation is in its life. See docs/rules.md LEDGER-2 for the moves.
    InvocationState {
        /// Recorded, ready to be claimed (approval `never`, or covered by an earlier approval).
        Pending = "pending",
        /// `mode: propose`: recorded and returned as a proposal; nothing runs unless a person
        /// approves it (then it runs once, like any approved call) — or denies it. Never
        /// expires (docs/rules.md AGENT-31).
        Proposed = "proposed",
        /// Parked until a named person approves or denies it, or it expires.
        AwaitingApproval = "awaiting_approval",
        /// A question (`ask_human`) parked until a person answers or declines it.
        AwaitingAnswer = "awaiting_answer",
        /// Parked until its principal has a credential for the connection it goes through
        /// (docs/rules.md LEDGER-82): nothing was sent; it runs once the credential exists.
        AwaitingCredential = "awaiting_credential",
        /// Approved (or released for a re-run); ready to be claimed.
        Approved = "approved",
        /// Claimed under a lease; the tool is (or may be) running.
        Running = "running",
        /// The tool returned a result. Terminal.
        Succeeded = "succeeded",
        /// The tool returned an error. Terminal.
        Failed = "failed",
        /// A person declined it. Terminal.
        Denied = "denied",
        /// Nobody decided before `expires_at`. Terminal.
        Expired = "expired",
        /// An at-most-once call lost its lease while running: it may or may not have run.
        InDoubt = "in_doubt",
        /// A person settled an in-doubt call as "it ran". Terminal.
        Resolved = "resolved",
        /// A person gave up on an in-doubt call, with a reason: whether it ran stays unknown,
        /// and it never runs again. Terminal.
        Abandoned = "abandoned",
        /// One round of a relayed MCP call: the upstream answered that it needs the client's
        /// input first (docs/rules.md LEDGER-61). Not a result, not an error; the next round
        /// is a row of its own. Terminal.
        InputRequired = "input_required",
    }
}

words! {
    /// Where a run is in its life.
    RunStatus {
        /// The run is executing.
        Running = "running",
        /// The run waits for decisions on some of its invocations.
        Parked = "parked",
        /// The run finished normally. Terminal.
        Succeeded = "succeeded",
        /// The run failed (for example `approval_expired`). Terminal.
        Failed = "failed",
        /// The run was cancelled. Terminal.
        Cancelled = "cancelled",
    }
}

words! {
    /// What a person decided on a parked call (stored in `decision`).
    DecisionKind {
        /// Approved: the call may run.
        Approved = "approved",
        /// Approved with arguments the person edited (docs/rules.md DECIDE-20): the call runs
        /// with them. Never a `once` grant, which matches approvals of the proposed arguments.
        Edited = "edited",
        /// Denied, or a question declined.
        Denied = "denied",
        /// A question answered; the answer is the result.
        Answered = "answered",
        /// A proposal the caller executed or rejected itself; the row holds how it went
        /// (docs/rules.md DECIDE-13).
        Recorded = "recorded",
        /// The caller withdrew its own waiting call (a cancelled MCP task): the row is
        /// `denied` and never runs (docs/rules.md MCP-12).
        Withdrawn = "withdrawn",
    }
}

words! {
    /// How a person settled an in-doubt call (stored in `resolution`).
    Resolution {
        /// The call did run; it is settled with the operator's note and never re-run.
        Ran = "ran",
        /// The call did not run; it goes back to `approved` and runs once more.
        DidNotRun = "did_not_run",
        /// Given up, with the operator's reason: the row is `abandoned` and never runs.
        Abandoned = "abandoned",
    }
}

words! {
    /// What an invocation is: a tool call, or a question for a person (`ask_human`).
    CallKind {
        /// A tool call.
        Tool = "tool",
        /// A question parked for a person's answer.
        Question = "question",
    }
}

use InvocationState as S;

impl InvocationState {
    /// States that never change again.
    #[must_use]
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            S::Succeeded
                | S::Failed
                | S::Denied
                | S::Expired
                | S::Resolved
                | S::Abandoned
                | S::InputRequired
        )
    }

    /// States that wait for a person and carry an `expires_at`.
    #[must_use]
    pub fn is_parked(self) -> bool {
        matches!(
            self,
            S::AwaitingApproval | S::AwaitingAnswer | S::AwaitingCredential | S::InDoubt
        )
    }

    /// Whether `self → next` is a legal transition (docs/rules.md LEDGER-2). `running → running`
    /// is a lease renewal.
    #[must_use]
    pub fn can_become(self, next: InvocationState) -> bool {
        match self {
            S::Pending | S::Approved => matches!(next, S::Running),
            // A vote toward a quorum leaves the row waiting, as a new version (LEDGER-76).
            S::AwaitingApproval => matches!(
                next,
                S::AwaitingApproval | S::Approved | S::Denied | S::Expired
            ),
            // AGENT-31: a proposal is decided like a parked call, but never expires; the caller
            // may settle it with its own outcome (DECIDE-13).
            S::Proposed => matches!(
                next,
                S::Proposed | S::Approved | S::Denied | S::Succeeded | S::Failed
            ),
            S::AwaitingAnswer => matches!(next, S::Succeeded | S::Denied | S::Expired),
            // LEDGER-82: released by the credential, withdrawn by its caller, or expired.
            S::AwaitingCredential => matches!(next, S::Approved | S::Denied | S::Expired),
            // in_doubt: the original lease owner may still report the outcome.
            S::Running => matches!(
                next,
                S::Running
                    | S::Succeeded
                    | S::Failed
                    | S::InDoubt
                    | S::Approved
                    | S::InputRequired
                    | S::AwaitingCredential
            ),
            S::InDoubt => matches!(
                next,
                S::Approved | S::Resolved | S::Abandoned | S::Expired | S::Succeeded | S::Failed
            ),
            S::Succeeded
            | S::Failed
            | S::Denied
            | S::Expired
            | S::Resolved
            | S::Abandoned
            | S::InputRequired => false,
        }
    }
}

impl RunStatus {
    /// Statuses that never change again.
    #[must_use]
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Cancelled)
    }
}

/// Formats a list of states as `a | b`, for error messages.
pub(crate) fn list(states: &[InvocationState]) -> String {
    states
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_states_go_nowhere() {
        let all = [
            S::Pending,
            S::Proposed,
            S::AwaitingApproval,
            S::AwaitingAnswer,
            S::Approved,
            S::Running,
            S::Succeeded,
            S::Failed,
            S::Denied,
            S::Expired,
            S::InDoubt,
            S::Resolved,
            S::Abandoned,
            S::InputRequired,
        ];
        for from in all {
            assert_eq!(from.as_str().parse::<InvocationState>().unwrap(), from);
            if from.is_terminal() {
                assert!(all.iter().all(|to| !from.can_become(*to)), "{from}");
            }
        }
        assert!(!S::AwaitingApproval.can_become(S::Running));
        assert!(!S::Pending.can_become(S::Succeeded));
        assert!(S::Proposed.can_become(S::Approved) && S::Proposed.can_become(S::Denied));
        assert!(!S::Proposed.can_become(S::Running) && !S::Proposed.can_become(S::Expired));
        assert!(S::Proposed.can_become(S::Succeeded) && S::Proposed.can_become(S::Failed));
    }

    #[test]
    fn ledger_61_only_a_running_round_ends_input_required() {
        for from in InvocationState::ALL {
            assert_eq!(
                from.can_become(S::InputRequired),
                *from == S::Running,
                "{from}"
            );
        }
        assert!(S::InputRequired.is_terminal());
    }
}
