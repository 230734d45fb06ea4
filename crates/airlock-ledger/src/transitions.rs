//! The state machine: every transition works on one `Batch`, inside the writer's transaction.

pub(crate) mod agent_runs;
pub(crate) mod batch;
pub(crate) mod budgets;
pub(crate) mod confirmations;
pub(crate) mod decide;
pub(crate) mod delegations;
pub(crate) mod escalations;
pub(crate) mod expiry;
pub(crate) mod freezes;
pub(crate) mod grants;
pub(crate) mod lease;
pub(crate) mod pins;
pub(crate) mod rate;
pub(crate) mod record;
pub(crate) mod request_states;
pub(crate) mod run_lease;
pub(crate) mod runs;
pub(crate) mod sweep;
pub(crate) mod upstream_task;
pub(crate) mod vault;
