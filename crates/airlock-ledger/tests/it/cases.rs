//! The ledger's rules of docs/rules.md (LEDGER, POLICY-1 to POLICY-6, POLICY-15 and POLICY-16, DECIDE),
//! one function per rule and case, named after its rule id (plus races and questions), each run against both
//! backends by `both_backends!` in `main.rs`.

mod agent_runs;
mod ambiguity;
mod approval;
mod audit;
mod batch;
mod budgets;
mod decisions;
mod execution;
mod fused;
mod outbox;
mod pins;
mod rate;
mod request_states;
mod run_leases;
mod upgrade;
mod vault;
mod worker;

pub(crate) use agent_runs::*;
pub(crate) use ambiguity::*;
pub(crate) use approval::*;
pub(crate) use audit::*;
pub(crate) use batch::*;
pub(crate) use budgets::*;
pub(crate) use decisions::*;
pub(crate) use execution::*;
pub(crate) use fused::*;
pub(crate) use outbox::*;
pub(crate) use pins::*;
pub(crate) use rate::*;
pub(crate) use request_states::*;
pub(crate) use run_leases::*;
pub(crate) use upgrade::*;
pub(crate) use vault::*;
pub(crate) use worker::*;
