//! Errors of the HTTP surfaces, mapped in one place, exhaustively: a client error says what
//! to do; an internal error says "internal error" and is logged with its source.

use airlock_ledger::LedgerError;
use airlock_runtime::GatewayError;
use airlock_runtime::agent::AgentError;
use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// An error answered as `{"error": code, "message": …}`, with any fields a program needs
/// beside the message (such as the `run_id` a busy session is running).
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    fields: Vec<(&'static str, serde_json::Value)>,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            fields: Vec::new(),
        }
    }

    /// The error with one more field in its body.
    pub(crate) fn with(mut self, key: &'static str, value: impl Into<serde_json::Value>) -> Self {
        self.fields.push((key, value.into()));
        self
    }

    /// Its code (`already_decided`, `not_found`, …).
    pub(crate) fn code(&self) -> &'static str {
        self.code
    }

    /// What it says to the caller.
    pub(crate) fn message(&self) -> &str {
        &self.message
    }

    pub(crate) fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a valid admin bearer token is required (configure [[admin.tokens]]; with none, the API is closed)",
        )
    }

    pub(crate) fn unauthorized_caller() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "send `Authorization: Bearer <token>` with a token of [[mcp.tokens]] in airlock.toml granted this agent (with none configured, agents cannot be run over HTTP)",
        )
    }

    pub(crate) fn internal(error: &dyn std::error::Error) -> Self {
        tracing::error!(error = %error, source = ?error.source(), "internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error",
        )
    }

    /// The HTTP status it answers with.
    pub(crate) fn status(&self) -> StatusCode {
        self.status
    }

    /// The JSON body, `{"error": code, "message": …}`.
    pub(crate) fn body(&self) -> serde_json::Value {
        let mut body = serde_json::Map::new();
        body.insert("error".into(), self.code.into());
        body.insert("message".into(), self.message.clone().into());
        for (key, value) in &self.fields {
            body.insert((*key).into(), value.clone());
        }
        body.into()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body())).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

impl From<LedgerError> for ApiError {
    fn from(e: LedgerError) -> Self {
        let message = e.to_string();
        match e {
            LedgerError::NotFound(_)
            | LedgerError::SessionNotFound(_)
            | LedgerError::RunNotFound(_) => Self::new(StatusCode::NOT_FOUND, "not_found", message),
            LedgerError::WrongState { .. }
            | LedgerError::RunWrongState { .. }
            | LedgerError::Taken { .. }
            | LedgerError::AlreadyFinished { .. }
            | LedgerError::LeaseLost { .. } => {
                Self::new(StatusCode::CONFLICT, "wrong_state", message)
            }
            LedgerError::AlreadyDecided { .. } => {
                Self::new(StatusCode::CONFLICT, "already_decided", message)
            }
            LedgerError::RequestStateUsed { .. } => {
                Self::new(StatusCode::CONFLICT, "request_state_used", message)
            }
            LedgerError::Expired { .. } => Self::new(StatusCode::GONE, "expired", message),
            LedgerError::RunClosed { .. } => Self::new(StatusCode::CONFLICT, "run_closed", message),
            LedgerError::DecisionRefused { .. } => {
                Self::new(StatusCode::CONFLICT, "decision_refused", message)
            }
            LedgerError::SessionBusy { .. } => {
                Self::new(StatusCode::CONFLICT, "session_busy", message)
            }
            LedgerError::Invalid(_) => Self::new(StatusCode::BAD_REQUEST, "invalid", message),
            LedgerError::Corrupt { .. }
            | LedgerError::Closed
            | LedgerError::Database(_)
            | LedgerError::Migrate(_) => Self::internal(&e),
        }
    }
}

impl From<GatewayError> for ApiError {
    fn from(e: GatewayError) -> Self {
        match e {
            GatewayError::UnknownTool(_) | GatewayError::UnknownScope(_) => {
                Self::new(StatusCode::NOT_FOUND, "not_found", e.to_string())
            }
            GatewayError::CallIdReused { .. } => {
                Self::new(StatusCode::CONFLICT, "call_id_reused", e.to_string())
            }
            GatewayError::BadEdit { .. } => Self::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "bad_arguments",
                e.to_string(),
            ),
            GatewayError::Ledger(inner) => inner.into(),
        }
    }
}

impl From<AgentError> for ApiError {
    fn from(e: AgentError) -> Self {
        let message = e.to_string();
        match e {
            AgentError::UnknownAgent(_) | AgentError::RunNotFound(_) => {
                Self::new(StatusCode::NOT_FOUND, "not_found", message)
            }
            AgentError::UnknownSession(_) => {
                Self::new(StatusCode::NOT_FOUND, "unknown_session", message)
            }
            // Another principal's (or agent's) session is answered as one that does not exist:
            // a caller learns nothing of sessions that are not its own (AGENT-68).
            AgentError::ForeignSession(session) => Self::new(
                StatusCode::NOT_FOUND,
                "unknown_session",
                AgentError::UnknownSession(session).to_string(),
            ),
            AgentError::SessionBusy { run, .. } => {
                Self::new(StatusCode::CONFLICT, "session_busy", message)
                    .with("run_id", run.to_string())
            }
            AgentError::RunEnded { .. } => Self::new(StatusCode::CONFLICT, "run_ended", message),
            AgentError::BadRequest(_) => Self::new(StatusCode::BAD_REQUEST, "bad_body", message),
            AgentError::Ledger(inner) => inner.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use airlock_ledger::{RunId, SessionId};
    use airlock_runtime::agent::RunState;

    use super::*;

    #[test]
    fn every_agent_error_has_its_status_and_code() {
        let (session, run) = (SessionId::new(), RunId::new());
        let cases = [
            (AgentError::UnknownAgent("x".into()), 404, "not_found"),
            (AgentError::RunNotFound(run), 404, "not_found"),
            (AgentError::UnknownSession(session), 404, "unknown_session"),
            (
                AgentError::SessionBusy { session, run },
                409,
                "session_busy",
            ),
            (AgentError::ForeignSession(session), 404, "unknown_session"),
            (
                AgentError::RunEnded {
                    run,
                    status: RunState::Completed,
                },
                409,
                "run_ended",
            ),
            (AgentError::BadRequest("b".into()), 400, "bad_body"),
            (
                AgentError::Ledger(LedgerError::RunNotFound(run)),
                404,
                "not_found",
            ),
        ];
        for (error, status, code) in cases {
            let api = ApiError::from(error);
            assert_eq!((api.status.as_u16(), api.code), (status, code), "{api:?}");
        }
    }

    #[test]
    fn a_foreign_session_reads_as_an_unknown_one() {
        let session = SessionId::new();
        assert_eq!(
            ApiError::from(AgentError::ForeignSession(session)).body(),
            ApiError::from(AgentError::UnknownSession(session)).body()
        );
    }

    #[test]
    fn a_busy_session_names_the_running_run() {
        let (session, run) = (SessionId::new(), RunId::new());
        let body = ApiError::from(AgentError::SessionBusy { session, run }).body();
        assert_eq!(body["run_id"], run.to_string());
        assert!(
            body["message"].as_str().unwrap().contains(&run.to_string()),
            "{body}"
        );
    }
}
