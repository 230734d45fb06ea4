//! airlock's MCP endpoint: any MCP client calls the tools of a [`ToolHost`] over Streamable HTTP.
//!
//! Guarantees:
//! - `POST /mcp` serves [`ScopeId::Gateway`], `POST /agents/{name}/mcp` serves
//!   [`ScopeId::Agent`]; a `GET` carrying a session id is that session's stream of resource
//!   updates (`session_watch`, docs/rules.md MCP-98), and every other method answers 405 (no
//!   DELETE: the session id is a sealed record, nothing kept that a client could end).
//! - Before anything is parsed, the `Host` and any `Origin` must name an allowed host (403
//!   otherwise, a DNS-rebinding guard), and a bearer token must match one configured token in
//!   constant time, or be an OAuth access token accepted by the [`ResourceServer`] (401 with
//!   `WWW-Authenticate: Bearer` and a JSON-RPC body otherwise; with OAuth, the challenge names
//!   the RFC 9728 metadata). With neither configured every request is refused.
//! - A body that is not JSON is a 400 with a JSON-RPC parse error; replies are plain JSON,
//!   except a `tools/call` whose upstream's progress or log messages are relayed to it: an
//!   event stream of those messages, then the result (`notices`, docs/rules.md MCP-63); and a
//!   2026-07-28 `subscriptions/listen`, whose stream carries resource updates for as long as
//!   the client holds it (`subscriptions`, MCP-92); and a session-era `tools/call` whose
//!   upstream asks the client (`on_stream`, MCP-94).
//! - Session-era clients (`initialize`, 2025-06-18 / 2025-11-25) and 2026-07-28 clients
//!   (`server/discover`, per-request `_meta`, `resultType`) are both served; rmcp's stateless
//!   Streamable HTTP service does the protocol checks, `handler` does the translation.
//! - Every request goes through one pipeline of steps, in this order: admission (`admit`,
//!   which waits for the body's share of the endpoint's body budget, `budget`, then reads and
//!   parses the body, once), a session's subscriptions and stream (`session_watch`), a
//!   client's answer to an upstream's question (`on_stream`), the `Mcp-Param-*` check
//!   (`param_headers`), the 2025 task shape (`legacy_tasks`), a call whose upstream may ask
//!   the client (`on_stream`), the plain call (`plain`), then rmcp, whose `initialize` answer
//!   gets the session id (`sessions`, MCP-95). Each step before rmcp either answers or hands on
//!   the same parsed [`AdmittedRequest`]; only rmcp gets the body bytes.
//! - A parked call is a normal result that no model can read as success, with the
//!   `airlock_await_decision` tool to wait for it; a failed call is always `isError: true`.
//! - A 2026-07-28 client that declares elicitation is asked, through an input request, what
//!   its own person may settle (`ask_human`'s question, a tool declared `approval: caller`)
//!   instead of getting the parked payload; the retry carries a sealed `requestState`
//!   (`mrtr`, `request_state`).
//! - Clients that opt into MCP Tasks get the parked call as a task instead (the ledger row is
//!   the task): the 2026-07-28 extension through rmcp (`handler`), the 2025-11-25 experimental
//!   shape through `legacy_tasks`.
//! - A `tools/list` answer is `Cache-Control: private`: it is filtered for its caller; so are
//!   the lists of resources, templates and prompts, and a resource read (`offered`).
//! - A 2026-07-28 `tools/call` whose `Mcp-Param-*` headers disagree with the arguments they
//!   mirror is refused before anything is recorded (`param_headers`).

mod admit;
mod budget;
mod convert;
mod elicited;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod handler;
mod legacy_tasks;
mod mrtr;
mod no_oauth;
mod notices;
mod oauth_admit;
mod offer_rounds;
mod offered;
mod on_stream;
mod param_headers;
mod plain;
mod request;
mod request_state;
mod resource_metadata;
mod session_watch;
mod sessions;
mod subscriptions;
mod tasks;
mod tool_rounds;
mod trace;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::middleware::{Next, from_fn_with_state};
use axum::response::Response;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use secrecy::SecretString;

use crate::host::ToolHost;
use crate::oauth::ResourceServer;
use admit::Gate;
use airlock_egress::trace::RequestTracer;
use handler::Endpoint;
use legacy_tasks::Legacy;
use request::AdmittedRequest;

pub use convert::AWAIT_TOOL;
pub use request_state::{RequestStateKey, RequestStates};

use airlock_spec::ScopeId;

/// The longest a single `airlock_await_decision` call waits, whatever the client asks: short
/// enough for every client's request timeout, long enough that polling is cheap.
pub const MAX_AWAIT: std::time::Duration = std::time::Duration::from_secs(25);

/// One accepted bearer token.
#[derive(Debug, Clone)]
pub struct EndpointToken {
    /// The token itself.
    pub token: SecretString,
    /// The principal recorded on every call made with it.
    pub principal: String,
    /// The groups its principal belongs to (`[[access]]` rules match them).
    pub groups: Vec<String>,
    /// The scopes it may call; `None`: every scope.
    pub scopes: Option<Vec<ScopeId>>,
}

/// Who may call the endpoint, and under which names it may be reached.
#[derive(Debug, Clone, Default)]
pub struct EndpointConfig {
    /// Bearer tokens, each with the principal it authenticates. Empty: every request is refused.
    pub tokens: Vec<EndpointToken>,
    /// Host names (`example.com`, any port) or authorities (`example.com:8443`) the `Host` and
    /// `Origin` headers may name. Empty: loopback only (`localhost`, `127.0.0.1`, `::1`).
    pub allowed_hosts: Vec<String>,
    /// `[telemetry]`'s tracer: each `tools/call` gets a server span (OPS-23). `None`: no
    /// request is traced.
    pub tracer: Option<RequestTracer>,
    /// How input requests' `requestState`s are sealed (docs/rules.md MCP-48). `None`: the
    /// endpoint sends no input requests, and every call that needs a person parks.
    pub request_states: Option<RequestStates>,
    /// `[mcp.oauth]`: OAuth access tokens accepted beside `tokens`, and the RFC 9728 metadata
    /// served. `None`: configured tokens only.
    pub oauth: Option<ResourceServer>,
}

/// The axum router of the endpoint: `POST /mcp` and `POST /agents/{name}/mcp`, stateless,
/// plain JSON, and the OAuth discovery paths: the protected resource metadata when
/// `config.oauth` is set, otherwise answered with the header to send instead. Merge it into
/// the server's app; it needs no state of its own.
pub fn router(host: Arc<dyn ToolHost>, config: EndpointConfig) -> Router {
    if config.tokens.is_empty() && config.oauth.is_none() {
        tracing::warn!("the MCP endpoint has no tokens configured: every request is refused");
    }
    // Host and Origin are checked by `admit`, once, before auth; rmcp's own check would only
    // repeat it with slightly different matching rules.
    let rmcp_config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_sse_retry(None)
        .with_max_request_body_bytes(budget::MAX_BODY_BYTES)
        .disable_allowed_hosts();
    let endpoint = Endpoint::new(host.clone(), config.request_states.clone());
    let handler = endpoint.clone();
    let service = StreamableHttpService::new(
        move || Ok(endpoint.clone()),
        Arc::new(NeverSessionManager::default()),
        rmcp_config,
    );
    let tracer = config.tracer.clone();
    let discovery = match &config.oauth {
        Some(oauth) => resource_metadata::router(oauth.clone(), host)
            .merge(no_oauth::router(Some(oauth.issuer()))),
        None => no_oauth::router(None),
    };
    let pipeline = Arc::new(Pipeline {
        gate: Gate::new(config),
        handler,
        subscribed: session_watch::Subscribed::default(),
    });
    let gateway = Router::new()
        .route_service("/mcp", service.clone())
        .route_layer(from_fn_with_state(pipeline.clone(), gateway));
    let agents = Router::new()
        .route_service("/agents/{name}/mcp", service)
        .route_layer(from_fn_with_state(pipeline, agent));
    let endpoint = gateway.merge(agents);
    // The tracer rides in each request's extensions to the handler, which starts the span.
    let endpoint = match tracer {
        Some(tracer) => endpoint.layer(axum::Extension(tracer)),
        None => endpoint,
    };
    endpoint.merge(discovery)
}

/// What the steps before rmcp need.
struct Pipeline {
    gate: Gate,
    /// The handler rmcp clones per request: its host for the steps, and itself for the calls
    /// answered without rmcp (`plain`).
    handler: Endpoint,
    /// What session-era clients subscribe to, in this process (MCP-98).
    subscribed: session_watch::Subscribed,
}

/// The pipeline of `POST /mcp`.
async fn gateway(State(pipeline): State<Arc<Pipeline>>, request: Request, rmcp: Next) -> Response {
    pipeline.run(ScopeId::Gateway, request, rmcp).await
}

/// The pipeline of `POST /agents/{name}/mcp`.
async fn agent(
    State(pipeline): State<Arc<Pipeline>>,
    Path(name): Path<String>,
    request: Request,
    rmcp: Next,
) -> Response {
    pipeline.run(ScopeId::Agent(name), request, rmcp).await
}

impl Pipeline {
    async fn run(&self, scope: ScopeId, request: Request, rmcp: Next) -> Response {
        let (request, _share) = match admit::admit(&self.gate, scope, request).await {
            Ok(admitted) => admitted,
            Err(refusal) => return *refusal,
        };
        // The body's share of the budget is held until the answer is built (OPS-54).
        self.serve(request, rmcp).await
    }

    /// The steps after admission, each reading the request admission parsed.
    async fn serve(&self, request: AdmittedRequest, rmcp: Next) -> Response {
        let host = self.handler.host();
        let states = self.handler.request_states();
        let mut session = match sessions::carried(states, &request) {
            Ok(session) => session,
            Err(gone) => return *gone,
        };
        let key = session.as_ref().map(|s| s.key.as_str());
        let watch = (&self.subscribed, key);
        if let Some(answered) = session_watch::step(&self.handler, watch, &request).await {
            return answered;
        }
        if let Some((row, answer)) = on_stream::client_answer(&request) {
            return on_stream::settle(&self.handler, (&request, key), &row, answer).await;
        }
        if let Err(mismatch) = param_headers::check(host, &request) {
            return *mismatch;
        }
        let edit = match legacy_tasks::step(host, &request).await {
            Legacy::Answered(response) => return response,
            Legacy::ToRmcp(edit) => edit,
        };
        let levels = self.handler.levels();
        if edit.is_none()
            && let Some(id) = on_stream::asking_call(&request, session.as_ref())
            && let Some(session) = session.take()
        {
            return on_stream::answer(&self.handler, request, id, session).await;
        }
        if edit.is_none()
            && let Some(id) = plain::plain_id(&request, levels)
        {
            return plain::answer(&self.handler, request, id).await;
        }
        // A session-era client gets a session id naming what it declared (MCP-95).
        let issued = match (request.method(), states) {
            ("initialize", Some(states)) => sessions::issue(
                states,
                request.admitted(),
                &request.params()["capabilities"],
            ),
            _ => None,
        };
        // Every list, and a read, is filtered for its caller (MCP-58).
        let lists_tools = matches!(
            request.method(),
            "tools/list"
                | "resources/list"
                | "resources/templates/list"
                | "resources/read"
                | "prompts/list"
                | "skills/list"
                | "skills/get"
        );
        let response = rmcp.run(request.into_rmcp()).await;
        let mut response = match edit {
            Some(edit) => legacy_tasks::decorate(response, edit).await,
            None => response,
        };
        if let Some(id) = issued.filter(|_| response.status() == StatusCode::OK) {
            response.headers_mut().insert(sessions::HEADER, id);
        }
        if lists_tools {
            // The list depends on who asks (their token's scopes, `[[access]]`): no shared
            // cache may answer another caller with it (docs/rules.md POLICY-46).
            response.headers_mut().insert(
                axum::http::header::CACHE_CONTROL,
                axum::http::HeaderValue::from_static("private"),
            );
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The steps between admission and rmcp take the request admission parsed, and the body
    /// bytes are reachable only through `AdmittedRequest::into_rmcp`: a step that wanted to
    /// parse the body again would have to change these signatures first.
    #[test]
    fn the_steps_after_admission_take_the_parsed_request() {
        fn legacy<'a, F: Future<Output = Legacy> + 'a>(
            _: fn(&'a dyn ToolHost, &'a AdmittedRequest) -> F,
        ) {
        }
        let _: fn(&dyn ToolHost, &AdmittedRequest) -> Result<(), Box<Response>> =
            param_headers::check;
        legacy(legacy_tasks::step);
        let _: fn(AdmittedRequest) -> Request = AdmittedRequest::into_rmcp;
    }
}
