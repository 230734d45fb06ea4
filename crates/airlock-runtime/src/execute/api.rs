//! The declarative HTTP executor for tenant APIs (`type: api` tools of an agent manifest).
//!
//! A call runs as three pure steps, each a function here:
//! 1. The arguments, checked against the tool's input schema when the call was recorded
//!    ([`crate::arguments`]), have their parameter defaults filled.
//! 2. [`build_request`]: the connection's credential is resolved (missing → no request), the
//!    declared path, query and body are interpolated, and the base URL is joined structurally
//!    with an origin check. The result, an [`ApiRequest`], never shows its credential in `Debug`.
//! 3. [`handle_response`]: status, content type and body become the tool result or a
//!    [`ToolError`](crate::ToolError) whose kind says what the caller can do about it.
//!
//! [`execute`] runs the three steps around the egress guard, the only way out;
//! [`execute_with_key`] also sends the call's `Idempotency-Key` (LEDGER-17).

mod execute;
mod path;
mod request;
mod response;
pub(crate) mod template;

pub(crate) use execute::send;
pub use execute::{execute, execute_with_key};
pub use request::{ApiHeaderValue, ApiRequest, build_request};
pub use response::{MAX_RESPONSE_BYTES, UpstreamResponse, handle_response, select};
