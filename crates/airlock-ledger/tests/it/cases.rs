//! The behaviours of `shared/ledger-cases.md`, one function per case (plus races and
//! questions), each run against both backends by `both_backends!` in `main.rs`.

mod approval;
mod audit;
mod decisions;
mod execution;
mod fused;
mod worker;

pub(crate) use approval::*;
pub(crate) use audit::*;
pub(crate) use decisions::*;
pub(crate) use execution::*;
pub(crate) use fused::*;
pub(crate) use worker::*;
