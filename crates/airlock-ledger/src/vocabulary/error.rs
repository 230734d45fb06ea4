//! The ledger's errors: each variant names something a caller can act on.
//!
//! Database errors keep their `sqlx::Error` as the source and never print SQL to users. A tool's
//! own failure is a [`ToolError`] of one [`ToolErrorKind`] vocabulary shared by every executor;
//! any word an older build stored still reads (see [`ToolErrorKind::from_stored`]).

use std::time::Duration;

use time::OffsetDateTime;

use crate::vocabulary::ids::{InvocationId, RunId, SessionId};
use crate::vocabulary::state::{InvocationState, RunStatus};

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
    #[error("invocation {id} is {actual}, expected {}", crate::vocabulary::state::list(.expected))]
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
    /// A sealed request state was used before (docs/rules.md LEDGER-46): the decision it
    /// carried is recorded once, and this use is a replay.
    #[error("the request state for invocation {id} was already used")]
    RequestStateUsed {
        /// The row the state was sealed for.
        id: InvocationId,
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
    /// The session already has a run that has not ended (docs/rules.md AGENT-32); `run` names
    /// it, unless it ended between the refusal and the look-up.
    #[error("session {session} already has a run in progress{}", run.map(|r| format!(" ({r})")).unwrap_or_default())]
    SessionBusy {
        /// The session.
        session: SessionId,
        /// The open run.
        run: Option<RunId>,
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
    /// A decision a rule above the ledger refuses before anything is written (for example an
    /// approval of a proposal whose run's caller supplied the connection it would run through,
    /// docs/rules.md AGENT-64).
    #[error("invocation {id}: the decision is refused: {reason}")]
    DecisionRefused {
        /// The row.
        id: InvocationId,
        /// Why, naming what the decider can do instead.
        reason: String,
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

impl LedgerError {
    /// The error's variant, in snake case: a trace's `error.type` (docs/rules.md LEDGER-38).
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            LedgerError::NotFound(_) => "not_found",
            LedgerError::SessionNotFound(_) => "session_not_found",
            LedgerError::RunNotFound(_) => "run_not_found",
            LedgerError::WrongState { .. } => "wrong_state",
            LedgerError::Taken { .. } => "taken",
            LedgerError::AlreadyDecided { .. } => "already_decided",
            LedgerError::Expired { .. } => "expired",
            LedgerError::AlreadyFinished { .. } => "already_finished",
            LedgerError::LeaseLost { .. } => "lease_lost",
            LedgerError::RunClosed { .. } => "run_closed",
            LedgerError::DecisionRefused { .. } => "decision_refused",
            LedgerError::SessionBusy { .. } => "session_busy",
            LedgerError::RunWrongState { .. } => "run_wrong_state",
            LedgerError::RequestStateUsed { .. } => "request_state_used",
            LedgerError::Invalid(_) => "invalid",
            LedgerError::Corrupt { .. } => "corrupt",
            LedgerError::Closed => "closed",
            LedgerError::Database(_) => "database",
            LedgerError::Migrate(_) => "migrate",
        }
    }
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

/// Why a tool call failed: one vocabulary for every executor (api, mcp, `fetch`, local), the
/// stored rows, the MCP endpoint, the HTTP API and the metrics. The same cause gets the same
/// kind whatever the tool type. Stored and shown as the snake_case word of [`Self::as_str`].
///
/// `blocked` and `unreachable` mean nothing left the machine; `timeout`, `upstream_error` and
/// `bad_response` mean the request may have reached the upstream (a follow-up relies on this
/// split to tell a safe retry from an ambiguous outcome).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolErrorKind {
    /// The arguments do not fit the tool: schema violations, refused path values, an oversized
    /// proposal. Nothing was sent.
    BadArguments,
    /// The declaration or the connection cannot be executed as given (a base URL that does not
    /// parse, a header that cannot be sent, a tool no longer declared, a declaration changed
    /// since the approval). Nothing was sent.
    BadDeclaration,
    /// The connection has no credential, or the credential has the wrong shape. Nothing was sent.
    CredentialMissing,
    /// The upstream refused the credential (HTTP 401 or 403).
    CredentialInvalid,
    /// Too many calls: the upstream said 429, or airlock's own rate limit refused (then nothing
    /// was sent).
    RateLimited,
    /// The egress guard refused the destination or the request (scheme, URL, name, address, a
    /// credential over plain http). Nothing was sent.
    Blocked,
    /// No connection was made: the name has no answer, the connection was refused, the TLS
    /// handshake failed. Nothing of the request was sent.
    Unreachable,
    /// The deadline passed; the request may have reached the upstream.
    Timeout,
    /// The upstream refused the request (any other 4xx).
    BadRequest,
    /// The upstream failed: HTTP 408 or 5xx, or an MCP server's JSON-RPC error answer.
    UpstreamError,
    /// The upstream answered something airlock does not pass on: a redirect, a non-text,
    /// oversized or badly encoded body, invalid JSON, a broken MCP reply, or a
    /// `response.select` path that is not there.
    BadResponse,
    /// The call cannot be made on this channel: a proposal nobody would receive, or past the
    /// run's cap (docs/rules.md POLICY-10, POLICY-12).
    Unavailable,
    /// A transactional local tool's SQL failed; its writes were rolled back with the row.
    Database,
    /// The tool ran and reported its own failure: a local tool's error, an MCP tool's
    /// `isError: true` result.
    ToolFailed,
    /// The upstream ran the call as a task of its own, and that task failed at the protocol
    /// level (docs/rules.md MCP-78): the message is the upstream's.
    TaskFailed,
    /// The call would take one of its tool's limits past its cap (docs/rules.md POLICY-57): the
    /// message names the limit and what is left. Nothing was sent.
    OverLimit,
}

impl ToolErrorKind {
    /// Every kind, in the order the documentation lists them.
    pub const ALL: [Self; 16] = [
        Self::BadArguments,
        Self::BadDeclaration,
        Self::CredentialMissing,
        Self::CredentialInvalid,
        Self::RateLimited,
        Self::Blocked,
        Self::Unreachable,
        Self::Timeout,
        Self::BadRequest,
        Self::UpstreamError,
        Self::BadResponse,
        Self::Unavailable,
        Self::Database,
        Self::ToolFailed,
        Self::TaskFailed,
        Self::OverLimit,
    ];

    /// The stable word stored on ledger rows and shown to clients.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BadArguments => "bad_arguments",
            Self::BadDeclaration => "bad_declaration",
            Self::CredentialMissing => "credential_missing",
            Self::CredentialInvalid => "credential_invalid",
            Self::RateLimited => "rate_limited",
            Self::Blocked => "blocked",
            Self::Unreachable => "unreachable",
            Self::Timeout => "timeout",
            Self::BadRequest => "bad_request",
            Self::UpstreamError => "upstream_error",
            Self::BadResponse => "bad_response",
            Self::Unavailable => "unavailable",
            Self::Database => "database",
            Self::ToolFailed => "tool_failed",
            Self::TaskFailed => "task_failed",
            Self::OverLimit => "over_limit",
        }
    }

    /// The kind of an HTTP error status, the same for every tool type: 401/403 the credential,
    /// 429 the rate, 408 and 5xx the upstream, any other 4xx the request.
    #[must_use]
    pub fn from_http_status(status: u16) -> Self {
        match status {
            401 | 403 => Self::CredentialInvalid,
            429 => Self::RateLimited,
            400..=499 if status != 408 => Self::BadRequest,
            _ => Self::UpstreamError,
        }
    }

    /// The kind a stored word means. Rows written before the vocabulary was unified hold the
    /// words of the egress guard (`unresolvable`, `connect`, …), of the MCP client
    /// (`bad_reply`, `jsonrpc_error`, …), `http_<status>`, or a local tool's own word; each
    /// reads as the kind its cause has now. A word nobody defined reads as
    /// [`Self::ToolFailed`] (only a local tool could have stored one). The stored text itself
    /// is never rewritten, so the audit chain, which hashes the columns as stored, still
    /// verifies such a row.
    #[must_use]
    pub fn from_stored(word: &str) -> Self {
        if let Some(kind) = Self::ALL.into_iter().find(|k| k.as_str() == word) {
            return kind;
        }
        if let Some(status) = word.strip_prefix("http_").and_then(|s| s.parse().ok()) {
            return Self::from_http_status(status);
        }
        match word {
            "blocked_scheme" | "blocked_url" | "blocked_name" | "blocked_address"
            | "blocked_request" => Self::Blocked,
            "unresolvable" | "connect" | "tls" => Self::Unreachable,
            "redirect" | "encoding" | "not_text" | "too_large" | "bad_reply" | "protocol" => {
                Self::BadResponse
            }
            "http_status" | "jsonrpc_error" | "other" => Self::UpstreamError,
            "config" => Self::BadDeclaration,
            _ => Self::ToolFailed,
        }
    }
}

impl std::fmt::Display for ToolErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for ToolErrorKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for ToolErrorKind {
    /// Any word reads (see [`ToolErrorKind::from_stored`]): an old row never fails to load.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let word = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Ok(Self::from_stored(&word))
    }
}

/// A tool's failure, stored on the row and shown to the model as `{kind, message}`.
///
/// It is a tool *result*, never a protocol error: the model reads the message and may correct
/// itself. The message never contains a credential (callers build it from paths and names).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct ToolError {
    /// Why it failed.
    pub kind: ToolErrorKind,
    /// What the model is told.
    pub message: String,
    /// For [`ToolErrorKind::RateLimited`]: how long to wait, when known. Not stored: it is
    /// only good at the moment of the refusal.
    #[serde(skip)]
    pub retry_after: Option<Duration>,
    /// The request may have reached the upstream and no answer came back (a timeout, a
    /// connection broken after the request was sent): the call may have taken effect. Finishing
    /// an at-most-once row with such an error parks it `in_doubt` instead of `failed`
    /// (docs/rules.md LEDGER-19). Not stored: the row's state says it.
    #[serde(skip)]
    pub unanswered: bool,
}

impl ToolError {
    /// An error of `kind` with `message`.
    pub fn new(kind: ToolErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            retry_after: None,
            unanswered: false,
        }
    }

    /// The same error, marked as following a request the upstream may have received without
    /// answering (see [`ToolError::unanswered`](field@ToolError::unanswered)).
    #[must_use]
    pub fn into_unanswered(self) -> Self {
        Self {
            unanswered: true,
            ..self
        }
    }

    /// A `rate_limited` error, with the wait when known.
    pub fn rate_limited(message: impl Into<String>, retry_after: Option<Duration>) -> Self {
        Self {
            retry_after,
            ..Self::new(ToolErrorKind::RateLimited, message)
        }
    }

    /// Shorthand for [`ToolErrorKind::BadArguments`].
    pub fn bad_arguments(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::BadArguments, message)
    }

    /// Shorthand for [`ToolErrorKind::BadDeclaration`].
    pub fn bad_declaration(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::BadDeclaration, message)
    }

    /// Shorthand for [`ToolErrorKind::BadResponse`].
    pub fn bad_response(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::BadResponse, message)
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
        Self::new(ToolErrorKind::Database, message)
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

    #[test]
    fn kinds_have_stable_words_and_read_back() {
        for kind in ToolErrorKind::ALL {
            assert_eq!(ToolErrorKind::from_stored(kind.as_str()), kind);
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{kind}\""));
            assert_eq!(serde_json::from_str::<ToolErrorKind>(&json).unwrap(), kind);
        }
    }

    #[test]
    fn legacy_words_read_as_the_kind_of_their_cause() {
        use ToolErrorKind as K;
        for (word, kind) in [
            ("unresolvable", K::Unreachable),
            ("connect", K::Unreachable),
            ("tls", K::Unreachable),
            ("blocked_address", K::Blocked),
            ("not_text", K::BadResponse),
            ("bad_reply", K::BadResponse),
            ("http_status", K::UpstreamError),
            ("jsonrpc_error", K::UpstreamError),
            ("http_500", K::UpstreamError),
            ("http_404", K::BadRequest),
            ("http_401", K::CredentialInvalid),
            ("http_429", K::RateLimited),
            ("config", K::BadDeclaration),
            ("refused", K::ToolFailed),
        ] {
            assert_eq!(K::from_stored(word), kind, "{word}");
        }
        let old: ToolError =
            serde_json::from_str(r#"{"kind":"unresolvable","message":"no answer"}"#).unwrap();
        assert_eq!(old.kind, K::Unreachable);
    }

    #[test]
    fn the_wire_shape_is_kind_and_message() {
        let e = ToolError::rate_limited("HTTP 429: slow down", Some(Duration::from_secs(3)));
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"kind":"rate_limited","message":"HTTP 429: slow down"}"#
        );
        assert_eq!(e.retry_after, Some(Duration::from_secs(3)));
    }
}
