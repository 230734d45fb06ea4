//! airlock-model's integration tests: the providers against fake servers on 127.0.0.1 (real
//! HTTP through the egress guard), and the scripted model.

#![allow(clippy::unwrap_used, missing_docs)]

mod mapping;
mod providers;
mod scripted;
mod support;
