//! The executor of api tools: build the request, send it through the egress guard, read the
//! response. The guard is the only way out, and no other client exists here: its refusals and
//! failures come back with the guard's reason and the kind every tool type gives the same cause
//! (`blocked`, `unreachable`, `timeout`, `bad_response`; see `crate::error`).

use airlock_egress::{GuardedClient, Request};
use airlock_spec::{ApiConnection, ApiOperation, Credentials};
use http::{HeaderName, HeaderValue, Method};
use serde_json::{Map, Value};

use super::{ApiRequest, UpstreamResponse, build_request, handle_response};
use crate::error::egress_error;
use crate::{ToolError, ToolErrorKind};

/// Runs one api operation with prepared arguments and returns its result; no idempotency key
/// is sent (see [`execute_with_key`]).
///
/// # Errors
/// A [`ToolError`] for every failure: credential, request building, egress, status, body.
pub async fn execute(
    client: &GuardedClient,
    operation: &ApiOperation,
    connection: &ApiConnection,
    credentials: &Credentials,
    arguments: &Map<String, Value>,
) -> Result<Value, ToolError> {
    execute_with_key(client, operation, connection, credentials, arguments, None).await
}

/// [`execute`], sending `idempotency_key` (when given) as the `Idempotency-Key` header.
///
/// # Errors
/// As [`execute`]; a key that cannot be written as a structured-field string is a
/// `bad_declaration` and nothing is sent.
pub async fn execute_with_key(
    client: &GuardedClient,
    operation: &ApiOperation,
    connection: &ApiConnection,
    credentials: &Credentials,
    arguments: &Map<String, Value>,
    idempotency_key: Option<&str>,
) -> Result<Value, ToolError> {
    let mut request = build_request(operation, connection, credentials, arguments)?;
    if let Some(key) = idempotency_key {
        request = request.with_idempotency_key(key)?;
    }
    send(client, &request, operation.select.as_deref()).await
}

/// Sends `request` through the guard and reads the response, `select`ed when given.
pub(crate) async fn send(
    client: &GuardedClient,
    request: &ApiRequest,
    select: Option<&str>,
) -> Result<Value, ToolError> {
    let response = client
        .call()
        .send(to_egress(request)?)
        .await
        .map_err(|e| egress_error(&e))?;
    let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok());
    let upstream = UpstreamResponse {
        status: response.status().as_u16(),
        content_type: header("content-type"),
        retry_after: header("retry-after"),
        body: response.body(),
    };
    handle_response(&upstream, select)
}

fn to_egress(request: &ApiRequest) -> Result<Request, ToolError> {
    let method = match request.method() {
        airlock_spec::Method::Get => Method::GET,
        airlock_spec::Method::Post => Method::POST,
        airlock_spec::Method::Put => Method::PUT,
        airlock_spec::Method::Patch => Method::PATCH,
        airlock_spec::Method::Delete => Method::DELETE,
    };
    let mut out = Request::new(method, request.url().as_str());
    for (name, value) in request.headers() {
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad_header(name))?;
        let mut header =
            HeaderValue::from_str(value.expose()).map_err(|_| bad_header(name.as_str()))?;
        // Keeps the value out of HTTP/2 header compression tables and debug output.
        header.set_sensitive(value.is_secret());
        out = out.header(name, header);
    }
    if let Some(body) = request.body() {
        out = out.body(body.to_vec());
    }
    if request.carries_credential() {
        out = out.with_credential();
    }
    Ok(out)
}

fn bad_header(name: &str) -> ToolError {
    ToolError::new(
        ToolErrorKind::BadDeclaration,
        format!("header `{name}` cannot be sent (invalid characters in its name or value)"),
    )
}
