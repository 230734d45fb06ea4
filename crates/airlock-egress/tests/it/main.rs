//! The egress guard's integration tests: one binary, one module per concern.

// Test helpers outside #[test] functions panic on setup failure on purpose.
#![allow(clippy::unwrap_used)]

mod delivery;
mod guard;
mod proxy;
mod streaming;
mod support;
mod vectors;
