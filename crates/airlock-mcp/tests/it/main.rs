#![allow(clippy::unwrap_used, missing_docs)]
//! airlock-mcp against a real MCP upstream on loopback, reached only through the egress guard.

mod calls;
mod handshake_free;
mod sdk_upstream;
mod server;
