//! The durable ledger: one row per tool call, its state machine, and the SQLite/PostgreSQL
//! backends behind the [`Store`] trait.
//!
//! Guarantees (DESIGN §5):
//! - every call is a durable row before anything runs, deduplicated on (session, call id);
//! - every state change is a compare-and-swap, so a race has exactly one winner, and an
//!   illegal transition is an error naming both states;
//! - an at-most-once call is `running` on disk before it is dispatched; a lost lease makes it
//!   `in_doubt` for a person, never a silent re-run; idempotent calls re-run with the same key;
//! - approvals, answers and in-doubt resolutions are single decisions by named people, bound
//!   to the exact row, and expire;
//! - every write is appended to a hash chain that [`Store::verify`] checks.
//!
//! Throughput comes from group commit (see `writer`), not from weaker durability.

mod chain;
mod clock;
mod db;
mod decide;
mod deferred;
mod engine;
mod error;
mod ids;
mod model;
mod notify;
mod ops;
mod postgres;
mod recent;
mod record;
mod row;
mod runs;
mod sqlite;
mod state;
mod store;
mod tx;
mod writer;

pub use airlock_spec::{Approval, Effect, Mode, SourceKind};
pub use clock::{Clock, ManualClock, SystemClock};
pub use db::SqlValue;
pub use engine::StoreConfig;
pub use error::{LedgerError, ToolError, ToolErrorKind};
pub use ids::{InvocationId, RunId, SessionId};
pub use model::{
    ApprovalFilter, AuditReport, ChainBreak, Decision, DecisionRecord, Invocation, Lease,
    NewInvocation, NewRun, NewSession, Recorded, ResolutionRecord, ResumeOutcome, Run, Session,
    Settlement, SweepReport,
};
pub use postgres::PgStore;
pub use sqlite::SqliteStore;
pub use state::{CallKind, DecisionKind, InvocationState, Resolution, RunStatus};
pub use store::{LedgerFuture, Store};
pub use tx::{LedgerTx, TxTool, tx_tool};
