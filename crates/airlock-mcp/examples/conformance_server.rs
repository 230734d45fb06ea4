//! airlock's MCP endpoint in front of a scripted host, for the official conformance suite:
//! `cargo run -p airlock-mcp --example conformance_server -- 127.0.0.1:3101`, then point
//! `conformance server --url http://127.0.0.1:3101/mcp` at it.
//!
//! The suite cannot send credentials, so this harness (and only this harness) adds the bearer
//! token to every request before the endpoint's own deny-by-default auth sees it. Tools:
//! `test_simple_text`, `test_error_handling` (a failing call) and `deploy` (a parked call).

use std::sync::Arc;
use std::time::Duration;

use airlock_mcp::{
    Caller, EndpointConfig, HostError, HostOutcome, HostScope, ParkedStatus, ToolDescriptor,
    ToolHost,
};
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use futures::future::BoxFuture;
use secrecy::SecretString;
use serde_json::{Map, Value};

const TOKEN: &str = "conformance-token";

struct ScriptedHost;

fn descriptor(name: &str, description: &str, read_only: bool) -> ToolDescriptor {
    let mut schema = Map::new();
    schema.insert("type".into(), Value::String("object".into()));
    ToolDescriptor {
        name: name.into(),
        description: description.into(),
        input_schema: schema,
        read_only,
        destructive: !read_only,
        idempotent: read_only,
    }
}

/// A JSON Schema 2020-12 input schema with `$defs`, `$anchor`, composition and conditionals,
/// which the endpoint must pass through untouched.
fn schema_2020_12() -> ToolDescriptor {
    let schema = serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"address": {"$anchor": "addressDef", "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"}
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false
    });
    let mut tool = descriptor("json_schema_2020_12_tool", "Takes a 2020-12 schema.", true);
    if let Value::Object(map) = schema {
        tool.input_schema = map;
    }
    tool
}

impl ToolHost for ScriptedHost {
    fn list_tools(&self, _scope: &HostScope) -> Result<Vec<ToolDescriptor>, HostError> {
        Ok(vec![
            descriptor("test_simple_text", "Returns a simple text.", true),
            descriptor("test_error_handling", "Always fails.", true),
            descriptor("deploy", "Needs a person's approval.", false),
            schema_2020_12(),
        ])
    }

    fn call_tool<'a>(
        &'a self,
        _scope: &'a HostScope,
        _caller: &'a Caller,
        name: &'a str,
        _arguments: Value,
    ) -> BoxFuture<'a, Result<HostOutcome, HostError>> {
        let outcome = match name {
            "test_simple_text" => Ok(HostOutcome::Completed {
                text: "This is a simple text response for testing.".into(),
                structured: None,
                is_error: false,
            }),
            "test_error_handling" => Ok(HostOutcome::Completed {
                text: "This tool intentionally returns an error for testing".into(),
                structured: None,
                is_error: true,
            }),
            "deploy" => Ok(HostOutcome::Parked {
                status: ParkedStatus::AwaitingApproval,
                invocation_id: "inv-1".into(),
                tool: "deploy".into(),
                expires_at: None,
            }),
            other => Err(HostError::UnknownTool(other.into())),
        };
        Box::pin(async move { outcome })
    }

    fn await_decision<'a>(
        &'a self,
        _caller: &'a Caller,
        invocation_id: &'a str,
        _wait: Duration,
    ) -> BoxFuture<'a, Result<HostOutcome, HostError>> {
        let outcome = Err(HostError::NotFound(invocation_id.into()));
        Box::pin(async move { outcome })
    }
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:3101".into());
    let config = EndpointConfig {
        tokens: vec![(SecretString::from(TOKEN), "conformance".into())],
        allowed_hosts: vec![],
    };
    let app = airlock_mcp::router(Arc::new(ScriptedHost), config).layer(
        axum::middleware::map_request(|mut request: Request| async move {
            request.headers_mut().insert(
                header::AUTHORIZATION,
                HeaderValue::from_static("Bearer conformance-token"),
            );
            request
        }),
    );
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("listening on http://{}/mcp", listener.local_addr()?);
    axum::serve(listener, app).await
}
