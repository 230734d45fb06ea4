//! Custom `Mcp-Param-*` headers (SEP-2243, 2026-07-28): a tool argument declared with
//! `x-mcp-header: Name` in its input schema travels twice, in the body and in the header
//! `Mcp-Param-Name`, so proxies can route on it; the two must agree.
//!
//! Guarantees: for a 2026-07-28 `tools/call`, every argument with an `x-mcp-header` in the
//! tool's schema either is absent together with its header, or is present with a header whose
//! value — literal, or `=?base64?…?=` decoded with strict padding and alphabet as UTF-8 —
//! equals the argument (a string as is, a number or boolean as its JSON text). Anything else is
//! HTTP 400 with JSON-RPC error -32020 before the call is recorded or run. Other requests pass.

use std::sync::Arc;

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::admit::{Admitted, MAX_BODY_BYTES};
use crate::host::ToolHost;

/// The revision that defines these headers.
const REVISION: &str = "2026-07-28";

/// JSON-RPC "header mismatch".
const HEADER_MISMATCH: i64 = -32020;

/// The middleware: checks the `Mcp-Param-*` headers of a 2026-07-28 `tools/call`.
pub(super) async fn layer(
    State(host): State<Arc<dyn ToolHost>>,
    request: Request,
    next: Next,
) -> Response {
    let is_revision = request
        .headers()
        .get("mcp-protocol-version")
        .is_some_and(|v| v.as_bytes() == REVISION.as_bytes());
    let Some(admitted) = request.extensions().get::<Admitted>().cloned() else {
        return next.run(request).await;
    };
    if !is_revision {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = to_bytes(body, MAX_BODY_BYTES).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "Payload Too Large").into_response();
    };
    let message: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if message["method"] == "tools/call"
        && let Some(name) = message["params"]["name"].as_str()
        && let Err(reason) = check(host.as_ref(), &admitted, name, &message, &parts.headers)
    {
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        let error = json!({"code": HEADER_MISMATCH, "message": reason});
        let body = json!({"jsonrpc": "2.0", "id": id, "error": error});
        return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// Checks every `x-mcp-header` argument of the tool `name` against its header.
fn check(
    host: &dyn ToolHost,
    admitted: &Admitted,
    name: &str,
    message: &Value,
    headers: &HeaderMap,
) -> Result<(), String> {
    // An unknown tool or scope is reported by the call itself, with its own error.
    let Some(schema) = host.input_schema(&admitted.scope, name) else {
        return Ok(());
    };
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Ok(());
    };
    let arguments = &message["params"]["arguments"];
    for (parameter, schema) in properties {
        let Some(header) = schema.get("x-mcp-header").and_then(Value::as_str) else {
            continue;
        };
        let field = format!("mcp-param-{header}");
        let sent = headers.get(field.as_str()).map(|v| v.to_str());
        match (arguments.get(parameter), sent) {
            (None | Some(Value::Null), None) => {}
            (Some(value), Some(Ok(sent))) => {
                let expected = match value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                if decode(sent.trim())? != expected {
                    return Err(format!(
                        "header Mcp-Param-{header} does not match argument {parameter}"
                    ));
                }
            }
            (_, Some(Err(_))) => {
                return Err(format!("header Mcp-Param-{header} is not visible ASCII"));
            }
            (Some(_), None) => {
                return Err(format!(
                    "header Mcp-Param-{header} is required: argument {parameter} is present"
                ));
            }
            (None, Some(_)) => {
                return Err(format!(
                    "header Mcp-Param-{header} is sent but argument {parameter} is absent"
                ));
            }
        }
    }
    Ok(())
}

/// A header value: `=?base64?…?=` decoded (strict), anything else literal.
fn decode(value: &str) -> Result<String, String> {
    let Some(encoded) = value
        .strip_prefix("=?base64?")
        .and_then(|rest| rest.strip_suffix("?="))
    else {
        return Ok(value.to_owned());
    };
    let bytes = STANDARD
        .decode(encoded)
        .map_err(|e| format!("invalid Base64 in an Mcp-Param header: {e}"))?;
    String::from_utf8(bytes).map_err(|_| "an Mcp-Param header's Base64 is not UTF-8".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_is_strict_and_anything_else_is_literal() {
        assert_eq!(decode("=?base64?SGVsbG8=?=").unwrap(), "Hello");
        assert!(decode("=?base64?SGVsbG8?=").is_err(), "missing padding");
        assert!(decode("=?base64?SGVs!!!bG8=?=").is_err(), "bad alphabet");
        assert_eq!(decode("SGVsbG8=").unwrap(), "SGVsbG8=");
        assert_eq!(decode("=?base64?SGVsbG8=").unwrap(), "=?base64?SGVsbG8=");
    }
}
