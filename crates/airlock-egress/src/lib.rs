//! The egress guard: the one HTTP client every outbound airlock request goes through.
//!
//! It reaches public hosts only. A URL is checked before parsing and after; its host name passes
//! the name rules; the name is resolved once per call and every address must be public by
//! airlock's own table (or explicitly allowed by the operator); connections go only to those
//! checked addresses, with `Host` and TLS SNI carrying the original name. No proxies, no
//! redirects, identity encoding only, text bodies only, a body cap counted while streaming, and
//! one deadline per call. A response can also be read as it streams
//! ([`Call::send_streaming`]) under the same rules. The precise rules are EGRESS-1 to EGRESS-34
//! in docs/rules.md.
//!
//! `examples/get.rs` is a whole call in a few lines: one [`GuardedClient::call`], one
//! [`Request::get`], the reply's text.

mod address;
mod body;
mod check;
mod client;
mod error;
mod name;
mod observe;
mod pin;
mod policy;
mod request;
mod resolve;
mod streaming;
pub mod trace;
mod transport;
mod url_check;

pub use address::{Classification, SpecialRange, classify};
pub use check::{CheckReport, check_join, check_offline, check_url};
pub use client::{Call, GuardedClient, GuardedClientBuilder, PreparedCall};
pub use error::{BoxError, Delivery, EgressError};
pub use name::{HostName, check_host};
pub use policy::{DEFAULT_DEADLINE, DEFAULT_DNS_TIMEOUT, DEFAULT_MAX_BODY_BYTES, EgressPolicy};
pub use request::{Request, Response};
pub use resolve::{Lookup, OverrideError, Resolve, ResolveError, StaticResolver, SystemResolver};
pub use streaming::{BodyStream, StreamingResponse};
pub use url_check::{join, precheck};
