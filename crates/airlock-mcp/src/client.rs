//! The MCP client airlock's runtime and boot code use: calls and discovery as short sessions,
//! and the memory of which lifecycle each upstream speaks.
//!
//! Guarantees: [`McpClient::call_tool`] sends exactly initialize → notifications/initialized →
//! tools/call (with the remote name and the arguments as given) → close, and never panics:
//! every failure is an [`McpCallError`]. Two kinds of upstream get the `tools/call` alone, as
//! one request: one this client has seen speak 2026-07-28, which has no handshake (MCP-27), and
//! a connection file's server whose handshake issued no session (MCP-28).
//! [`McpClient::call_tool_or_task`] lets a 2026-07-28 upstream answer with a task of its own
//! when the endpoint offers one, and [`McpClient::task_state`] / [`McpClient::cancel_task`] follow
//! that task (`upstream_task`, MCP-76 to MCP-79).
//! [`McpClient::discover`] lists every page of `tools/list` in one session. What an upstream
//! speaks is remembered per endpoint URL for the life of the client, so only the first session
//! pays for the probe.

mod asked;
pub(crate) mod catalog;
pub(crate) mod content;
pub(crate) mod direct;
pub(crate) mod listen;
pub(crate) mod session;
pub(crate) mod target;
pub(crate) mod transport;
pub(crate) mod upstream_task;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use airlock_egress::{Delivery, GuardedClient};
use airlock_spec::McpProtocol;
use rmcp::model::{
    CallToolRequestParams, JsonObject, MetaObject, ProtocolVersion, RequestMetaObject,
};
use serde_json::{Map, Value};

use crate::client::content::to_tool_result;
use crate::client::target::{IDEMPOTENCY_META_KEY, McpTarget, RemoteTool, ToolCall, ToolResult};
use crate::client::transport::not_json_rpc;
use crate::error::{CallErrorKind, McpCallError};
use crate::relay;
use direct::Framing;
use session::{Opened, Speaks};
use upstream_task::{CallAnswer, TaskParams, UpstreamTaskState};

/// Upstreams remembered at most; past it the memory starts over (a probe is only slower).
const MAX_REMEMBERED: usize = 1024;

/// The MCP client: a guarded HTTP client plus what each upstream was seen to speak. Cheap to
/// clone; clones share the memory.
#[derive(Debug, Clone)]
pub struct McpClient {
    pub(crate) guard: GuardedClient,
    speaks: Arc<Mutex<HashMap<String, Opened>>>,
}

impl McpClient {
    /// A client whose every request goes through `guard`.
    #[must_use]
    pub fn new(guard: GuardedClient) -> Self {
        Self {
            guard,
            speaks: Arc::default(),
        }
    }

    /// The egress guard this client sends through.
    #[must_use]
    pub fn guard(&self) -> &GuardedClient {
        &self.guard
    }

    /// What the upstream at `url` was last seen to speak: `legacy`, `2026-07-28`, or `None`
    /// when it has not been reached yet.
    #[must_use]
    pub fn remembered_protocol(&self, url: &str) -> Option<McpProtocol> {
        self.memory().get(url).map(|o| match o.speaks {
            Speaks::Legacy => McpProtocol::Legacy,
            Speaks::Modern => McpProtocol::Rev20260728,
        })
    }

    /// Calls one remote tool in a short session.
    ///
    /// # Errors
    /// Every failure, as an [`McpCallError`] with a stable kind: the tool's `isError` text, the
    /// server's JSON-RPC error, a guard refusal, a redirect, the deadline, an HTTP status, an
    /// oversized reply, a protocol mismatch, or anything else.
    pub async fn call_tool(
        &self,
        target: &McpTarget,
        call: &ToolCall,
    ) -> Result<ToolResult, McpCallError> {
        let mut known = self.memory().get(&target.url).cloned();
        if known.is_none()
            && target.protocol != McpProtocol::Legacy
            && target.downstream.round.is_some()
        {
            // A relayed round needs the request airlock frames itself (MCP-68): learn what the
            // upstream speaks first, with no call in the session.
            self.session(target, |_peer| async { Ok(()) }).await?;
            known = self.memory().get(&target.url).cloned();
        }
        // A call whose client takes the upstream's requests keeps its session open for them
        // (MCP-94): no handshake-free request can carry them.
        let framing = known.as_ref().and_then(|o| handshake_free(target, o));
        let framing =
            framing.filter(|f| target.downstream.asker.is_none() || matches!(f, Framing::Modern));
        if let Some(framing) = framing {
            let answer = direct::call(&self.guard, target, framing, call, false).await;
            let result = answer.and_then(|answer| match answer {
                CallAnswer::Result(result) => Ok(result),
                // Never offered here: `direct` refuses a task nobody asked for.
                CallAnswer::Task(_) => Err(not_json_rpc()),
            });
            if let (Framing::Kept(_), Err(e)) = (framing, &result)
                && matches!(e.kind, CallErrorKind::HttpStatus | CallErrorKind::JsonRpc)
            {
                // The server may have started keeping sessions: the next call shakes hands
                // again (this one is not re-sent: it may have been received).
                self.memory().remove(&target.url);
            }
            return result;
        }
        let params = call_params(call, target)?;
        let work = |peer: rmcp::Peer<rmcp::RoleClient>| async move { peer.call_tool(params).await };
        let outcome = match target.downstream.asker.clone() {
            Some(asker) => {
                let key = call.idempotency_key.clone();
                let asked = asked::Asked::new(session::client_info(), asker, key);
                self.session_as(target, asked, work).await?
            }
            None => self.session(target, work).await?,
        };
        // Through JSON: airlock reads the result's wire form, not rmcp's types.
        let result = serde_json::to_value(&outcome).map_err(|e| {
            McpCallError::new(
                CallErrorKind::BadReply,
                format!("the tool result cannot be read: {e}"),
            )
        });
        // The server answered the call: whatever is wrong with the answer, it is an answer.
        result
            .and_then(|r| to_tool_result(&r, target.downstream.round.is_some()))
            .map_err(|e| McpCallError {
                delivery: Delivery::Answered,
                ..e
            })
    }

    /// [`McpClient::call_tool`], but a call made inside the endpoint's offer of a task (a
    /// 2026-07-28 client that declared the tasks extension, MCP-76) to an upstream that speaks
    /// 2026-07-28 — declared so, or seen to under `auto` — goes as one request declaring the
    /// extension, and the upstream may answer with a task of its own.
    ///
    /// # Errors
    /// As [`McpClient::call_tool`].
    pub async fn call_tool_or_task(
        &self,
        target: &McpTarget,
        call: &ToolCall,
    ) -> Result<CallAnswer, McpCallError> {
        if target.downstream.offers_task && self.speaks_modern(target) {
            return direct::call(&self.guard, target, Framing::Modern, call, true).await;
        }
        self.call_tool(target, call).await.map(CallAnswer::Result)
    }

    /// Where the upstream's task `task_id` stands (`tasks/get`, MCP-78).
    ///
    /// # Errors
    /// As [`McpClient::call_tool`]: the upstream's JSON-RPC error (an unknown task), the
    /// guard, the deadline, a reply that is not a task.
    pub async fn task_state(
        &self,
        target: &McpTarget,
        task_id: &str,
    ) -> Result<UpstreamTaskState, McpCallError> {
        let answer = self
            .task_request(target, "tasks/get", task_id, None)
            .await?;
        let result = direct::result_of(&answer).map_err(direct::answered)?;
        let relays_round = target.downstream.round.is_some();
        upstream_task::state(result, relays_round).map_err(direct::answered)
    }

    /// Asks the upstream to cancel its task `task_id` (`tasks/cancel`, MCP-79).
    ///
    /// # Errors
    /// As [`McpClient::task_state`].
    pub async fn cancel_task(&self, target: &McpTarget, task_id: &str) -> Result<(), McpCallError> {
        let answer = self
            .task_request(target, "tasks/cancel", task_id, None)
            .await?;
        direct::result_of(&answer)
            .map(|_| ())
            .map_err(direct::answered)
    }

    /// Sends the upstream's task `task_id` the client's answers to its input requests
    /// (`tasks/update`, MCP-84).
    ///
    /// # Errors
    /// As [`McpClient::task_state`].
    pub async fn update_task(
        &self,
        target: &McpTarget,
        task_id: &str,
        responses: &Map<String, Value>,
    ) -> Result<(), McpCallError> {
        let answer = self
            .task_request(target, "tasks/update", task_id, Some(responses))
            .await?;
        direct::result_of(&answer)
            .map(|_| ())
            .map_err(direct::answered)
    }

    async fn task_request(
        &self,
        target: &McpTarget,
        method: &'static str,
        task_id: &str,
        input_responses: Option<&Map<String, Value>>,
    ) -> Result<Value, McpCallError> {
        let version = ProtocolVersion::V_2026_07_28.to_string();
        let sent = direct::Exchange {
            version: &version,
            method,
            name: Some(task_id),
        };
        let params = TaskParams {
            task_id,
            meta: direct::modern_meta(true, None),
            input_responses,
        };
        direct::exchange(&self.guard, target, sent, params).await
    }

    /// Whether `target` speaks 2026-07-28: declared so, or seen to under `auto`.
    pub(crate) fn speaks_modern(&self, target: &McpTarget) -> bool {
        match target.protocol {
            McpProtocol::Rev20260728 => true,
            McpProtocol::Auto => {
                self.remembered_protocol(&target.url) == Some(McpProtocol::Rev20260728)
            }
            McpProtocol::Legacy => false,
        }
    }

    /// Lists every tool of the upstream (every page of `tools/list`) in one session. A tool
    /// without a description gets an empty one; without an `inputSchema`, `{"type":"object"}`.
    ///
    /// # Errors
    /// As [`McpClient::call_tool`]; boot code prefixes the message with the connection's name.
    pub async fn discover(&self, target: &McpTarget) -> Result<Vec<RemoteTool>, McpCallError> {
        let tools = self
            .session(target, |peer| async move { peer.list_all_tools().await })
            .await?;
        Ok(tools
            .into_iter()
            .map(|tool| RemoteTool {
                definition: pinnable(&tool),
                name: tool.name.to_string(),
                description: tool.description.map(|d| d.to_string()).unwrap_or_default(),
                input_schema: Value::Object(tool.input_schema.as_ref().clone()),
                read_only_hint: tool.annotations.as_ref().and_then(|a| a.read_only_hint),
                output_schema: tool
                    .output_schema
                    .map(|schema| Value::Object(schema.as_ref().clone())),
            })
            .collect())
    }

    pub(crate) async fn session<T, F, Fut>(
        &self,
        target: &McpTarget,
        work: F,
    ) -> Result<T, McpCallError>
    where
        F: FnOnce(rmcp::Peer<rmcp::RoleClient>) -> Fut,
        Fut: Future<Output = Result<T, rmcp::ServiceError>>,
    {
        self.session_as(target, session::client_info(), work).await
    }

    /// [`McpClient::session`] with `handler` as the session's client.
    async fn session_as<H, T, F, Fut>(
        &self,
        target: &McpTarget,
        handler: H,
        work: F,
    ) -> Result<T, McpCallError>
    where
        H: rmcp::handler::client::ClientHandler,
        F: FnOnce(rmcp::Peer<rmcp::RoleClient>) -> Fut,
        Fut: Future<Output = Result<T, rmcp::ServiceError>>,
    {
        let known = self.memory().get(&target.url).map(|o| o.speaks);
        let (opened, result) = session::run(&self.guard, target, (known, handler), work).await;
        if let Some(opened) = opened {
            let mut memory = self.memory();
            if memory.len() >= MAX_REMEMBERED && !memory.contains_key(&target.url) {
                memory.clear();
            }
            memory.insert(target.url.clone(), opened);
        }
        result
    }

    /// Whether the upstream at `url` was last seen to declare nothing beside tools (`false` when
    /// it has not been reached yet).
    pub(crate) fn offers_nothing(&self, url: &str) -> bool {
        self.memory().get(url).is_some_and(|o| !o.offers)
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, HashMap<String, Opened>> {
        self.speaks.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// How `target` can be called without a handshake, given what its last session showed: a
/// 2026-07-28 upstream always (MCP-27), a session-era one only when the target lets its
/// handshake be kept and the server issued no session (MCP-28).
fn handshake_free<'a>(target: &McpTarget, seen: &'a Opened) -> Option<Framing<'a>> {
    match (seen.speaks, target.protocol) {
        (Speaks::Modern, McpProtocol::Rev20260728 | McpProtocol::Auto) => Some(Framing::Modern),
        (Speaks::Legacy, McpProtocol::Legacy | McpProtocol::Auto)
            if target.keep_handshake && seen.stateless =>
        {
            Some(Framing::Kept(seen.version.as_str()))
        }
        _ => None,
    }
}

/// The `tools/call` parameters: the remote name and the arguments exactly as given.
fn call_params(call: &ToolCall, target: &McpTarget) -> Result<CallToolRequestParams, McpCallError> {
    let mut params = CallToolRequestParams::new(call.remote_name.clone());
    params.arguments = Some(call.arguments_object()?.clone());
    let mut meta = JsonObject::new();
    if let Some(key) = &call.idempotency_key {
        meta.insert(IDEMPOTENCY_META_KEY.to_owned(), Value::String(key.clone()));
    }
    relay::ask_upstream(&mut meta, target.downstream.relay.as_ref());
    if !meta.is_empty() {
        params.meta = Some(RequestMetaObject(MetaObject(meta)));
    }
    Ok(params)
}

/// The fields of `tool` a pin covers, as the server sent them.
fn pinnable(tool: &rmcp::model::Tool) -> Value {
    const PINNED: [&str; 5] = [
        "name",
        "description",
        "inputSchema",
        "outputSchema",
        "annotations",
    ];
    let mut out = serde_json::Map::new();
    if let Ok(Value::Object(all)) = serde_json::to_value(tool) {
        for (key, value) in all {
            if PINNED.contains(&key.as_str()) && !value.is_null() {
                out.insert(key, value);
            }
        }
    }
    Value::Object(out)
}
