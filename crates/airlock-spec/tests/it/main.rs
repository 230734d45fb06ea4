//! Integration tests of declaration loading: examples, every rule, all-errors-at-once,
//! digests and names.

#![allow(clippy::unwrap_used, missing_docs)]

mod apis;
mod caller_approval;
mod catalog;
mod digest;
mod examples;
mod model_script;
mod notify;
mod oauth;
mod per_principal;
mod rules;
mod schemas;
mod support;
mod telemetry;
mod tool_auth;
