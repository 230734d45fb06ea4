//! The ledger's errors: each variant names something a caller can act on.
//!
//! Database errors keep their `sqlx::Error` as the source and never print SQL to users.

use time::OffsetDateTime;

use crate::ids::{InvocationId, RunId, SessionId};
use crate::state::{InvocationState, RunStatus};

/// Everything that can go wrong in the ledger. A tool's own failure is not here: it is a
/// [`ToolError`] stored on the row.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// No invocation has this id.
    #[error("invocation {0} not found")]
    NotFound(InvocationId),
    /// No session has this id.
    #[error("session {0} not found")]
    SessionNotFound(SessionId),
    /// No run has this id.
    #[error("run {0} not found")]
    RunNotFound(RunId),
    /// The transition is illegal from the row's current state.
    #[error("invocation {id} is {actual}, expected {}", crate::state::list(.expected))]
    WrongState {
        /// The row.
        id: InvocationId,
        /// The states the operation accepts.
        expected: &'static [InvocationState],
        /// The state the row is in.
        actual: InvocationState,
    },
    /// Another claimer won: the row is running or already ran.
    #[error("invocation {id} is taken: it is {state}{}", holder_suffix(.holder))]
    Taken {
        /// The row.
        id: InvocationId,
        /// The state the row is in.
        state: InvocationState,
        /// Who holds (or last held) the lease.
        holder: Option<String>,
    },
    /// A person already decided this row; a second decision never overwrites the first.
    #[error("invocation {id} was already decided: {decision} by {by}")]
    AlreadyDecided {
        /// The row.
        id: InvocationId,
        /// The first decider.
        by: String,
        /// The first decision (`approved`, `denied`, `answered`, `resolved: ran`, …).
        decision: String,
    },
    /// The row passed its `expires_at` before anyone decided; it is now `expired`.
    #[error("invocation {id} expired at {expires_at}; it can no longer be decided")]
    Expired {
        /// The row.
        id: InvocationId,
        /// When it expired.
        expires_at: OffsetDateTime,
    },
    /// A result was already stored; results are written once.
    #[error("invocation {id} is already finished ({state}); its result is stored once")]
    AlreadyFinished {
        /// The row.
        id: InvocationId,
        /// The terminal state.
        state: InvocationState,
    },
    /// The caller no longer holds the lease (the sweeper took the row, or another owner runs it).
    #[error("invocation {id} is not leased to {owner}: it is {state}{}", holder_suffix(.holder))]
    LeaseLost {
        /// The row.
        id: InvocationId,
        /// Who asked.
        owner: String,
        /// The state the row is in.
        state: InvocationState,
        /// Who holds the lease now, if anyone.
        holder: Option<String>,
    },
    /// The row's run was cancelled or failed; deciding would resume a dead run.
    #[error("invocation {id} belongs to run {run}, which is {status}; the decision is refused")]
    RunClosed {
        /// The row.
        id: InvocationId,
        /// Its run.
        run: RunId,
        /// The run's status.
        status: RunStatus,
    },
    /// A run transition is illegal from the run's current status.
    #[error("run {id} is {actual}, expected {expected}")]
    RunWrongState {
        /// The run.
        id: RunId,
        /// The status the operation accepts.
        expected: RunStatus,
        /// The status the run is in.
        actual: RunStatus,
    },
    /// The call cannot be recorded or run as asked (for example a remote tool declared
    /// transactional: a remote call cannot join the ledger's transaction).
    #[error("invalid call: {0}")]
    Invalid(String),
    /// A stored row cannot be read back into a domain value (edited or corrupted data).
    #[error("stored {entity} {id} cannot be read back: {reason}")]
    Corrupt {
        /// `invocation`, `session`, `run` or `event`.
        entity: &'static str,
        /// Its id.
        id: String,
        /// What is wrong.
        reason: String,
    },
    /// The store's writer has stopped (the store was dropped or its runtime shut down).
    #[error("the ledger writer has stopped; reopen the store")]
    Closed,
    /// The database failed (connection lost, disk full, …). Retry or check the database.
    #[error("database error")]
    Database(#[source] sqlx::Error),
    /// Applying the schema migrations at start failed.
    #[error("ledger schema migration failed")]
    Migrate(#[source] sqlx::migrate::MigrateError),
}

fn holder_suffix(holder: &Option<String>) -> String {
    holder
        .as_ref()
        .map(|h| format!(" (lease held by {h})"))
        .unwrap_or_default()
}

impl From<sqlx::Error> for LedgerError {
    fn from(e: sqlx::Error) -> Self {
        Self::Database(e)
    }
}

impl From<sqlx::migrate::MigrateError> for LedgerError {
    fn from(e: sqlx::migrate::MigrateError) -> Self {
        Self::Migrate(e)
    }
}

/// A tool's own failure, stored on the row and shown to the model as `{kind, message}`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct ToolError {
    /// A short machine-readable kind (`timeout`, `http_500`, `database`, …).
    pub kind: String,
    /// A human-readable message.
    pub message: String,
}

impl ToolError {
    /// A tool error of `kind` with `message`.
    pub fn new(kind: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            message: message.into(),
        }
    }
}

impl From<LedgerError> for ToolError {
    /// A transactional tool's own SQL failed: the row becomes `failed` with this message.
    fn from(e: LedgerError) -> Self {
        let mut message = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            message.push_str(": ");
            message.push_str(&s.to_string());
            source = s.source();
        }
        Self::new("database", message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_both_states() {
        let id = InvocationId::new();
        let e = LedgerError::WrongState {
            id,
            expected: &[InvocationState::AwaitingApproval],
            actual: InvocationState::Running,
        };
        assert_eq!(
            e.to_string(),
            format!("invocation {id} is running, expected awaiting_approval")
        );
        let e = LedgerError::Taken {
            id,
            state: InvocationState::Running,
            holder: Some("w1".into()),
        };
        assert!(e.to_string().ends_with("it is running (lease held by w1)"));
    }
}
