//! The `fetch` builtin: GET a public URL through the egress guard; text only, capped by the
//! guard's body limit. A page that answers 4xx or 5xx is a failed call, not a result, so the
//! model never mistakes an error page for content.

use airlock_egress::{GuardedClient, Request, Response};
use serde_json::{Value, json};

use crate::ToolError;
use crate::error::egress_error;

/// A GET of a public page changes nothing upstream, so a fetch that went unanswered is simply
/// failed, never parked in doubt (LEDGER-19 is about calls that may have taken effect).
fn answered_or_not(error: ToolError) -> ToolError {
    ToolError {
        unanswered: false,
        ..error
    }
}

/// Fetches `arguments.url`: `{status, content_type, body}`.
pub(super) async fn fetch(egress: &GuardedClient, arguments: &Value) -> Result<Value, ToolError> {
    let url = arguments
        .get("url")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let response = egress
        .call()
        .send(Request::get(url))
        .await
        .and_then(Response::error_for_status)
        .map_err(|e| answered_or_not(egress_error(&e)))?;
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    Ok(
        json!({"status": response.status().as_u16(), "content_type": content_type, "body": response.text()}),
    )
}
