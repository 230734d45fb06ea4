//! Test fixtures shared by airlock's crates. Used only as a dev-dependency (CI checks that no
//! crate's normal dependency tree contains it), so nothing here ships in a binary.
//!
//! [`Server`] is a real MCP server on 127.0.0.1 whose behaviour each test scripts with a
//! [`Script`] and whose received requests it reads back with [`Server::seen`]. [`RawServer`]
//! is a bare HTTP/1.1 upstream that hangs up, holds or fails a request on cue (a [`Cue`]).
//! [`FakeModel`] is a model provider (OpenAI-compatible or Anthropic) streaming scripted
//! [`ModelReply`]s and counting the requests it gets. [`Receiver`] records webhook deliveries
//! and answers queued statuses (a redirect with its `Location` too); [`FakeSlack`] is Slack's
//! Web API (`chat.postMessage`, `chat.update`) checking the bot token. [`Collector`] is an OTLP/HTTP trace collector
//! decoding the protobuf spans an exporter sends. [`Issuer`] is an OAuth token issuer and
//! authorization server: signing keys, a JWKS endpoint, RFC 8414 metadata, PKCE authorization,
//! refresh, token exchange (RFC 8693, RFC 7523 on-behalf-of) with a record of the
//! [`TokenRequest`]s it got, and forged tokens for the negative cases. Fixtures panic on setup
//! failure (a port that cannot be bound): that is a broken test machine, and a loud panic is
//! the clearest report a test can give. [`skip`] skips a test whose [`Needs`] are missing (and fails it under `CI`);
//! [`skipped_this_run`] is what the summary at the end of `cargo test --workspace` reads.

mod authorize;
mod issuer;
mod keys;
mod listen;
mod model;
mod needs;
mod otlp;
mod raw;
mod receiver;
mod run_record;
mod skip;
mod slack;
mod token;
mod upstream;

pub use issuer::Issuer;
pub use keys::KeyKind;
pub use listen::free_port;
pub use model::{
    FAKE_INPUT_TOKENS, FAKE_OUTPUT_TOKENS, FAKE_RESPONSE_MODEL, FakeCall, FakeModel, Flavor,
    ModelReply, Received,
};
pub use needs::Needs;
pub use otlp::{Collector, ExportedSpan, kind as span_kind};
pub use raw::{Cue, RawServer};
pub use receiver::{Delivery, Receiver};
pub use run_record::{Skipped, skipped_this_run};
pub use skip::{postgres_url, skip};
pub use slack::{FakeSlack, SlackCall};
pub use token::TokenRequest;
pub use upstream::{Script, Seen, Server};
