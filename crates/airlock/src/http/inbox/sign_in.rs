//! Signing in and out (docs/rules.md INBOX-1, INBOX-2, INBOX-3). Sign-in takes an `[admin]`
//! token in a form (never in a URL) and answers with a session cookie; a refused token is
//! told apart from nothing — one message whatever was wrong — and the comparison is the API's
//! constant-time one. The sign-in form is itself protected against cross-site submission by a
//! double-submit token: the form's hidden field must equal a cookie set with the form.

use std::time::Instant;

use axum::Form;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use maud::html;
use serde::Deserialize;

use super::sessions::{ABSOLUTE, Signed, random_secret, same_secret};
use super::{Inbox, InboxError, SESSION_COOKIE, cookie, over_tls, set_cookie, view};
use crate::http::auth::token_principal;

/// The sign-in form's double-submit cookie.
const FORM_COOKIE: &str = "airlock_inbox_form";
/// How long a sign-in form stays usable.
const FORM_TTL_SECS: u64 = 60 * 60;

/// `POST /inbox/sign-in`.
#[derive(Deserialize)]
pub(super) struct SignInForm {
    #[serde(default)]
    token: String,
    #[serde(default)]
    form: String,
}

/// `POST /inbox/sign-out`.
#[derive(Deserialize)]
pub(super) struct SignOutForm {
    #[serde(default)]
    csrf: String,
}

/// `GET /inbox/sign-in`: the form, with a fresh double-submit token.
pub(super) async fn form(headers: HeaderMap) -> Response {
    sign_in_page(&headers, StatusCode::OK, None)
}

fn sign_in_page(headers: &HeaderMap, status: StatusCode, problem: Option<&str>) -> Response {
    let nonce = random_secret();
    let body = html! {
        h1 { "Sign in" }
        p { "Paste an admin token (one of " code { "[[admin.tokens]]" } " in airlock.toml). Decisions you take are recorded under that token's principal." }
        @if let Some(problem) = problem {
            p.flash.error role="alert" { (problem) }
        }
        form.decide method="post" action="/inbox/sign-in" {
            input type="hidden" name="form" value=(nonce);
            label for="token" { "Admin token" }
            input #token type="password" name="token" autocomplete="off" required autofocus;
            button type="submit" { "Sign in" }
        }
    };
    let page = view::page("Sign in", None, None, None, &body);
    let mut response = (status, Html(page.into_string())).into_response();
    response.headers_mut().append(
        header::SET_COOKIE,
        set_cookie(FORM_COOKIE, &nonce, FORM_TTL_SECS, over_tls(headers)),
    );
    response
}

/// `POST /inbox/sign-in`: a good token → a session cookie and the list; a bad one → the form
/// again with one message, whatever was wrong.
pub(super) async fn sign_in(
    State(inbox): State<Inbox>,
    headers: HeaderMap,
    Form(form): Form<SignInForm>,
) -> Result<Response, InboxError> {
    let sent = cookie(&headers, FORM_COOKIE).unwrap_or_default();
    if sent.is_empty() || !same_secret(sent, &form.form) {
        return Err(InboxError::csrf());
    }
    let now = Instant::now();
    if !inbox.sessions.may_try(now) {
        return Ok(sign_in_page(
            &headers,
            StatusCode::TOO_MANY_REQUESTS,
            Some("Too many failed sign-ins; wait a minute and try again."),
        ));
    }
    let Some(principal) = token_principal(&inbox.app.admin, &form.token) else {
        inbox.sessions.failed(now);
        return Ok(sign_in_page(
            &headers,
            StatusCode::UNAUTHORIZED,
            Some("That token was not accepted."),
        ));
    };
    let signed = inbox.sessions.start(principal, now);
    let tls = over_tls(&headers);
    let mut response = Redirect::to("/inbox").into_response();
    let cookies = response.headers_mut();
    cookies.append(
        header::SET_COOKIE,
        set_cookie(SESSION_COOKIE, &signed.cookie, ABSOLUTE.as_secs(), tls),
    );
    cookies.append(header::SET_COOKIE, set_cookie(FORM_COOKIE, "", 0, tls));
    Ok(response)
}

/// `POST /inbox/sign-out`: ends the session and clears its cookie.
pub(super) async fn sign_out(
    State(inbox): State<Inbox>,
    signed: Signed,
    headers: HeaderMap,
    Form(form): Form<SignOutForm>,
) -> Result<Response, InboxError> {
    if !signed.csrf_matches(&form.csrf) {
        return Err(InboxError::csrf());
    }
    inbox.sessions.end(&signed.cookie);
    let mut response = Redirect::to("/inbox/sign-in").into_response();
    let cleared: HeaderValue = set_cookie(SESSION_COOKIE, "", 0, over_tls(&headers));
    response.headers_mut().append(header::SET_COOKIE, cleared);
    Ok(response)
}
