#![allow(clippy::unwrap_used, missing_docs)]
//! airlock-mcp against a real MCP upstream on loopback, reached only through the egress guard.

mod calls;
mod sdk_upstream;
mod server;
