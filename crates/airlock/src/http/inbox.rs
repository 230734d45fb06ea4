//! The inbox: server-rendered pages at `/inbox` where a person sees every call waiting for one
//! and decides it (docs/rules.md INBOX). It is another surface over the decisions API's
//! functions — the pending list and `decisions::decide` — never a second implementation.
//!
//! What it guarantees:
//! - Only a signed-in admin sees anything: sign-in exchanges an `[admin]` token for a session
//!   cookie (INBOX-1, INBOX-2); the decider recorded is that token's principal.
//! - A GET never decides anything; every POST carries the session's CSRF token, checked in
//!   constant time before anything else is read (INBOX-3).
//! - Text a caller sent is escaped and its hidden characters shown (INBOX-4).
//! - Connection tools withheld for a changed definition are listed at `/inbox/tools` and
//!   accepted there, under the admin's name (INBOX-10 … INBOX-12).
//! - At `/inbox/credentials` the signed-in person sets, revokes or connects their own
//!   credentials for per-principal connections, never anyone else's (INBOX-14).
//! - Every answer carries a strict CSP, `nosniff`, `no-referrer` and `no-store` (INBOX-8);
//!   no page holds a script, and every action is a plain form.

mod card;
mod credentials;
mod freezes;
mod list;
mod sessions;
mod sign_in;
mod story;
mod tools;
mod view;

use std::sync::Arc;
use std::time::Instant;

use airlock_ledger::LedgerError;
use airlock_runtime::GatewayError;
use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Router, middleware};

use super::AppState;
use super::error::ApiError;
use sessions::{Sessions, Signed};

/// Makes `change` only when `csrf` is the session's (INBOX-3: nothing is read or written
/// before), then shows what it said on the page at `back`.
async fn changed(
    inbox: &Inbox,
    signed: &Signed,
    (csrf, back): (&str, &'static str),
    change: impl std::future::Future<Output = String>,
) -> Result<Response, InboxError> {
    if !signed.csrf_matches(csrf) {
        return Err(InboxError::csrf());
    }
    let message = change.await;
    inbox.sessions.flash(&signed.cookie, message);
    Ok(Redirect::to(back).into_response())
}

/// The session cookie's name.
const SESSION_COOKIE: &str = "airlock_inbox";

/// The inbox's state: the app's, and the sessions of this process.
#[derive(Clone)]
struct Inbox {
    app: AppState,
    sessions: Arc<Sessions>,
}

/// The inbox's routes, each answer with the security headers.
pub(super) fn router(app: AppState) -> Router {
    let inbox = Inbox {
        app,
        sessions: Arc::default(),
    };
    Router::new()
        .route("/inbox", get(list::list))
        .route("/inbox/style.css", get(style))
        .route("/inbox/sign-in", get(sign_in::form).post(sign_in::sign_in))
        .route("/inbox/sign-out", post(sign_in::sign_out))
        .route("/inbox/invocations/{id}", get(card::card))
        .route("/inbox/invocations/{id}/{verb}", post(card::decide))
        .route("/inbox/sessions/{id}", get(story::session))
        .route("/inbox/runs/{id}", get(story::run))
        .route("/inbox/tools", get(tools::list))
        .route("/inbox/tools/accept", post(tools::accept))
        .route("/inbox/freezes", get(freezes::list))
        .route("/inbox/freezes/freeze", post(freezes::freeze))
        .route("/inbox/freezes/lift", post(freezes::lift))
        .route("/inbox/credentials", get(credentials::list))
        .route("/inbox/credentials/set", post(credentials::set))
        .route("/inbox/credentials/revoke", post(credentials::revoke))
        .with_state(inbox)
        .layer(middleware::from_fn(security_headers))
}

/// INBOX-8: what the browser may do with an inbox page — nothing but show it with its own
/// stylesheet, submit its forms to this origin, and keep it out of frames and caches.
async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    for (name, value) in [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
        (header::X_FRAME_OPTIONS, "DENY"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

async fn style() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        view::STYLE,
    )
        .into_response()
}

/// The value of cookie `name` in the request, if sent.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// A `Set-Cookie` value scoped to the inbox: `HttpOnly`, `SameSite=Strict`, `Path=/inbox`,
/// `Secure` when the request came over TLS (INBOX-2).
fn set_cookie(name: &str, value: &str, max_age_secs: u64, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    let cookie = format!(
        "{name}={value}; HttpOnly; SameSite=Strict; Path=/inbox; Max-Age={max_age_secs}{secure}"
    );
    // Names are constants and values are hex: always a valid header value.
    HeaderValue::from_str(&cookie).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// Whether the browser reached the inbox over TLS. `serve` itself speaks plain HTTP, so TLS
/// is a terminating proxy's, which says so in `X-Forwarded-Proto`. Marking a cookie `Secure`
/// needlessly only keeps it off plain HTTP, so trusting the header cannot weaken anything.
fn over_tls(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|proto| proto.eq_ignore_ascii_case("https"))
}

/// A request's session; without one a GET goes to the sign-in page and anything else is
/// refused.
impl FromRequestParts<Inbox> for Signed {
    type Rejection = InboxError;

    async fn from_request_parts(parts: &mut Parts, inbox: &Inbox) -> Result<Self, InboxError> {
        cookie(&parts.headers, SESSION_COOKIE)
            .and_then(|value| inbox.sessions.find(value, Instant::now()))
            .ok_or(InboxError::SignIn {
                get: parts.method == Method::GET,
            })
    }
}

/// Why an inbox request was refused, shown as a page.
#[derive(Debug)]
enum InboxError {
    /// No live session: GET → the sign-in page; anything else → 403.
    SignIn { get: bool },
    /// Any other refusal, classified (status and words) by the API's one mapping.
    Api(ApiError),
}

impl From<LedgerError> for InboxError {
    fn from(e: LedgerError) -> Self {
        Self::Api(e.into())
    }
}

impl From<GatewayError> for InboxError {
    fn from(e: GatewayError) -> Self {
        Self::Api(e.into())
    }
}

impl InboxError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self::Api(ApiError::new(status, code, message))
    }

    /// INBOX-3: a POST whose CSRF token is missing or not the session's.
    fn csrf() -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "csrf",
            "This form is not from your inbox session (its security token is missing or wrong). Nothing was done. Reload the page and try again.",
        )
    }
}

impl IntoResponse for InboxError {
    fn into_response(self) -> Response {
        match self {
            Self::SignIn { get: true } => Redirect::to("/inbox/sign-in").into_response(),
            Self::SignIn { get: false } => (
                StatusCode::FORBIDDEN,
                Html(
                    view::message_page(
                        "Sign in first",
                        "You are not signed in (or your session ended). Nothing was done.",
                    )
                    .into_string(),
                ),
            )
                .into_response(),
            Self::Api(error) => {
                let title = error
                    .status()
                    .canonical_reason()
                    .unwrap_or("Refused")
                    .to_owned();
                (
                    error.status(),
                    Html(view::message_page(&title, error.message()).into_string()),
                )
                    .into_response()
            }
        }
    }
}

/// A malformed id in a path: 400 naming it.
fn bad_id<T: std::str::FromStr>(id: &str, what: &str) -> Result<T, InboxError> {
    id.parse().map_err(|_| {
        InboxError::new(
            StatusCode::BAD_REQUEST,
            "bad_id",
            format!("`{id}` is not {what} id"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_read_by_exact_name() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("x_airlock_inbox=evil; airlock_inbox=abc; other=1"),
        );
        assert_eq!(cookie(&headers, SESSION_COOKIE), Some("abc"));
        assert_eq!(cookie(&headers, "missing"), None);
    }

    /// INBOX-2: the session cookie's attributes.
    #[test]
    fn the_session_cookie_is_http_only_strict_and_scoped() {
        let plain = set_cookie(SESSION_COOKIE, "abc", 60, false);
        assert_eq!(
            plain.to_str().unwrap(),
            "airlock_inbox=abc; HttpOnly; SameSite=Strict; Path=/inbox; Max-Age=60"
        );
        let tls = set_cookie(SESSION_COOKIE, "abc", 60, true);
        assert!(tls.to_str().unwrap().ends_with("; Secure"));
    }
}
