//! The run API (docs/rules.md AGENT-40 … AGENT-49): `POST /v1/agents/{name}/run` runs an agent
//! to its end — completed, parked or failed — and answers its report; `GET /v1/runs/{id}` reads a
//! run back at any time, also after a restart; `POST /v1/runs/{id}/cancel` cancels one. The
//! WebSocket twin is [`ws`].
//!
//! Guarantees: deny by default (a caller token granted `agent:<name>`, AGENT-40); a bad body is a
//! precise 400/413/415 before anything is recorded (AGENT-41); a run, once started, runs to its
//! end even if the HTTP client goes away (its report stays readable); the answer always carries
//! `proposals` (AGENT-44). Statuses: 404 unknown agent or run, 409 a session with a run in
//! progress (naming it), 400 a body or id that does not parse.

pub(crate) mod body;
mod ws;

use airlock_ledger::RunId;
use airlock_mcp::Caller;
use airlock_runtime::agent::{RunConnection, RunReport, RunRequest};
use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::AppState;
use super::auth::{agent_caller, run_reader};
use super::error::ApiError;
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

/// `POST /v1/agents/{name}/run`.
async fn start(
    State(state): State<AppState>,
    Path(agent): Path<String>,
    headers: HeaderMap,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Json<RunReport>, ApiError> {
    let caller = agent_caller(&state, &headers, &agent)?;
    let bytes = bytes.map_err(|r| too_large_or_bad(&r))?;
    let body = body::parse_http(&headers, &bytes)?;
    let request = run_request(agent, caller, body);
    // The run goes on in its own task: a client that hangs up does not cut a step in half,
    // and the finished run is read back with GET /v1/runs/{id}.
    let agents = state.agents.clone();
    let run =
        tokio::spawn(async move { agents.run(request, None, CancellationToken::new()).await });
    let report = run.await.map_err(|e| ApiError::internal(&e))??;
    Ok(Json(report))
}

/// `GET /v1/runs/{id}`.
async fn show(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<RunReport>, ApiError> {
    let report = readable_run(&state, &headers, &id).await?;
    Ok(Json(report))
}

/// `POST /v1/runs/{id}/cancel`.
async fn cancel(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<RunReport>, ApiError> {
    let run = readable_run(&state, &headers, &id).await?;
    let report = state.agents.cancel(run.run_id).await?;
    Ok(Json(report))
}

/// The run `id` names, if the request may see it: any valid token first (401), then the run
/// (400 malformed id, 404 unknown), then the token's grant of the run's agent (403).
async fn readable_run(
    state: &AppState,
    headers: &HeaderMap,
    id: &str,
) -> Result<RunReport, ApiError> {
    super::auth::any_token(state, headers)?;
    let id: RunId = id.parse().map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_id",
            format!("`{}` is not a run id", id.escape_debug()),
        )
    })?;
    let report = state.agents.read(id).await?;
    run_reader(state, headers, &report.agent)?;
    Ok(report)
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
