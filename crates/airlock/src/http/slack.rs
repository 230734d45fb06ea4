//! `POST /v1/slack/interactions`: Slack's button clicks on the cards airlock posted
//! (docs/rules.md NOTIFY-6). The runtime's verifier decides whether a click counts (signature,
//! window, replay, allow-list); a click that counts is a decision by `slack:<user id>` through
//! the one decisions path, and the card is replaced by the outbox like after any decision.
//!
//! Statuses: 404 Slack not configured, 401 unsigned, badly signed, stale or replayed, 403 a
//! user not on the allow-list, 400 a signed body that is no airlock click, then the decision's
//! own (409 already decided, 410 expired, …). Nothing is decided on any refusal.

use airlock_ledger::Decision;
use airlock_runtime::decisions;
use airlock_runtime::notify::ClickRefusal;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;

use super::AppState;
use super::error::ApiError;

/// The reason recorded with a denial from Slack (a button has no text field).
const DENIED_IN_SLACK: &str = "denied in Slack";

pub(super) fn router() -> Router<AppState> {
    Router::new().route("/slack/interactions", post(interact))
}

fn refused(refusal: &ClickRefusal) -> ApiError {
    let message = refusal.to_string();
    match refusal {
        ClickRefusal::Unsigned
        | ClickRefusal::BadSignature
        | ClickRefusal::Stale
        | ClickRefusal::Replayed => {
            ApiError::new(StatusCode::UNAUTHORIZED, "bad_signature", message)
        }
        ClickRefusal::NotADecider(_) => ApiError::new(StatusCode::FORBIDDEN, "forbidden", message),
        ClickRefusal::Malformed(_) => ApiError::new(StatusCode::BAD_REQUEST, "invalid", message),
    }
}

async fn interact(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    let Some(slack) = &state.slack else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "Slack is not configured ([notify.slack])",
        ));
    };
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let click = slack
        .verify(
            header("x-slack-request-timestamp"),
            header("x-slack-signature"),
            &body,
            now,
        )
        .map_err(|refusal| {
            tracing::warn!(%refusal, "Slack interaction refused");
            refused(&refusal)
        })?;
    let decision = if click.approve {
        Decision::Approve
    } else {
        Decision::Deny {
            reason: DENIED_IN_SLACK.to_owned(),
        }
    };
    let decider = format!("slack:{}", click.user);
    decisions::decide(
        &state.gateway,
        click.invocation,
        &decider,
        decision,
        "slack",
    )
    .await?;
    Ok(StatusCode::OK)
}
