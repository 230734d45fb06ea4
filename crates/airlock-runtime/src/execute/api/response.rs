//! Turning an upstream HTTP response into the tool result or a tool error.
//!
//! Guarantees:
//! - a body over [`MAX_RESPONSE_BYTES`] is an error, never truncated (truncated JSON is no longer
//!   JSON); a non-text body (a non-text content type, or none and not UTF-8) is an error;
//! - a declared JSON body is parsed (invalid JSON is an error); a body without content type is
//!   parsed when it is JSON and kept as text otherwise; any other text stays text;
//! - redirects are not followed: 3xx is an error naming the status; status ≥ 400 is
//!   `HTTP <code>: <first 500 characters>`, with a kind per status class;
//! - `response.select` walks a dotted path (object keys, and numeric segments indexing arrays);
//!   a segment that is not there is an error naming it, never a silent `null`.

use std::time::Duration;

use serde_json::Value;

use crate::{ToolError, ToolErrorKind};

/// Largest response body accepted, in bytes (5 MiB).
pub const MAX_RESPONSE_BYTES: usize = 5 * 1024 * 1024;

/// Characters of an error body quoted in the tool error.
const ERROR_BODY_CHARS: usize = 500;

/// What the executor read from the upstream.
#[derive(Debug, Clone, Copy)]
pub struct UpstreamResponse<'a> {
    /// The HTTP status code.
    pub status: u16,
    /// The `Content-Type` header, if any.
    pub content_type: Option<&'a str>,
    /// The `Retry-After` header, if any.
    pub retry_after: Option<&'a str>,
    /// The decoded body.
    pub body: &'a [u8],
}

/// How the body is to be read, from its content type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyType {
    Json,
    Text,
    /// No content type: JSON if it parses, text otherwise.
    Unknown,
    Binary,
}

fn body_type(content_type: Option<&str>) -> BodyType {
    let Some(ct) = content_type else {
        return BodyType::Unknown;
    };
    let mime = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if mime.is_empty() {
        return BodyType::Unknown;
    }
    if mime == "application/json" || mime.ends_with("+json") {
        BodyType::Json
    } else if mime.starts_with("text/")
        || mime.ends_with("+xml")
        || matches!(
            mime.as_str(),
            "application/xml" | "application/javascript" | "application/x-www-form-urlencoded"
        )
    {
        BodyType::Text
    } else {
        BodyType::Binary
    }
}

/// The body as text, or why it is not text.
fn text(kind: BodyType, body: &[u8]) -> Result<String, String> {
    match kind {
        BodyType::Binary => Err("the response is not text".into()),
        BodyType::Unknown => std::str::from_utf8(body)
            .map(str::to_owned)
            .map_err(|_| "the response has no content type and is not UTF-8 text".into()),
        // Declared text in another charset is read leniently rather than refused.
        BodyType::Json | BodyType::Text => Ok(String::from_utf8_lossy(body).into_owned()),
    }
}

/// The tool result of an upstream response, with `select` applied.
///
/// # Errors
/// `bad_response` for an oversized or non-text body, invalid JSON, a redirect or a missing
/// `select` path; per status ≥ 400: `credential_invalid` (401, 403), `rate_limited` (429, with
/// `Retry-After` in seconds), `upstream_error` (408, ≥ 500), `bad_request` (other 4xx).
pub fn handle_response(
    response: &UpstreamResponse<'_>,
    select_path: Option<&str>,
) -> Result<Value, ToolError> {
    let body = response.body;
    if body.len() > MAX_RESPONSE_BYTES {
        return Err(ToolError::bad_response(format!(
            "the response is {} bytes; the limit is {MAX_RESPONSE_BYTES} (5 MiB)",
            body.len()
        )));
    }
    let kind = body_type(response.content_type);
    let status = response.status;
    if (300..400).contains(&status) {
        return Err(ToolError::bad_response(format!(
            "HTTP {status}: the API answered with a redirect, which airlock does not follow"
        )));
    }
    if !(200..300).contains(&status) {
        return Err(status_error(status, response.retry_after, text(kind, body)));
    }
    let text = text(kind, body).map_err(ToolError::bad_response)?;
    let value = match kind {
        BodyType::Json if text.trim().is_empty() => Value::Null,
        BodyType::Json => serde_json::from_str(&text).map_err(|e| {
            ToolError::bad_response(format!("the response says JSON but is not valid JSON: {e}"))
        })?,
        BodyType::Unknown => serde_json::from_str(&text).unwrap_or(Value::String(text)),
        BodyType::Text | BodyType::Binary => Value::String(text),
    };
    match select_path.filter(|p| !p.is_empty()) {
        None => Ok(value),
        Some(path) if value.is_string() && kind != BodyType::Json => Err(ToolError::bad_response(
            format!("`response.select` is `{path}`, but the response is text, not JSON"),
        )),
        Some(path) => select(&value, path).cloned(),
    }
}

/// The tool error of a status that is neither 2xx nor 3xx.
fn status_error(status: u16, retry_after: Option<&str>, body: Result<String, String>) -> ToolError {
    let quoted: String = match body {
        Ok(text) => text.chars().take(ERROR_BODY_CHARS).collect(),
        Err(_) => "(a body that is not text)".into(),
    };
    let message = format!("HTTP {status}: {quoted}");
    // The same classes as every other tool type's HTTP statuses; only this executor sees a
    // `Retry-After` to pass on.
    match ToolErrorKind::from_http_status(status) {
        ToolErrorKind::RateLimited => {
            ToolError::rate_limited(message, retry_after.and_then(parse_retry_after))
        }
        kind => ToolError::new(kind, message),
    }
}

/// `Retry-After` in delta-seconds. An HTTP-date is not read: it needs the clock, and the rate
/// limiter's own retry-after covers the common case.
fn parse_retry_after(value: &str) -> Option<Duration> {
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// Walks a dotted `path` through `value`: object keys, and numeric segments indexing arrays.
///
/// # Errors
/// `bad_response` naming the first segment that is not there.
pub fn select<'v>(value: &'v Value, path: &str) -> Result<&'v Value, ToolError> {
    let mut current = value;
    for (i, segment) in path.split('.').enumerate() {
        let next = match current {
            Value::Object(map) => map.get(segment),
            Value::Array(items) => segment.parse::<usize>().ok().and_then(|n| items.get(n)),
            _ => None,
        };
        let Some(next) = next else {
            let walked: Vec<&str> = path.split('.').take(i).collect();
            let at = if walked.is_empty() {
                "the response".to_owned()
            } else {
                format!("`{}`", walked.join("."))
            };
            let what = match current {
                Value::Array(items) => format!("an array of {} items", items.len()),
                Value::Object(_) => "an object".to_owned(),
                other => format!("a {}", json_type(other)),
            };
            return Err(ToolError::bad_response(format!(
                "`response.select` is `{path}`, but segment `{segment}` is missing: {at} is {what}"
            )));
        };
        current = next;
    }
    Ok(current)
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
