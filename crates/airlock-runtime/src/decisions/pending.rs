//! What waits for a person — calls awaiting an approval, an answer or a principal's credential,
//! proposals, and calls in doubt — as one list shared by `GET /v1/approvals`, `airlock approvals list` and the inbox:
//! oldest first (newest first for the inbox), filtered by kind, tool, principal, agent and age,
//! and paged by offset. Each row's [`Origin`] (the channel and scope of its session) is read by [`origins`].
//!
//! The ledger filters by tool, principal, kind and age and skips and limits the page in one
//! query, in its index (docs/rules.md LEDGER-86); the agent filter reads each row's session (the
//! scope it was opened in) here, so with `agent` set at most [`MAX_SCAN`] of the oldest waiting
//! rows are considered and paged here.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::time::Duration;

use airlock_ledger::{ApprovalFilter, Invocation, InvocationState, LedgerError, SessionId, Store};
use airlock_spec::ScopeId;
use time::OffsetDateTime;

use crate::session;

/// How many rows a page holds when the caller does not say.
pub const DEFAULT_LIMIT: u32 = 50;
/// The most rows a page may hold.
pub const MAX_LIMIT: u32 = 500;
/// The most waiting rows read when filtering by agent.
pub const MAX_SCAN: u32 = 5_000;

/// What a listed call waits for (docs/rules.md DECIDE-16).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    /// An approval (`awaiting_approval`).
    Approval,
    /// An answer to its question (`awaiting_answer`).
    Question,
    /// A decision on a proposal, which did not run (`proposed`).
    Proposal,
    /// A person to say whether it ran (`in_doubt`).
    InDoubt,
    /// Its principal's credential for the connection it goes through (`awaiting_credential`).
    Credential,
}

impl Waiting {
    /// The row state this kind is.
    #[must_use]
    pub fn state(self) -> InvocationState {
        match self {
            Self::Approval => InvocationState::AwaitingApproval,
            Self::Question => InvocationState::AwaitingAnswer,
            Self::Proposal => InvocationState::Proposed,
            Self::InDoubt => InvocationState::InDoubt,
            Self::Credential => InvocationState::AwaitingCredential,
        }
    }
}

impl std::str::FromStr for Waiting {
    type Err = String;

    fn from_str(word: &str) -> Result<Self, Self::Err> {
        match word {
            "approval" => Ok(Self::Approval),
            "question" => Ok(Self::Question),
            "proposal" => Ok(Self::Proposal),
            "in_doubt" => Ok(Self::InDoubt),
            "credential" => Ok(Self::Credential),
            other => Err(format!(
                "unknown kind `{other}`: one of approval, question, proposal, in_doubt, credential"
            )),
        }
    }
}

/// Filters and paging of the list.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// Only calls waiting for this.
    pub kind: Option<Waiting>,
    /// Only this tool.
    pub tool: Option<String>,
    /// Only calls by this principal.
    pub principal: Option<String>,
    /// Only calls made in this agent's scope.
    pub agent: Option<String>,
    /// Only rows at least this old.
    pub older_than: Option<Duration>,
    /// Page size (default [`DEFAULT_LIMIT`], at most [`MAX_LIMIT`]).
    pub limit: Option<u32>,
    /// Rows to skip (default 0).
    pub offset: Option<u32>,
    /// Newest first instead of oldest first.
    pub newest_first: bool,
}

/// One page of the list.
#[derive(Debug, Clone)]
pub struct Page {
    /// The rows, oldest first (newest first when asked).
    pub rows: Vec<Invocation>,
    /// The offset of the next page, if there are more rows.
    pub next_offset: Option<u32>,
}

/// Reads one page of what waits for a person.
///
/// # Errors
/// The ledger's: the database is unreachable or a row is corrupt.
pub async fn list(store: &dyn Store, query: &Query) -> Result<Page, LedgerError> {
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let offset = query.offset.unwrap_or(0);
    // The database skips and limits, in its index (LEDGER-86); with the agent filter, which
    // reads each row's session here, it hands over the oldest rows and they are paged here.
    let (skipped_here, filter) = match query.agent {
        Some(_) => (offset, filter(query, 0, MAX_SCAN)),
        None => (0, filter(query, offset, limit.saturating_add(1))),
    };
    let mut rows = store.pending_approvals(filter).await?;
    if let Some(agent) = &query.agent {
        rows = in_agent_scope(store, rows, agent).await?;
    }
    let more = rows.len() > skipped_here as usize + limit as usize;
    let rows: Vec<Invocation> = rows
        .into_iter()
        .skip(skipped_here as usize)
        .take(limit as usize)
        .collect();
    Ok(Page {
        rows,
        next_offset: more.then(|| offset + limit),
    })
}

/// The ledger's filter for `query`: waiting calls and calls in doubt (unless one kind is
/// asked), `offset` of them skipped, at most `wanted`.
fn filter(query: &Query, offset: u32, wanted: u32) -> ApprovalFilter {
    ApprovalFilter {
        tool: query.tool.clone(),
        principal: query.principal.clone(),
        recorded_before: query.older_than.map(|age| OffsetDateTime::now_utc() - age),
        limit: Some(wanted),
        newest_first: query.newest_first,
        state: query.kind.map(Waiting::state),
        with_in_doubt: query.kind.is_none_or(|k| k == Waiting::InDoubt),
        offset: Some(offset),
    }
}

/// Where a waiting call came from: its session's channel and the scope it was opened in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// `mcp`, `api`, `cli`, …
    pub channel: String,
    /// The gateway's or an agent's scope; `None` when the session names none.
    pub scope: Option<ScopeId>,
}

/// The origin of each of `rows`, keyed by session (each session read once).
///
/// # Errors
/// The ledger's: the database is unreachable or a session is missing or corrupt.
pub async fn origins(
    store: &dyn Store,
    rows: &[Invocation],
) -> Result<HashMap<SessionId, Origin>, LedgerError> {
    let mut origins = HashMap::new();
    for row in rows {
        if let Entry::Vacant(slot) = origins.entry(row.session_id) {
            let opened = store.get_session(row.session_id).await?;
            slot.insert(Origin {
                scope: session::scope(&opened),
                channel: opened.channel,
            });
        }
    }
    Ok(origins)
}

/// The rows whose session was opened in `agent`'s scope.
async fn in_agent_scope(
    store: &dyn Store,
    rows: Vec<Invocation>,
    agent: &str,
) -> Result<Vec<Invocation>, LedgerError> {
    let wanted = Some(ScopeId::Agent(agent.to_owned()));
    let origins = origins(store, &rows).await?;
    Ok(rows
        .into_iter()
        .filter(|row| origins.get(&row.session_id).map(|o| &o.scope) == Some(&wanted))
        .collect())
}
