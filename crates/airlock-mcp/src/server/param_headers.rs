//! Custom `Mcp-Param-*` headers (protocol revision 2026-07-28): a tool argument declared with
//! `x-mcp-header: Name` in its input schema travels twice, in the body and in the header
//! `Mcp-Param-Name`, so proxies can route on it; the two must agree.
//!
//! Guarantees: for a 2026-07-28 `tools/call`, every argument with an `x-mcp-header` in the
//! tool's schema either is absent together with its header, or is present with a header whose
//! value — literal, or `=?base64?…?=` decoded with strict padding and alphabet as UTF-8 —
//! equals the argument (a string as is, a number or boolean as its JSON text). Anything else is
//! HTTP 400 with JSON-RPC error -32020 before the call is recorded or run. Other requests pass.
//! The check reads the request as admission parsed it.

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::request::{Admitted, AdmittedRequest};
use crate::host::ToolHost;

/// The revision that defines these headers.
const REVISION: &str = "2026-07-28";

/// JSON-RPC "header mismatch".
const HEADER_MISMATCH: i64 = -32020;

/// The step: refuses a 2026-07-28 `tools/call` whose `Mcp-Param-*` headers disagree with
/// its arguments.
pub(super) fn check(host: &dyn ToolHost, request: &AdmittedRequest) -> Result<(), Box<Response>> {
    if request.protocol_version() != Some(REVISION.as_bytes()) || request.method() != "tools/call" {
        return Ok(());
    }
    let params = request.params();
    let Some(name) = params["name"].as_str() else {
        return Ok(());
    };
    let Err(reason) = check_tool(host, request.admitted(), name, params, request.headers()) else {
        return Ok(());
    };
    let error = json!({"code": HEADER_MISMATCH, "message": reason});
    let body = json!({"jsonrpc": "2.0", "id": request.id(), "error": error});
    Err(Box::new(
        (StatusCode::BAD_REQUEST, axum::Json(body)).into_response(),
    ))
}

/// Checks every `x-mcp-header` argument of the tool `name` against its header.
fn check_tool(
    host: &dyn ToolHost,
    admitted: &Admitted,
    name: &str,
    params: &Value,
    headers: &HeaderMap,
) -> Result<(), String> {
    // An unknown tool or scope is reported by the call itself, with its own error.
    let Some(schema) = host.input_schema(&admitted.scope, &admitted.caller, name) else {
        return Ok(());
    };
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Ok(());
    };
    let arguments = &params["arguments"];
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
