#![allow(clippy::unwrap_used, missing_docs)]
//! The runtime's integration tests: one binary, one module per concern.

mod agent;
mod api_execute;
mod api_request;
mod api_response;
mod fetch;
mod gateway;
mod integration;
mod notify;
mod oauth;
mod same_cause;
