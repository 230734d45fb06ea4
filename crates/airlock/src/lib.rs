//! The `airlock` binary's library: the command line and (later) the HTTP server.

pub mod cli;
