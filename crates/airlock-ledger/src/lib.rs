//! The durable ledger: one row per tool call, its state machine, and the SQLite/PostgreSQL
//! backends behind the [`Store`] trait, the union of the store's [`roles`].
//!
//! Guarantees:
//! - every call is a durable row before anything runs, deduplicated on (session, call id);
//! - every state change is a compare-and-swap, so a race has exactly one winner, and an
//!   illegal transition is an error naming both states;
//! - an at-most-once call is `running` on disk before it is dispatched; a lost lease makes it
//!   `in_doubt` for a person, never a silent re-run; idempotent calls re-run with the same key;
//! - approvals, answers and in-doubt resolutions are single decisions by named people, bound
//!   to the exact row, and expire;
//! - every write is appended to a hash chain that [`Reads::verify`](roles::Reads::verify)
//!   checks;
//! - a transition a person is told about writes its notifications (the
//!   [`Outbox`](roles::Outbox)) in its own transaction, when notifications are configured.
//!
//! Throughput comes from group commit (see `writer`), not from weaker durability. The crate
//! README maps the modules.

// Groups in layers, lowest first: a module uses its own group and the groups above it, never
// one below, and no two modules use each other (`.ci/check-module-cycles.sh`).

// Vocabulary.
mod vocabulary;
// SQL mapping.
mod sql;
// Under the state machine: the audit chain, queued writes, caches and wake-ups.
mod support;
// The state machine: every transition works on one `Batch`.
mod transitions;
// Group commit: runs the transitions as jobs in shared transactions; no transition sees it.
mod commit;

// The store: one `Ledger` type playing every role of `Store`, opened on either backend.
mod audit_trail;
mod ledger;
mod outbox;
mod postgres;
mod reads;
mod sqlite;
mod store;
mod store_config;
mod with_invocations;

/// The store's roles, each a trait of at most 15 methods (`.ci/check-roles.sh`): import the ones
/// you call on a concrete store, or implement one in a test double and lend it to
/// [`WithInvocations`]. On `dyn Store` every role's methods are callable without an import.
pub mod roles {
    pub use crate::store::{
        AgentRuns, Budgets, Confirmations, Delegations, Freezes, Invocations, Outbox, Pins, Rates,
        Reads, Sessions, Vault,
    };
}

pub use airlock_spec::{Approval, Effect, Mode, NotifyEvent, SourceKind};
pub use audit_trail::{AuditTrail, ChainEvent, FreezeEvent, PinEvent};
pub use ledger::Ledger;
pub use postgres::PgStore;
pub use sql::db::SqlValue;
pub use sql::tx::{LedgerTx, TxTool, tx_tool};
pub use sqlite::{SqliteStore, backup as backup_sqlite};
pub use store::{LedgerFuture, Store};
pub use store_config::StoreConfig;
pub use support::notice::{Notice, NoticeRecord, OutboxRoute};
pub use transitions::agent_runs::{RunDetail, RunStep};
pub use transitions::confirmations::{Answered, Confirmation};
pub use transitions::decide::{MAX_BATCH_DECISION, Slots, Voted};
pub use transitions::delegations::Delegation;
pub use transitions::freezes::{Freeze, FreezeTarget};
pub use transitions::grants::{Grant, GrantReach};
pub use transitions::lease::{RELAYED_CALL_ID, RELAYED_METHODS};
pub use transitions::pins::ToolPin;
pub use transitions::rate::{RateBudget, RateRefusal};
pub use transitions::request_states::StateUse;
pub use transitions::upstream_task::RELAY_OWNER;
pub use transitions::vault::SealedCredential;
pub use vocabulary::budget::{BudgetShare, BudgetUse, LimitUsage, OverLimit};
pub use vocabulary::clock::{Clock, ManualClock, SystemClock};
pub use vocabulary::credential::CredentialUse;
pub use vocabulary::error::{LedgerError, ToolError, ToolErrorKind};
pub use vocabulary::ids::{InvocationId, RunId, SessionId};
pub use vocabulary::model::{
    ACCESS_POLICY, APPROVAL_EXPIRED, ApprovalFilter, AuditReport, CallerOutcome, ChainBreak,
    Decision, DecisionRecord, FREEZE, INPUT_REQUIRED_KEY, Invocation, Lease, NewInvocation, NewRun,
    NewSession, Recorded, Refusal, Refuser, ResolutionRecord, ResumeOutcome, RoundUse, Run,
    RunLease, Session, Settlement, SweepReport,
};
pub use vocabulary::state::{CallKind, DecisionKind, InvocationState, Resolution, RunStatus};
pub use with_invocations::WithInvocations;
