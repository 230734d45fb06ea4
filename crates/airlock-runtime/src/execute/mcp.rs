//! The MCP executor: calls a tool on a remote MCP server through the egress guard. Two kinds
//! of tools reach it: inline `type: mcp` tools of an agent manifest (base URL and credential
//! from `[connections]`, resolved per call) and connection-file tools (discovered once at
//! boot, failing loudly, their remote names and schemas part of the scope's digest, their
//! schemas compiled there so a tool that could not be checked never enters a scope).

use airlock_egress::join;
use airlock_mcp::{CallAnswer, McpClient, McpCredential, McpTarget, ToolCall, ToolResult};
use airlock_spec::{
    ApiConnection, ConnectionSpec, ConnectionTool, CredentialPath, Credentials, McpAuth,
    McpInlineTool, Policy, ToolDefinition, ToolName, ToolSource, ToolSpec, compile_input_schema,
};
use secrecy::SecretString;
use serde_json::{Value, json};

use crate::error::{egress_error, mcp_error};
use crate::execute::Ran;
use crate::{ToolError, ToolErrorKind};

/// Why boot-time discovery failed; boot aborts with it.
#[derive(Debug, thiserror::Error)]
#[error("connection {namespace}: tools/list failed at boot — {reason}")]
pub struct DiscoveryError {
    /// The connection file's namespace.
    pub namespace: String,
    /// What went wrong.
    pub reason: String,
}

/// One discovered connection tool: its spec, and its definition as a pin holds it.
#[derive(Debug, Clone)]
pub struct Discovered {
    /// The tool as the gateway scope serves it.
    pub spec: ToolSpec,
    /// What is pinned of it (docs/rules.md LEDGER-49).
    pub definition: Value,
}

/// Discovers the tools of every connection file: one `tools/list` (all pages) each.
///
/// # Errors
/// The first connection that fails, named.
pub async fn discover(
    client: &McpClient,
    connections: &[ConnectionSpec],
    credentials: &Credentials,
) -> Result<Vec<Discovered>, DiscoveryError> {
    let mut tools = Vec::new();
    for connection in connections {
        let fail = |reason: String| DiscoveryError {
            namespace: connection.namespace.clone(),
            reason,
        };
        let target = connection_target(connection, credentials).map_err(|e| fail(e.message))?;
        let remote = client
            .discover(&target)
            .await
            .map_err(|e| fail(e.message))?;
        for tool in remote {
            let name = format!("{}__{}", connection.namespace, tool.name);
            let name = ToolName::try_from(name.as_str())
                .map_err(|reason| fail(format!("tool `{}`: {reason}", tool.name)))?;
            // A discovered schema the validator refuses would leave the tool's calls
            // unchecked: the boot stops, as for any bad connection (docs/rules.md DECL-37).
            compile_input_schema(&tool.input_schema)
                .map_err(|reason| fail(format!("tool `{}`: {reason}", tool.name)))?;
            let definition = tool.definition;
            let spec = ToolSpec {
                definition: ToolDefinition {
                    name,
                    description: tool.description,
                    input_schema: tool.input_schema,
                },
                source: ToolSource::Connection(ConnectionTool {
                    namespace: connection.namespace.clone(),
                    remote_name: tool.name,
                    output_schema: tool.output_schema,
                }),
                policy: Policy {
                    approval: connection.approval,
                    effect: connection.effect,
                    approval_ttl: connection.approval_ttl,
                    ..Policy::default()
                },
            };
            tools.push(Discovered { spec, definition });
        }
    }
    Ok(tools)
}

fn secret(
    credentials: &Credentials,
    path: Option<&CredentialPath>,
) -> Result<Option<SecretString>, ToolError> {
    path.map(|p| {
        credentials
            .get(p)
            .cloned()
            .map_err(|e| ToolError::new(ToolErrorKind::CredentialMissing, e.to_string()))
    })
    .transpose()
}

/// The target of a connection file's server.
pub(crate) fn connection_target(
    connection: &ConnectionSpec,
    credentials: &Credentials,
) -> Result<McpTarget, ToolError> {
    let secret = secret(credentials, connection.credential.as_ref())?;
    let credential = McpCredential::from_spec(&connection.auth, secret).map_err(|e| {
        ToolError::new(
            ToolErrorKind::CredentialMissing,
            format!("connection `{}`: {}", connection.namespace, e.message),
        )
    })?;
    // A connection file's server is the deployment's own; its session-less handshake may be
    // kept between calls (docs/rules.md MCP-28).
    Ok(McpTarget::new(connection.url.clone())
        .with_credential(credential)
        .with_protocol(connection.protocol)
        .keeping_handshake())
}

/// The target of an inline tool: the connection's base URL joined with the declared path.
pub(crate) fn inline_target(
    tool: &McpInlineTool,
    connection: &ApiConnection,
    credentials: &Credentials,
) -> Result<McpTarget, ToolError> {
    let base = url::Url::parse(&connection.base_url).map_err(|_| {
        ToolError::bad_declaration(format!(
            "connection `{}` has an invalid base_url",
            tool.connection
        ))
    })?;
    let url = join(&base, &tool.path).map_err(|e| egress_error(&e))?;
    let secret = match tool.auth {
        McpAuth::None => None,
        McpAuth::Bearer | McpAuth::Header(_) => {
            secret(credentials, connection.credential.as_ref())?
        }
    };
    let credential = McpCredential::from_spec(&tool.auth, secret).map_err(|e| {
        ToolError::new(
            ToolErrorKind::CredentialMissing,
            format!("connection `{}`: {}", tool.connection, e.message),
        )
    })?;
    Ok(McpTarget::new(url.to_string())
        .with_credential(credential)
        .with_protocol(tool.protocol))
}

/// Calls a remote tool; the result keeps the model's text, the structured content and every
/// content block as the upstream returned it (docs/rules.md MCP-33). When the endpoint offered
/// the upstream a task (MCP-76) the answer may be that task instead.
pub(crate) async fn call(
    client: &McpClient,
    target: &McpTarget,
    remote_name: &str,
    arguments: Value,
    idempotency_key: Option<&str>,
) -> Result<Ran, ToolError> {
    let mut call = ToolCall::new(remote_name, arguments);
    if let Some(key) = idempotency_key {
        call = call.with_idempotency_key(key);
    }
    match client.call_tool_or_task(target, &call).await {
        Ok(CallAnswer::Result(result)) => Ok(Ran::Value(stored(&result))),
        Ok(CallAnswer::Task(task)) => Ok(Ran::Task(task)),
        Err(e) => Err(mcp_error(e)),
    }
}

/// A remote tool's result as its row stores it.
pub(crate) fn stored(result: &ToolResult) -> Value {
    if let Some(asked) = &result.input_required {
        // A relayed round that needs the client's input: the row ends `input_required`.
        return json!({ airlock_ledger::INPUT_REQUIRED_KEY: asked });
    }
    json!({
        "text": result.text,
        "structured": result.structured,
        "content": result.content,
    })
}
