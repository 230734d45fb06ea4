//! MCP for airlock, both directions. The client: every remote tool call is a short, guarded
//! session. The endpoint ([`router`]): any MCP client calls the tools of a [`ToolHost`] (the
//! runtime implements it), with deny-by-default auth (configured bearer tokens, or OAuth access tokens checked by
//! [`ResourceServer`]), and a gated call parks instead of running.
//!
//! A call is initialize → notifications/initialized → tools/call → close, through the egress
//! guard's pinned client, under one deadline and one byte cap for the whole session, and it
//! never panics: every failure is an [`McpCallError`] with a stable [`CallErrorKind`]. Discovery
//! lists every page of `tools/list` for connection files at boot.
//!
//! rmcp (the official SDK) stays inside this crate: callers use [`McpClient`], [`McpTarget`],
//! [`ToolCall`], [`ToolResult`] and [`RemoteTool`], and the endpoint's port types in [`ToolHost`]'s
//! vocabulary, never an rmcp type.
//!
//! `examples/call_tool.rs` is one call in a few lines: an [`McpClient`] over the guard, an
//! [`McpTarget`], a [`ToolCall`], and its result or error kind.

mod asking;
mod client;
mod downstream;
mod error;
mod host;
mod oauth;
mod offer;
mod relay;
mod rounds;
mod server;

pub use client::McpClient;
pub use client::catalog::{Answered, Entry, RemoteCatalog};
pub use client::listen::Listened;
pub use client::target::{
    IDEMPOTENCY_META_KEY, McpCredential, McpTarget, RemoteTool, ToolCall, ToolResult,
};
pub use client::upstream_task::{
    CallAnswer, MAX_FAILURE_CHARS, MAX_TASK_ID_CHARS, UpstreamTask, UpstreamTaskState,
};
pub use downstream::Downstream;
pub use error::{CallErrorKind, McpCallError};
pub use host::{
    AskHost, ClientAnswer, ClientQuestion, Listed, OfferAnswer, OfferHost, OfferRequest, Offers,
};
pub use host::{
    CALL_KEY_META, CallKey, Caller, CallerDecision, CallerPrompt, CallerRefusal, CallerUse,
    HostCall, HostError, HostOutcome, MAX_CALL_KEY_CHARS, ParkedStatus, RoundCall, ToolDescriptor,
    ToolHost,
};
pub use oauth::{Clock, OAuthConfigError, OAuthSettings, ResourceServer, TokenError};
/// Fuzzing entry points (cargo feature `fuzzing`): not an API, no stability.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub use server::fuzzing;
pub use server::{
    AWAIT_TOOL, EndpointConfig, EndpointToken, MAX_AWAIT, RequestStateKey, RequestStates, router,
};
