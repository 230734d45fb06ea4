//! The one rmcp `ServerHandler` of airlock: tools (and the logging level their calls relay at),
//! and what the scope offers beside them (`offered`), each request answered from the host.
//!
//! Guarantees: the scope and caller come only from admission ([`Admitted`] in the request's
//! extensions) — a request without them is an internal error, never served anonymously; the
//! await tool never waits longer than [`MAX_AWAIT`]; nothing is kept between requests but the
//! log level a session-era client set (MCP-64). A parked call becomes a 2026 task (`resultType: "task"`) only for a request that declares the tasks
//! extension; `tasks/get` and `tasks/cancel` see only the caller's own calls from this scope
//! (rmcp refuses them with -32021 to a request that did not declare the extension). Such a
//! request's call may offer its 2026-07-28 upstream a task (`upstream_task`, MCP-76); the
//! client still gets airlock's task, whose id is the invocation's. A 2026-07-28 call of a tool
//! its upstream runs only as a task, from a request without the tasks extension, is refused
//! with -32021 before anything is recorded (MCP-80).

use std::sync::Arc;
use std::time::Duration;

use opentelemetry::context::FutureExt;
use rmcp::model::SubscriptionFilter;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    GetTaskParams, GetTaskResult, Implementation, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ServerCapabilities, ServerConfig, UpdateTaskParams,
};
use rmcp::model::{
    CompleteRequestParams, CompleteResult, DiscoverResult, GetPromptRequestParams,
    GetPromptResponse, GetSkillRequestParams, GetSkillResult, InitializeRequestParams,
    InitializeResult, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListSkillsResult, ReadResourceRequestParams, ReadResourceResponse,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, Value};

use super::MAX_AWAIT;
use super::convert::{
    AWAIT_TOOL, await_tool, awaited, from_host_error, to_call_result, to_error_data, to_tool,
};
use super::notices::{self, Levels};
use super::request::Admitted;
use super::request_state::RequestStates;
use super::{mrtr, offer_rounds, tool_rounds};
use super::{offered, subscriptions, tasks, trace};
use crate::Downstream;
use crate::host::{CALL_KEY_META, CallKey, HostCall, HostError, HostOutcome, ToolHost};
use crate::rounds::{self, Round};

/// The handler rmcp builds per request (a clone of one `Arc`).
#[derive(Clone)]
pub(super) struct Endpoint {
    host: Arc<dyn ToolHost>,
    /// `None`: no input requests are sent (and no state is accepted).
    request_states: Option<RequestStates>,
    /// The log levels session-era clients set (MCP-64).
    levels: Levels,
}

impl Endpoint {
    pub(super) fn new(host: Arc<dyn ToolHost>, request_states: Option<RequestStates>) -> Self {
        Self {
            host,
            request_states,
            levels: Levels::default(),
        }
    }

    /// The host every request is answered from.
    pub(super) fn host(&self) -> &dyn ToolHost {
        self.host.as_ref()
    }

    /// How request states (and session ids) are sealed; `None`: neither is issued.
    pub(super) fn request_states(&self) -> Option<&RequestStates> {
        self.request_states.as_ref()
    }

    /// The log levels session-era clients set.
    pub(super) fn levels(&self) -> &Levels {
        &self.levels
    }

    /// `tools/call`: the await tool, or one call through the host.
    async fn call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let admitted = admitted(&context)?;
        let wants_task = context
            .client_capabilities()
            .is_some_and(|caps| caps.supports_tasks());
        let key = call_key(&request, &context)?;
        let arguments = request.arguments.unwrap_or_default();
        if request.name == AWAIT_TOOL {
            return self
                .await_decision(&admitted, &arguments)
                .await
                .map(Into::into);
        }
        let modern = is_modern(&context);
        if modern
            && !wants_task
            && self
                .host
                .requires_tasks(&admitted.scope, &admitted.caller, &request.name)
        {
            // Its upstream would refuse it anyway: refused before anything is recorded (MCP-80).
            return Err(tasks::required());
        }
        let declared = declared(&context);
        let (relay, receiving) = notices::relay_for(&context, &self.levels, &admitted).unzip();
        // What this request's client can take back from its upstream, handed to the host with
        // the caller (never held in ambient state, docs/rules.md MCP-63, MCP-68, MCP-76).
        let downstream = |round: Option<Round>| Downstream {
            round,
            relay: relay.clone(),
            offers_task: wants_task && modern,
            asker: None,
            subject: None,
        };
        if let Some(state) = request.request_state.as_deref() {
            let round = rounds::round_if_modern(declared.as_ref(), None);
            let admitted = admitted.serving(downstream(round.clone()));
            let none = Map::new();
            let retry = mrtr::Retry {
                tool: &request.name,
                arguments: &arguments,
                state,
                responses: request.input_responses.as_ref(),
                declared: declared.as_ref().unwrap_or(&none),
                wants_task: wants_task && modern,
            };
            let states = self.request_states.as_ref();
            // An approving retry runs the call in this request (MCP-49): its messages too, and
            // its upstream's own input requests (MCP-68).
            // A round that runs may be answered with its upstream's task (MCP-76, MCP-82).
            let resume = async {
                let resumed = mrtr::resume(self.host.as_ref(), states, &admitted, retry).await;
                rounds::settled(round.as_ref(), resumed)
            };
            return notices::forwarded(receiving, &context.peer, resume).await;
        }
        // Kept only when the person at the client could be asked (MCP-46).
        let asks = self
            .request_states
            .as_ref()
            .filter(|_| asks_person(&context));
        let asked_about = asks.map(|_| arguments.clone());
        let relayed_about = declared.as_ref().map(|_| arguments.clone());
        // Answers sent without a state go on as sent: the upstream may take them (MCP-70).
        let responses = request
            .input_responses
            .map(|r| Value::Object(r.into_iter().collect()));
        let round = rounds::round_if_modern(declared.as_ref(), responses);
        // A client that follows tasks may get the upstream's own task relayed (MCP-76).
        let serving = admitted.serving(downstream(round.clone()));
        let call = async {
            let called = self
                .host
                .call_tool_keyed(
                    &serving.scope,
                    &serving.caller,
                    &request.name,
                    Value::Object(arguments),
                    key.as_ref(),
                )
                .await;
            rounds::settled(round.as_ref(), called)
        };
        let outcome = notices::forwarded(receiving, &context.peer, call).await;
        if let (Ok(call), Some(declared), Some(arguments)) = (&outcome, &declared, &relayed_about)
            && matches!(call.outcome, HostOutcome::InputRequired { .. })
        {
            let states = self.request_states.as_ref();
            let (tool, call) = (&request.name, call.clone());
            let wants_task = wants_task && modern;
            return tool_rounds::answer(
                states, &admitted, call, tool, arguments, declared, wants_task,
            );
        }
        if let (Ok(call), Some(states), Some(arguments)) = (&outcome, asks, &asked_about) {
            let host = self.host.as_ref();
            if let Some(asked) = mrtr::ask(host, states, &admitted, call, arguments) {
                return Ok(asked.into());
            }
        }
        match outcome {
            Ok(call) if wants_task && call.is_parked() => {
                Ok(CallToolResponse::Task(tasks::created(&call)))
            }
            outcome => settled(outcome).map(Into::into),
        }
    }

    /// A plain `tools/call` (`plain`): the call through the host, nothing relayed, asked or
    /// tasked; what `call` does for the same request.
    pub(super) async fn plain_call(
        &self,
        admitted: &Admitted,
        name: &str,
        arguments: Map<String, Value>,
        key: Option<&CallKey>,
    ) -> Result<CallToolResult, ErrorData> {
        let (scope, caller) = (&admitted.scope, &admitted.caller);
        let arguments = Value::Object(arguments);
        settled(
            self.host
                .call_tool_keyed(scope, caller, name, arguments, key)
                .await,
        )
    }

    async fn await_decision(
        &self,
        admitted: &Admitted,
        arguments: &Map<String, Value>,
    ) -> Result<CallToolResult, ErrorData> {
        let (invocation_id, wait) = match await_arguments(arguments) {
            Ok(parsed) => parsed,
            Err(message) => {
                return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                    "invalid arguments for {AWAIT_TOOL}: {message}"
                ))]));
            }
        };
        match self
            .host
            .await_decision(&admitted.scope, &admitted.caller, &invocation_id, wait)
            .await
        {
            Ok(call) => Ok(awaited(call)),
            Err(err) => from_host_error(err),
        }
    }
}

impl ServerHandler for Endpoint {
    #[allow(
        deprecated,
        reason = "MCP logging is deprecated (SEP-2577) yet part of 2025-11-25"
    )]
    fn get_info(&self) -> ServerConfig {
        // Resources and skills are declared per scope (`offered::declare` takes them out where
        // a scope has none); rmcp answers `skills/*` only for a server that declares them.
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tasks()
            .enable_logging()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_skills()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("airlock", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Every call goes through airlock. A call that needs a person's approval returns \
                 status awaiting_approval instead of a result: it has NOT run. Call \
                 airlock_await_decision with its invocation_id to get the real result.",
            )
    }

    /// The static info, plus what the request's scope offers beside tools (MCP-54).
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        let mut info = self.negotiate_initialize(&request)?;
        offered::declare(
            self.host.as_ref(),
            &admitted(&context)?,
            &mut info.capabilities,
        );
        Ok(info)
    }

    async fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        let mut info = self.get_info();
        offered::declare(
            self.host.as_ref(),
            &admitted(&context)?,
            &mut info.capabilities,
        );
        let versions = self.supported_protocol_versions().into_owned();
        Ok(DiscoverResult::from_server_info(versions, info))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        offered::resources(self.host.as_ref(), &admitted(&context)?)
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(subscriptions::accepted(requested))
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let admitted = admitted(context.request_context())?;
        subscriptions::listen(self.host.as_ref(), &admitted, context).await
    }

    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        offered::skills(self.host.as_ref(), &admitted(&context)?)
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, ErrorData> {
        offered::skill(self.host.as_ref(), &admitted(&context)?, &request.uri)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        offered::templates(self.host.as_ref(), &admitted(&context)?)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let admitted = admitted(&context)?;
        let declared = declared(&context);
        let relaying = offer_rounds::Relaying {
            states: self.request_states.as_ref(),
            admitted: &admitted,
            declared: declared.as_ref(),
        };
        offer_rounds::read(self.host.as_ref(), relaying, request).await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        offered::prompts(self.host.as_ref(), &admitted(&context)?)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let admitted = admitted(&context)?;
        let declared = declared(&context);
        let relaying = offer_rounds::Relaying {
            states: self.request_states.as_ref(),
            admitted: &admitted,
            declared: declared.as_ref(),
        };
        offer_rounds::prompt(self.host.as_ref(), relaying, request).await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let admitted = admitted(&context)?;
        offered::complete(self.host.as_ref(), &admitted, request).await
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let admitted = admitted(&context)?;
        let descriptors = self
            .host
            .list_tools(&admitted.scope, &admitted.caller)
            .map_err(to_error_data)?;
        let mut tools: Vec<_> = descriptors.into_iter().map(to_tool).collect();
        tools.push(await_tool());
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(cx) = trace::start(&request, &context) else {
            return self.call(request, context).await;
        };
        let tool = request.name.clone();
        let result = self.call(request, context).with_context(cx.clone()).await;
        trace::finish(&cx, &tool, &result);
        result
    }

    /// Session-era clients set their level once; it is kept for their principal (MCP-64).
    /// 2026-07-28 removed the method: the level comes with each request.
    #[allow(
        deprecated,
        reason = "MCP logging is deprecated (SEP-2577) yet part of 2025-11-25"
    )]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if notices::is_modern(&context) {
            return Err(ErrorData::method_not_found::<
                rmcp::model::SetLevelRequestMethod,
            >());
        }
        let admitted = admitted(&context)?;
        self.levels.set(&admitted, request.level);
        Ok(())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let admitted = admitted(&context)?;
        let mut call = self
            .host
            .await_decision(
                &admitted.scope,
                &admitted.caller,
                &request.task_id,
                Duration::ZERO,
            )
            .await
            .map_err(to_error_data)?;
        let declared = declared(&context).unwrap_or_default();
        let asks = call
            .task_input
            .take()
            .and_then(|asks| tool_rounds::task_input(&asks, &declared));
        Ok(tasks::detailed(call, asks))
    }

    /// Relays the client's answers to the input requests its task's upstream waits on
    /// (MCP-84), once they match what those ask (MCP-87); the ack carries nothing of the task,
    /// whose next state `tasks/get` shows.
    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let admitted = admitted(&context)?;
        let responses: Map<String, Value> = request.input_responses.into_iter().collect();
        let declared = declared(&context).unwrap_or_default();
        let (host, task) = (self.host.as_ref(), request.task_id.as_str());
        tool_rounds::check_task_answers(host, &admitted, task, &declared, &responses).await?;
        self.host
            .update_task(
                &admitted.scope,
                &admitted.caller,
                &request.task_id,
                &responses,
            )
            .await
            .map_err(to_error_data)
    }
    /// Withdraws a waiting call; a settled one is acknowledged unchanged (SEP-2663: cancel is
    /// idempotent, -32602 is only for an unknown task).
    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let admitted = admitted(&context)?;
        self.host
            .withdraw(&admitted.scope, &admitted.caller, &request.task_id)
            .await
            .map_err(to_error_data)?;
        Ok(())
    }
}

/// A call's outcome as the client's result.
fn settled(outcome: Result<HostCall, HostError>) -> Result<CallToolResult, ErrorData> {
    match outcome {
        Ok(call) => Ok(to_call_result(call.outcome)),
        Err(err) => from_host_error(err),
    }
}

/// What a 2026-07-28 request's client declared it can do; `None` on the session-era revisions,
/// which relay no input round (MCP-68).
fn declared(context: &RequestContext<RoleServer>) -> Option<tool_rounds::Declared> {
    if !is_modern(context) {
        return None;
    }
    match context.client_capabilities().map(serde_json::to_value) {
        Some(Ok(Value::Object(declared))) => Some(declared),
        _ => Some(Map::new()),
    }
}

/// Whether the request speaks 2026-07-28 or later.
fn is_modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
}

/// Whether the person at the client can be asked through an input request: a 2026-07-28
/// request that declares elicitation (MCP-46).
fn asks_person(context: &RequestContext<RoleServer>) -> bool {
    is_modern(context)
        && context
            .client_capabilities()
            .is_some_and(|caps| caps.elicitation.is_some())
}

/// What admission established for this request.
fn admitted(context: &RequestContext<RoleServer>) -> Result<Admitted, ErrorData> {
    context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Admitted>())
        .cloned()
        .ok_or_else(|| {
            tracing::error!("MCP request reached the handler without admission");
            ErrorData::internal_error("internal error", None)
        })
}

/// The client's call key (MCP-22). rmcp moves a request's `_meta` into the context; it is read
/// from the params too, should a transport leave it there.
fn call_key(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<Option<CallKey>, ErrorData> {
    let in_params = request.meta.as_ref().map(|m| &m.0.0);
    let meta = in_params.filter(|m| m.contains_key(CALL_KEY_META));
    CallKey::from_meta(meta.or(Some(&context.meta.0.0)))
        .map_err(|why| ErrorData::invalid_params(why, None))
}

/// `invocation_id` (a string; a number is accepted and read as its digits) and the wait,
/// capped at [`MAX_AWAIT`].
fn await_arguments(arguments: &Map<String, Value>) -> Result<(String, Duration), String> {
    let invocation_id = match arguments.get("invocation_id") {
        Some(Value::String(id)) if !id.is_empty() => id.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(_) => return Err("invocation_id must be a string".into()),
        None => return Err("invocation_id is required".into()),
    };
    let wait = match arguments.get("wait_seconds") {
        None | Some(Value::Null) => MAX_AWAIT,
        Some(Value::Number(n)) => match n.as_u64() {
            Some(secs) => Duration::from_secs(secs).min(MAX_AWAIT),
            None => return Err("wait_seconds must be a whole number of seconds, 0 or more".into()),
        },
        Some(_) => return Err("wait_seconds must be an integer".into()),
    };
    Ok((invocation_id, wait))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    #[test]
    fn await_waits_at_most_25_seconds() {
        let (id, wait) = await_arguments(&args(json!({"invocation_id": "i1"}))).unwrap();
        assert_eq!((id.as_str(), wait), ("i1", MAX_AWAIT));
        let (_, wait) =
            await_arguments(&args(json!({"invocation_id": "i1", "wait_seconds": 600}))).unwrap();
        assert_eq!(wait, MAX_AWAIT);
        let (id, wait) =
            await_arguments(&args(json!({"invocation_id": 42, "wait_seconds": 0}))).unwrap();
        assert_eq!((id.as_str(), wait), ("42", Duration::ZERO));
        assert!(await_arguments(&args(json!({"wait_seconds": 1}))).is_err());
        assert!(await_arguments(&args(json!({"invocation_id": "i", "wait_seconds": -1}))).is_err());
    }
}
