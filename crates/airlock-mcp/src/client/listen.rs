//! An upstream's resource updates, heard through its 2026-07-28 `subscriptions/listen` stream
//! (docs/rules.md MCP-92, MCP-93).
//!
//! Guarantees: one stream is one request through the egress guard, under the guard's deadline
//! and body cap like any request (EGRESS-31 to EGRESS-34): the stream ends at the deadline at
//! the latest, and [`McpClient::listen_resources`] then says so ([`Listened::Deadline`]) so its
//! caller can listen again; an upstream that ends the stream itself ended the subscription. Only `notifications/resources/updated` naming one of the URIs asked for is handed on,
//! as that URI (a string the upstream chose is never passed on); every other message on the
//! stream is ignored. An upstream that does not speak 2026-07-28 is not asked (session-era
//! subscriptions need a session airlock's client never keeps open).

use std::collections::HashMap;

use futures::StreamExt;
use http::{HeaderName, HeaderValue};
use rmcp::model::ProtocolVersion;
use serde_json::{Value, json};

use crate::client::McpClient;
use crate::client::direct::modern_meta;
use crate::client::session::{self, Prepared};
use crate::client::target::McpTarget;
use crate::client::transport::{Reply, Sent, not_json_rpc};
use crate::error::{CallErrorKind, McpCallError};

/// How a stream of updates ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listened {
    /// The guard's deadline passed: the subscription stands, listen again.
    Deadline,
    /// The upstream ended it (its final result, or the end of its stream).
    Closed,
}

impl McpClient {
    /// Listens to `target`'s updates of the resources `uris` (upstream URIs) until its stream
    /// ends or the guard's deadline passes, calling `updated` with each updated URI.
    ///
    /// # Errors
    /// As [`McpClient::call_tool`]; an upstream that does not speak 2026-07-28, or answers the
    /// request with a result or an error instead of a stream, is a protocol error.
    pub async fn listen_resources(
        &self,
        target: &McpTarget,
        uris: &[String],
        updated: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<Listened, McpCallError> {
        if !self.speaks_modern(target) {
            return Err(McpCallError::new(
                CallErrorKind::Protocol,
                "the MCP server does not speak 2026-07-28, whose subscriptions/listen airlock relays",
            ));
        }
        let Prepared { http, deadline, .. } = session::prepare(&self.guard, target).await?;
        let params = json!({
            "_meta": modern_meta(false, None),
            "notifications": { "resourceSubscriptions": uris },
        });
        let request =
            json!({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": params});
        let version = ProtocolVersion::V_2026_07_28.to_string();
        let mut headers = HashMap::new();
        if let Ok(value) = HeaderValue::from_str(&version) {
            headers.insert(HeaderName::from_static("mcp-protocol-version"), value);
        }
        headers.insert(
            HeaderName::from_static("mcp-method"),
            HeaderValue::from_static("subscriptions/listen"),
        );
        let sent = Sent {
            body: request.to_string().into_bytes(),
            awaits_reply: true,
            is_call: false,
        };
        let listened = async {
            let failed = || {
                http.failure().unwrap_or_else(|| {
                    McpCallError::new(CallErrorKind::ConnectionLost, "the MCP stream broke")
                })
            };
            let mut events = match http.exchange(sent, None, headers).await {
                Ok(Reply::Sse(events, _)) => events,
                Ok(Reply::Json(body, _)) => return Err(refused(&body)),
                Ok(Reply::Accepted) => return Err(not_json_rpc()),
                Err(_) => return Err(failed()),
            };
            while let Some(event) = events.next().await {
                let data = event.map_err(|_| failed())?.data.unwrap_or_default();
                let message: Value = serde_json::from_str(&data).unwrap_or_default();
                if message["method"] != "notifications/resources/updated" {
                    continue;
                }
                let uri = message["params"]["uri"].as_str();
                if let Some(uri) = uris.iter().find(|u| Some(u.as_str()) == uri) {
                    updated(uri);
                }
            }
            Ok(Listened::Closed)
        };
        // The guard's deadline ends the stream; the caller listens again.
        tokio::time::timeout_at(deadline, listened)
            .await
            .unwrap_or(Ok(Listened::Deadline))
    }
}

/// A JSON answer to `subscriptions/listen`: the upstream refused to open a stream.
fn refused(body: &[u8]) -> McpCallError {
    let answer: Value = serde_json::from_slice(body).unwrap_or_default();
    let message = answer["error"]["message"].as_str().unwrap_or("no stream");
    McpCallError::new(
        CallErrorKind::Protocol,
        format!("the MCP server did not open a subscriptions/listen stream: {message}"),
    )
}
