//! `GET /v1/agents/{name}/ws` (docs/rules.md AGENT-50, AGENT-51): a run over a WebSocket. The
//! client sends one text frame, the run request (`{input, session_id?, context?,
//! connections?}`); the server sends the run's events as JSON text frames in the order they
//! happen — `status`, `token`, `tool_call`, `tool_result`, `approval_required` — and `done` last,
//! then closes normally (1000, the reason being how the run ended: `completed`, `failed`, …). A
//! run that parks has not ended: its last events are `approval_required` and `status: parked`,
//! and the close's reason is `parked`.
//!
//! Guarantees: the same bearer authentication as the run API, checked before the upgrade (401,
//! 403 as plain HTTP answers); a request that cannot run is one `{"type": "error", status,
//! error, message}` frame and a close with code 4000 + the HTTP status the run API would have
//! answered (4400, 4404, 4409, …); a client that disconnects — or sends nothing within
//! [`FIRST_FRAME_WITHIN`] — before `done` cancels its run, which is recorded as cancelled while
//! its parked calls stay parked.

use std::time::Duration;

use airlock_egress::trace::within_owned;
use airlock_mcp::Caller;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use opentelemetry::Context;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::body::{self, MAX_BODY_BYTES, RunBody};
use super::run_request;
use crate::http::AppState;
use crate::http::auth::agent_caller;
use crate::http::error::ApiError;
use crate::http::trace;
use crate::result::run_state;

/// How long a client has, once upgraded, to send its run request.
const FIRST_FRAME_WITHIN: Duration = Duration::from_secs(30);
/// Events buffered between the run and a slow client; beyond it the run waits for the client.
const EVENTS_BUFFER: usize = 64;

/// Authenticates, then upgrades.
pub(super) async fn upgrade(
    State(state): State<AppState>,
    Path(agent): Path<String>,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let path = format!("/v1/agents/{agent}/ws");
    let cx = trace::server(&state, &headers, "GET", "/v1/agents/{name}/ws", path);
    let accepted = agent_caller(&state, &headers, &agent).and_then(|caller| {
        let upgrade =
            upgrade.map_err(|r| ApiError::new(r.status(), "not_a_websocket", r.body_text()))?;
        Ok((caller, upgrade))
    });
    let (caller, upgrade) = match accepted {
        Ok(accepted) => accepted,
        Err(error) => {
            trace::answered(cx.as_ref(), error.status());
            return Err(error);
        }
    };
    // The span lasts as long as the socket: the run under it is the request's work.
    Ok(upgrade
        .max_message_size(MAX_BODY_BYTES)
        .on_upgrade(move |socket| async move {
            session(socket, state, agent, caller, cx.clone()).await;
            trace::answered(cx.as_ref(), StatusCode::SWITCHING_PROTOCOLS);
        }))
}

/// One WebSocket: its request, its run (in the request's trace), its events.
async fn session(
    mut socket: WebSocket,
    state: AppState,
    agent: String,
    caller: Caller,
    cx: Option<Context>,
) {
    let body = match request(&mut socket).await {
        Ok(Some(body)) => body,
        Ok(None) => return,
        Err(error) => return refuse(socket, &error).await,
    };
    let request = run_request(agent, caller, body);
    let (events_tx, mut events) = mpsc::channel(EVENTS_BUFFER);
    let cancel = CancellationToken::new();
    let agents = state.agents.clone();
    let token = cancel.clone();
    let running = async move { agents.run(request, Some(events_tx), token).await };
    let run = tokio::spawn(within_owned(cx, running));
    // Stopping the run on every way out before `done`: the guard cancels when dropped.
    let guard = cancel.drop_guard();
    loop {
        tokio::select! {
            event = events.recv() => match event {
                Some(event) => {
                    let frame = serde_json::to_string(&event).unwrap_or_default();
                    if socket.send(Message::Text(frame.into())).await.is_err() {
                        return;
                    }
                }
                // Every sender is gone: the run has returned, and every event was sent.
                None => break,
            },
            message = socket.recv() => match message {
                None | Some(Err(_) | Ok(Message::Close(_))) => return,
                Some(Ok(_)) => {}
            },
        }
    }
    guard.disarm();
    match run.await {
        // The close says how the run ended; a parked run has no `done` (it has not ended), and
        // resumes, once decided, wherever it is claimed.
        Ok(Ok(report)) => close(socket, 1000, run_state(report.status)).await,
        Ok(Err(error)) => refuse(socket, &ApiError::from(error)).await,
        Err(error) => refuse(socket, &ApiError::internal(&error)).await,
    }
}

/// The first text frame as a run request; `None` when the client left without one.
async fn request(socket: &mut WebSocket) -> Result<Option<RunBody>, ApiError> {
    let first = tokio::time::timeout(FIRST_FRAME_WITHIN, async {
        loop {
            match socket.recv().await {
                None | Some(Err(_) | Ok(Message::Close(_))) => return None,
                Some(Ok(Message::Text(text))) => return Some(text.as_bytes().to_vec()),
                Some(Ok(Message::Binary(bytes))) => return Some(bytes.to_vec()),
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            }
        }
    })
    .await;
    match first {
        Ok(Some(bytes)) => body::parse_json(&bytes).map(Some),
        Ok(None) => Ok(None),
        Err(_) => Err(ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "timeout",
            format!(
                "send the run request as the first frame within {} s",
                FIRST_FRAME_WITHIN.as_secs()
            ),
        )),
    }
}

/// One error frame, then a close with code 4000 + the HTTP status.
async fn refuse(mut socket: WebSocket, error: &ApiError) {
    let frame = error_frame(error);
    let _ = socket.send(Message::Text(frame.to_string().into())).await;
    close(socket, 4000 + error.status().as_u16(), "refused".into()).await;
}

fn error_frame(error: &ApiError) -> Value {
    let mut frame = json!({"type": "error", "status": error.status().as_u16()});
    if let (Some(frame), Value::Object(body)) = (frame.as_object_mut(), error.body()) {
        frame.extend(body);
    }
    frame
}

async fn close(mut socket: WebSocket, code: u16, reason: String) {
    let frame = CloseFrame {
        code,
        reason: reason.into(),
    };
    let _ = socket.send(Message::Close(Some(frame))).await;
}
