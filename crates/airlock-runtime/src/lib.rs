//! airlock runtime: how tools run.
//!
//! For now this crate holds the pure core of the declarative HTTP executor for tenant APIs
//! (seed 001 `type: api`): argument checking, request building and response handling, with no
//! network. Sending goes through the egress guard, which the executor will call once it is wired
//! in; the request type here carries everything the guard needs to judge it
//! ([`api::ApiRequest::carries_credential`]). Later this crate also holds the registry and the
//! gateway.

pub mod api;
mod error;

pub use error::{ToolError, ToolErrorKind};
