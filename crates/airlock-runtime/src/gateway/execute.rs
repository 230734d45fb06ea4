//! Step 6 of the path: run a claimed row by its source, renewing the lease while it runs,
//! and store the result. Every network path goes through the egress guard.

use airlock_egress::Request;
use airlock_ledger::{Invocation, TxTool};
use airlock_spec::{Builtin, ToolSource, ToolSpec};
use serde_json::{Map, Value, json};

use super::{Gateway, GatewayError};
use crate::error::egress_error;
use crate::local::LocalBody;
use crate::mcp_tools;
use crate::{ToolError, ToolErrorKind};

impl Gateway {
    /// Executes a claimed row and finishes it. `arguments` are the validated arguments with
    /// defaults filled (absent for tools without a compiled check).
    pub(super) async fn execute(
        &self,
        spec: &ToolSpec,
        row: Invocation,
        arguments: Option<Result<Map<String, Value>, ToolError>>,
    ) -> Result<Invocation, GatewayError> {
        let arguments = match arguments {
            Some(Ok(map)) => Value::Object(map),
            Some(Err(e)) => return self.finish(&row, Err(e)).await,
            None => row.arguments.clone(),
        };
        let key = (spec.policy.effect == airlock_spec::Effect::Idempotent)
            .then(|| row.idempotency_key.clone());
        let work = self.run_source(spec, arguments, key);
        tokio::pin!(work);
        // Renew the lease while the call runs, so a live call is never taken for a crash. The
        // first renewal is a period away: `interval`'s "immediate" first tick still waits for
        // the timer driver's next millisecond, which cost every call about 1 ms.
        let period = self.lease / 3;
        let mut renew = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        let result = loop {
            tokio::select! {
                result = &mut work => break result,
                _ = renew.tick() => { self.store.renew_lease(row.id, &self.owner, self.lease).await?; }
            }
        };
        self.finish(&row, result).await
    }

    async fn finish(
        &self,
        row: &Invocation,
        result: Result<Value, ToolError>,
    ) -> Result<Invocation, GatewayError> {
        Ok(self.store.finish(row.id, &self.owner, result).await?)
    }

    async fn run_source(
        &self,
        spec: &ToolSpec,
        arguments: Value,
        idempotency_key: Option<String>,
    ) -> Result<Value, ToolError> {
        match &spec.source {
            ToolSource::Api(op) => {
                let connection = self.api_connection(&op.connection)?;
                let args = arguments.as_object().cloned().unwrap_or_default();
                crate::api::execute(&self.egress, op, connection, &self.credentials, &args).await
            }
            ToolSource::Builtin(Builtin::Fetch) => self.fetch(&arguments).await,
            ToolSource::Local => match self.local_body(spec, arguments) {
                Some(LocalBody::Plain(body)) => body.await,
                Some(LocalBody::Transactional(_)) | None => {
                    Err(ToolError::bad_declaration(format!(
                        "local tool `{}` has no implementation registered",
                        spec.definition.name
                    )))
                }
            },
            ToolSource::Builtin(Builtin::AskHuman) => Err(ToolError::bad_declaration(
                "a question is answered by a person, never executed",
            )),
            ToolSource::McpInline(_) | ToolSource::Connection(_) => {
                let (target, remote_name) = self.mcp_target(&spec.source)?;
                mcp_tools::call(&self.mcp, &target, remote_name, arguments, idempotency_key).await
            }
            // TODO-correctness(#9): sub-agents arrive with the agent runtime.
            ToolSource::Agent(_) => Err(ToolError::new(
                ToolErrorKind::Unavailable,
                "sub-agent tools need the agent runtime, which this build does not have yet",
            )),
        }
    }

    /// A `[connections]` entry of `airlock.toml`, or the tool error naming it.
    fn api_connection(&self, name: &str) -> Result<&airlock_spec::ApiConnection, ToolError> {
        self.connections.get(name).ok_or_else(|| {
            ToolError::bad_declaration(format!("connection `{name}` is not configured"))
        })
    }

    /// Where an MCP tool's server is, with its credential, and the tool's remote name.
    fn mcp_target<'s>(
        &self,
        source: &'s ToolSource,
    ) -> Result<(airlock_mcp::McpTarget, &'s str), ToolError> {
        match source {
            ToolSource::McpInline(tool) => {
                let connection = self.api_connection(&tool.connection)?;
                Ok((
                    mcp_tools::inline_target(tool, connection, &self.credentials)?,
                    &tool.remote_name,
                ))
            }
            ToolSource::Connection(tool) => {
                let connection = self.mcp_connections.get(&tool.namespace).ok_or_else(|| {
                    ToolError::bad_declaration(format!(
                        "connection `{}` is not loaded",
                        tool.namespace
                    ))
                })?;
                Ok((
                    mcp_tools::connection_target(connection, &self.credentials)?,
                    &tool.remote_name,
                ))
            }
            _ => Err(ToolError::bad_declaration("not an MCP tool")),
        }
    }

    fn local_body(&self, spec: &ToolSpec, arguments: Value) -> Option<LocalBody> {
        self.local
            .get(spec.definition.name.as_str())
            .map(|tool| tool.invoke(arguments))
    }

    /// The body of a transactional local tool, when `spec` is one.
    pub(super) fn transactional_body(&self, spec: &ToolSpec, row: &Invocation) -> Option<TxTool> {
        if spec.policy.effect != airlock_spec::Effect::Transactional
            || !matches!(spec.source, ToolSource::Local)
        {
            return None;
        }
        match self.local_body(spec, row.arguments.clone())? {
            LocalBody::Transactional(body) => Some(body),
            LocalBody::Plain(_) => None,
        }
    }

    /// The `fetch` builtin: GET a public URL through the guard; text only, capped.
    async fn fetch(&self, arguments: &Value) -> Result<Value, ToolError> {
        let url = arguments
            .get("url")
            .and_then(Value::as_str)
            .unwrap_or_default();
        // A page that answers 4xx or 5xx is a failed call, not a result (DESIGN §3).
        let response = self
            .egress
            .call()
            .send(Request::get(url))
            .await
            .and_then(airlock_egress::Response::error_for_status)
            .map_err(|e| egress_error(&e))?;
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
}
