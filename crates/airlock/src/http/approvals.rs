//! The decisions API: list what waits for a person, read a call, decide. The decider is the
//! authenticated admin; deciding writes the row and wakes waiters — execution happens through
//! the gateway's claim (here, a background task; the `serve` worker otherwise), never inline
//! in the request.
//!
//! A caller that executed a proposal itself records how it went (`/record`, DECIDE-13): the
//! same one compare-and-swap, so it and an approval cannot both win. The run's own caller may
//! record without an admin token, for its own runs' proposals only (AGENT-69).
//!
//! An approval may carry the arguments the call runs with instead of the proposed ones
//! (`{"arguments": {...}}`, DECIDE-20); they are checked against the tool before anything is
//! decided (DECIDE-21), and refused with 422 naming what is wrong.
//!
//! Statuses: 404 unknown id, 409 already decided (naming who) or wrong state, 410 expired,
//! 422 a body that is not the decision's shape (or a decision that cannot be taken as written,
//! such as abandoning without a reason), 400 a malformed id or query.

use airlock_ledger::{CallerOutcome, Decision, InvocationId, Resolution};
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

mod grant;

use super::AppState;
use super::auth::Admin;
use super::error::ApiError;
use crate::result::{approvals_json, invocation_json};
use airlock_runtime::decisions::pending;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/approvals", get(list))
        .route("/approvals/{id}/decision", post(decide_verb::<OneRoute>))
        .route("/approvals/decisions", post(decide_many))
        .route("/invocations/{id}", get(show))
        .route("/invocations/{id}/approve", post(approve))
        .route("/invocations/{id}/deny", post(decide_verb::<DenyBody>))
        .route("/invocations/{id}/answer", post(decide_verb::<AnswerBody>))
        .route(
            "/invocations/{id}/resolve",
            post(decide_verb::<ResolveBody>),
        )
        .route("/invocations/{id}/record", post(record))
}

/// Filters and paging of `GET /v1/approvals`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    /// `approval`, `question`, `proposal` or `in_doubt`.
    kind: Option<String>,
    tool: Option<String>,
    principal: Option<String>,
    /// Only calls made in this agent's scope.
    agent: Option<String>,
    /// Only rows at least this many seconds old.
    older_than: Option<u64>,
    limit: Option<u32>,
    offset: Option<u32>,
}

/// Body of `POST /v1/approvals/{id}/decision`.
#[derive(Debug, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case", deny_unknown_fields)]
enum DecisionBody {
    // A struct variant, so unknown fields (such as a self-chosen decider) are refused too.
    Approve {
        /// Edited arguments the call runs with instead (DECIDE-20).
        arguments: Option<Value>,
    },
    Deny {
        reason: String,
    },
    Answer {
        text: String,
    },
    /// `ran: bool` (the first form) or `outcome` (as on `/resolve`), exactly one of them.
    Resolve {
        ran: Option<bool>,
        outcome: Option<Outcome>,
        #[serde(alias = "reason")]
        note: String,
    },
}

/// A [`DecisionBody`] that names one decision (a body naming two ways to resolve is refused
/// as it is parsed, so it is a 422 like any other bad body).
#[derive(Debug, Deserialize)]
#[serde(try_from = "DecisionBody")]
struct OneRoute(Decision);

/// Body of `POST /v1/approvals/decisions` (DECIDE-19): one decision on several calls.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchBody {
    ids: Vec<String>,
    decision: BatchVerb,
    /// A denial's reason (the callers read it).
    reason: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum BatchVerb {
    Approve,
    Deny,
}

impl BatchBody {
    /// The decision it names, or what is wrong with it.
    fn decision(&self) -> Result<Decision, &'static str> {
        match (self.decision, &self.reason) {
            (BatchVerb::Approve, None) => Ok(Decision::Approve),
            (BatchVerb::Approve, Some(_)) => Err("an approval takes no reason"),
            (BatchVerb::Deny, Some(reason)) if !reason.trim().is_empty() => Ok(Decision::Deny {
                reason: reason.clone(),
            }),
            (BatchVerb::Deny, _) => Err("a denial needs a reason (the callers read it)"),
        }
    }
}

/// Body of `/approve` (may be empty): optionally a grant given with the approval (POLICY-62).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApproveBody {
    grant: Option<grant::GrantBody>,
    /// Edited arguments the call runs with instead (DECIDE-20).
    arguments: Option<Value>,
}

/// An approval, edited when it carries arguments (DECIDE-20).
fn approval(arguments: Option<Value>) -> Decision {
    arguments.map_or(Decision::Approve, |arguments| Decision::Edit { arguments })
}

/// Body of `/deny`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DenyBody {
    reason: String,
}

/// Body of `/answer`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerBody {
    text: String,
}

/// Body of `/resolve`: the note is the reason when the call is abandoned, so `reason` is
/// accepted for it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResolveBody {
    outcome: Outcome,
    #[serde(alias = "reason")]
    note: String,
}

/// Body of `/record` (docs/rules.md DECIDE-13): how a proposal the caller executed (or
/// rejected) itself went.
#[derive(Debug, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case", deny_unknown_fields)]
enum RecordBody {
    /// It ran; `result` is what it returned.
    Completed { result: Value },
    /// It ran and the tool reported an error.
    ToolError { message: String },
    /// The caller did not execute it.
    Rejected { reason: String },
}

impl From<RecordBody> for Decision {
    fn from(body: RecordBody) -> Self {
        let outcome = match body {
            RecordBody::Completed { result } => CallerOutcome::Completed { result },
            RecordBody::ToolError { message } => CallerOutcome::ToolError { message },
            RecordBody::Rejected { reason } => CallerOutcome::Rejected { reason },
        };
        Self::Record { outcome }
    }
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Outcome {
    Ran,
    DidNotRun,
    Abandoned,
}

impl From<Outcome> for Resolution {
    fn from(outcome: Outcome) -> Self {
        match outcome {
            Outcome::Ran => Self::Ran,
            Outcome::DidNotRun => Self::DidNotRun,
            Outcome::Abandoned => Self::Abandoned,
        }
    }
}

impl TryFrom<DecisionBody> for OneRoute {
    type Error = &'static str;

    fn try_from(body: DecisionBody) -> Result<Self, Self::Error> {
        Ok(Self(match body {
            DecisionBody::Approve { arguments } => approval(arguments),
            DecisionBody::Deny { reason } => Decision::Deny { reason },
            DecisionBody::Answer { text } => Decision::Answer { text },
            DecisionBody::Resolve { ran, outcome, note } => {
                let resolution = match (ran, outcome) {
                    (Some(true), None) => Resolution::Ran,
                    (Some(false), None) => Resolution::DidNotRun,
                    (None, Some(outcome)) => outcome.into(),
                    (Some(_), Some(_)) | (None, None) => {
                        return Err("resolve takes exactly one of `ran` and `outcome`");
                    }
                };
                Decision::Resolve { resolution, note }
            }
        }))
    }
}

impl From<OneRoute> for Decision {
    fn from(OneRoute(decision): OneRoute) -> Self {
        decision
    }
}

impl From<DenyBody> for Decision {
    fn from(DenyBody { reason }: DenyBody) -> Self {
        Self::Deny { reason }
    }
}

impl From<AnswerBody> for Decision {
    fn from(AnswerBody { text }: AnswerBody) -> Self {
        Self::Answer { text }
    }
}

impl From<ResolveBody> for Decision {
    fn from(ResolveBody { outcome, note }: ResolveBody) -> Self {
        Self::Resolve {
            resolution: outcome.into(),
            note,
        }
    }
}

async fn list(
    _admin: Admin,
    State(state): State<AppState>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(query) =
        query.map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "bad_query", e.body_text()))?;
    let kind = query
        .kind
        .as_deref()
        .map(str::parse::<pending::Waiting>)
        .transpose()
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "bad_query", e))?;
    let query = pending::Query {
        kind,
        tool: query.tool,
        principal: query.principal,
        agent: query.agent,
        older_than: query.older_than.map(std::time::Duration::from_secs),
        limit: query.limit,
        offset: query.offset,
        newest_first: false,
    };
    let page = pending::list(state.gateway.store().as_ref(), &query).await?;
    Ok(Json(approvals_json(&page)))
}

async fn show(
    _admin: Admin,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let row = state.gateway.store().get(parse_id(&id)?).await?;
    Ok(Json(invocation_json(&row)))
}

async fn approve(
    admin: Admin,
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(&id)?;
    let body = if body.iter().all(u8::is_ascii_whitespace) {
        ApproveBody {
            grant: None,
            arguments: None,
        }
    } else {
        parse_body(&body)?
    };
    let Some(given) = body.grant else {
        return apply(&state, &admin, id, approval(body.arguments)).await;
    };
    if body.arguments.is_some() {
        let problem = "an edited approval gives no grant: approve it, then grant the next";
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "bad_body",
            problem,
        ));
    }
    let grant = given
        .grant(state.max_grant)
        .map_err(|problem| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "bad_body", problem))?;
    let row = airlock_runtime::decisions::grant(&state.gateway, id, &admin.0, grant, "api").await?;
    Ok(Json(invocation_json(&row)))
}

/// `/approvals/{id}/decision` and the per-verb routes but `/approve` and `/record`: parse the id, then the body
/// `B` (in that order, so a malformed id is a 400 before a bad body is a 422), and apply the
/// decision it names.
async fn decide_verb<B: DeserializeOwned + Into<Decision>>(
    admin: Admin,
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(&id)?;
    let decision = parse_body::<B>(&body)?.into();
    apply(&state, &admin, id, decision).await
}

/// `POST /v1/approvals/decisions`: the ids first (400 for a malformed one), then the decision
/// (422), then all of them decided in one commit or none (the first refusal, as one decision's).
async fn decide_many(
    Admin(decider): Admin,
    State(state): State<AppState>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let body: BatchBody = parse_body(&body)?;
    let ids = body
        .ids
        .iter()
        .map(|id| parse_id(id))
        .collect::<Result<Vec<_>, _>>()?;
    let decision = body
        .decision()
        .map_err(|problem| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "bad_body", problem))?;
    let rows =
        airlock_runtime::decisions::decide_all(&state.gateway, ids, &decider, decision, "api")
            .await?;
    let decided: Vec<Value> = rows.iter().map(invocation_json).collect();
    Ok(Json(serde_json::json!({ "decided": decided })))
}

/// The one decision path of every route: the ledger's compare-and-swap by the admin.
async fn apply(
    state: &AppState,
    Admin(decider): &Admin,
    id: InvocationId,
    decision: Decision,
) -> Result<Json<Value>, ApiError> {
    if let Some(problem) = decision.problem() {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "bad_body",
            problem,
        ));
    }
    let row =
        airlock_runtime::decisions::decide(&state.gateway, id, decider, decision, "api").await?;
    Ok(Json(invocation_json(&row)))
}

/// A decision body, or 422 saying what is wrong with it.
fn parse_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "bad_body",
            format!("the request body is not a valid decision: {e}"),
        )
    })
}

fn parse_id(id: &str) -> Result<InvocationId, ApiError> {
    id.parse().map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_id",
            format!("`{id}` is not an invocation id"),
        )
    })
}

/// `/record` (DECIDE-13): by an admin, or by the caller whose run made the proposal, recorded
/// under its principal (AGENT-69); the id is checked before the body, as on the other routes.
async fn record(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let requester = super::auth::run_requester(&state, &headers)?;
    let id = parse_id(&id)?;
    super::runs::may_record(&state, &requester, id).await?;
    let decision = parse_body::<RecordBody>(&body)?.into();
    // The one decision path, with the requester's principal as the decider.
    apply(&state, &Admin(requester.into_principal()), id, decision).await
}
