//! Under the state machine: the audit chain, queued writes, recent rows, what limits hold,
//! notices for people, and the wake-ups of waiters (in this process and, through `wake` or
//! `NOTIFY`, in others).

pub(crate) mod budget_memo;
pub(crate) mod cache;
pub(crate) mod chain;
pub(crate) mod deferred;
pub(crate) mod notice;
#[cfg(unix)]
pub(crate) mod wake;
pub(crate) mod wakeups;
