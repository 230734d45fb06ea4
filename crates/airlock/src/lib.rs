//! The `airlock` binary's library: the command line and the HTTP server.

pub mod boot;
pub mod cli;
mod durable;
pub mod http;
pub mod memory;
pub mod open_files;
pub mod preflight;
pub mod result;
pub mod state_key;
pub mod telemetry;
