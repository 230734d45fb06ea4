//! Errors of the HTTP surfaces, mapped in one place, exhaustively: a client error says what
//! to do; an internal error says "internal error" and is logged with its source.

use airlock_ledger::LedgerError;
use airlock_runtime::GatewayError;
use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An error answered as `{"error": code, "message": …}`.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    /// The HTTP status it answers with.
    pub(crate) fn status(&self) -> StatusCode {
        self.status
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

    fn internal(error: &dyn std::error::Error) -> Self {
        tracing::error!(error = %error, source = ?error.source(), "internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error",
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            Json(json!({"error": self.code, "message": self.message})),
        )
            .into_response();
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
            LedgerError::Expired { .. } => Self::new(StatusCode::GONE, "expired", message),
            LedgerError::RunClosed { .. } => Self::new(StatusCode::CONFLICT, "run_closed", message),
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
            GatewayError::Ledger(inner) => inner.into(),
        }
    }
}
