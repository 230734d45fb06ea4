//! The run API (docs/rules.md AGENT-40 … AGENT-48, AGENT-67 … AGENT-70): `POST
//! /v1/agents/{name}/run` runs an agent to its end — completed, parked or failed — and answers
//! its report; `GET /v1/runs/{id}` reads a run back at any time, also after a restart; `POST
//! /v1/runs/{id}/cancel` cancels one. The WebSocket twin is [`ws`].
//!
//! Guarantees: deny by default (a caller token granted `agent:<name>`, AGENT-40); a bad body is a
//! precise 400/413/415 before anything is recorded (AGENT-41); a run, once started, runs to its
//! end even if the HTTP client goes away (its report stays readable); the answer always carries
//! `proposals` (AGENT-44); a run is read and cancelled only by the principal that started it or
//! an admin — to anyone else it is a run nobody recorded (AGENT-67, AGENT-70). Statuses: 404
//! unknown agent or run (or another principal's), 409 a session with a run in progress (naming
//! it), 400 a body or id that does not parse. With `[telemetry]` a run request is a server span
//! continuing the caller's `traceparent`, the run's spans under it (OPS-80, [`super::trace`]).

pub(crate) mod body;
mod ws;

use airlock_egress::trace::within_owned;
use airlock_ledger::{InvocationId, LedgerError, RunId};
use airlock_mcp::Caller;
use airlock_runtime::agent::{AgentError, RunConnection, RunReport, RunRequest};
use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use opentelemetry::Context;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::AppState;
use super::auth::{RunRequester, agent_caller, run_requester};
use super::error::ApiError;
use super::trace;
use body::{MAX_BODY_BYTES, RunBody};

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/agents/{name}/run",
            post(start).layer(DefaultBodyLimit::max(MAX_BODY_BYTES)),
        )
        .route("/agents/{name}/ws", get(ws::upgrade))
        .route("/runs/{id}", get(show))
        .route("/runs/{id}/cancel", post(cancel))
}

/// `POST /v1/agents/{name}/run`, its server span around it (OPS-80).
async fn start(
    State(state): State<AppState>,
    Path(agent): Path<String>,
    headers: HeaderMap,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Json<RunReport>, ApiError> {
    let path = format!("/v1/agents/{agent}/run");
    let cx = trace::server(&state, &headers, "POST", "/v1/agents/{name}/run", path);
    let answer = run(state, agent, &headers, bytes, cx.clone()).await;
    let status = answer
        .as_ref()
        .map_or_else(ApiError::status, |_| StatusCode::OK);
    trace::answered(cx.as_ref(), status);
    answer
}

async fn run(
    state: AppState,
    agent: String,
    headers: &HeaderMap,
    bytes: Result<Bytes, BytesRejection>,
    cx: Option<Context>,
) -> Result<Json<RunReport>, ApiError> {
    let caller = agent_caller(&state, headers, &agent)?;
    let bytes = bytes.map_err(|r| too_large_or_bad(&r))?;
    let body = body::parse_http(headers, &bytes)?;
    let request = run_request(agent, caller, body);
    // The run goes on in its own task: a client that hangs up does not cut a step in half,
    // and the finished run is read back with GET /v1/runs/{id}.
    let agents = state.agents.clone();
    let running = async move { agents.run(request, None, CancellationToken::new()).await };
    let run = tokio::spawn(within_owned(cx, running));
    let report = run.await.map_err(|e| ApiError::internal(&e))??;
    Ok(Json(report))
}

/// `GET /v1/runs/{id}`.
async fn show(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<RunReport>, ApiError> {
    let id = reachable_run(&state, &headers, &id).await?;
    Ok(Json(state.agents.read(id).await?))
}

/// `POST /v1/runs/{id}/cancel`.
async fn cancel(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<RunReport>, ApiError> {
    let id = reachable_run(&state, &headers, &id).await?;
    Ok(Json(state.agents.cancel(id).await?))
}

/// The run `id` names, if the request may reach it: an admin or caller token first (401), then
/// the id (400), then the run's principal — a run nobody recorded and another principal's run
/// are the same 404 (AGENT-67, AGENT-70).
async fn reachable_run(state: &AppState, headers: &HeaderMap, id: &str) -> Result<RunId, ApiError> {
    let requester = run_requester(state, headers)?;
    let id: RunId = id.parse().map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_id",
            format!("`{}` is not a run id", id.escape_debug()),
        )
    })?;
    let owner = state.agents.principal(id).await?;
    if !requester.owns(owner.as_deref()) {
        // The operator hears what the caller is not told.
        tracing::warn!(run = %id, ?requester, "run refused: another principal started it");
        return Err(AgentError::RunNotFound(id).into());
    }
    if let RunRequester::Caller(_) = requester {
        // Its own run, through a token still granted the run's agent (AGENT-40): a token
        // scoped to the gateway or to another agent reaches none of that agent's runs.
        let run = state
            .gateway
            .store()
            .get_run(id)
            .await
            .map_err(ApiError::from)?;
        agent_caller(state, headers, &run.agent)?;
    }
    Ok(id)
}

/// Whether `requester` may record the outcome of proposal `id` (DECIDE-13): an admin may record
/// any; a caller only a proposal of a run its principal started (AGENT-69). Every other row —
/// another principal's run's, a call made outside a run, an id nobody recorded — is the same
/// 404, so a caller learns nothing of calls that are not its own.
pub(super) async fn may_record(
    state: &AppState,
    requester: &RunRequester,
    id: InvocationId,
) -> Result<(), ApiError> {
    if let RunRequester::Admin(_) = requester {
        return Ok(());
    }
    let unknown = || ApiError::from(LedgerError::NotFound(id));
    let row = match state.gateway.store().get(id).await {
        Ok(row) => row,
        Err(LedgerError::NotFound(_)) => return Err(unknown()),
        Err(e) => return Err(e.into()),
    };
    // A call of a run carries its root run's id (AGENT-21), whose principal started the tree.
    let Some(run) = row.run_id else {
        return Err(unknown());
    };
    match state.agents.principal(run).await {
        Ok(owner) if requester.owns(owner.as_deref()) => Ok(()),
        Ok(_) | Err(AgentError::RunNotFound(_)) => {
            tracing::warn!(%id, %run, ?requester, "record refused: another principal's run proposed the call");
            Err(unknown())
        }
        Err(e) => Err(e.into()),
    }
}

/// A run request of `caller` from a parsed body: the run's connections live in memory only;
/// the caller's groups go with it, so `[[access]]` holds the run's calls (POLICY-47).
pub(super) fn run_request(agent: String, caller: Caller, body: RunBody) -> RunRequest {
    RunRequest {
        agent,
        input: body.input,
        session_id: body.session_id,
        context: body.context.map(Value::Object),
        connections: body
            .connections
            .into_iter()
            .map(|(name, c)| {
                let connection = RunConnection {
                    base_url: c.base_url.into(),
                    credential: c.credential,
                };
                (name, connection)
            })
            .collect(),
        principal: Some(caller.principal),
        groups: Some(caller.groups),
        proposals_enabled: true,
    }
}

/// A body that could not be read: over [`MAX_BODY_BYTES`] (413), or cut off (400).
fn too_large_or_bad(rejection: &BytesRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!("a run request is at most {MAX_BODY_BYTES} bytes"),
        )
    } else {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_body", rejection.body_text())
    }
}
