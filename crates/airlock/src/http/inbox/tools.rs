//! `/inbox/tools`: the connection tools withheld because their definitions differ from their
//! pins, and the skills whose entries differ from theirs (OPS-79), with a button to accept each
//! (docs/rules.md INBOX-10 … INBOX-12).
//!
//! Guarantees: only a signed-in admin sees or accepts; an accept is a POST carrying the
//! session's CSRF token, checked before anything else is read; the acceptance is recorded under
//! the admin's principal; a definition is shown as escaped text with hidden characters made
//! visible (a poisoned description is exactly what a person must be able to read).

use axum::Form;
use axum::extract::State;
use axum::response::{Html, IntoResponse, Redirect, Response};
use maud::{Markup, html};

use super::sessions::Signed;
use super::{Inbox, InboxError, view};
use airlock_runtime::pins::{Difference, Pending};

/// The accept form: the connection, and the tool (every waiting tool of it when absent).
#[derive(Debug, serde::Deserialize)]
pub(super) struct AcceptForm {
    /// Missing reads as empty, so it is refused as a wrong token (403), not a bad form.
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    connection: String,
    tool: Option<String>,
}

/// `GET /inbox/tools`.
pub(super) async fn list(State(inbox): State<Inbox>, signed: Signed) -> Html<String> {
    let pending = inbox.app.gateway.definitions().pending();
    let flash = inbox.sessions.take_flash(&signed.cookie);
    let body = html! {
        h1 { "Tool definitions waiting" }
        @if pending.is_empty() {
            p.muted { "Every connection tool matches its pinned definition." }
        } @else {
            p.muted { "These connection tools and skills are withheld from clients until accepted; what is accepted is served from the next start of the gateway." }
            @for p in &pending { (entry(p, &signed)) }
        }
    };
    let page = view::page(
        "Tool definitions",
        Some(&signed),
        flash.as_deref(),
        None,
        &body,
    );
    Html(page.into_string())
}

fn entry(p: &Pending, signed: &Signed) -> Markup {
    html! {
        section {
            h2 { (view::visible(&p.describe())) }
            @match &p.difference {
                Difference::Changed { pinned } => {
                    p { "Pinned:" } (view::json_block(pinned))
                    p { "Now:" } (view::json_block(&p.definition))
                }
                Difference::Removed { pinned } => { p { "Pinned:" } (view::json_block(pinned)) }
                Difference::New | Difference::Renamed { .. } => {
                    p { "Now:" } (view::json_block(&p.definition))
                }
            }
            form method="post" action="/inbox/tools/accept" {
                input type="hidden" name="csrf" value=(signed.csrf);
                input type="hidden" name="connection" value=(p.connection);
                input type="hidden" name="tool" value=(p.tool);
                button type="submit" { "Accept" }
            }
        }
    }
}

/// `POST /inbox/tools/accept`.
pub(super) async fn accept(
    State(inbox): State<Inbox>,
    signed: Signed,
    Form(form): Form<AcceptForm>,
) -> Result<Response, InboxError> {
    // INBOX-3: nothing is read or accepted before the form is known to be the session's.
    if !signed.csrf_matches(&form.csrf) {
        return Err(InboxError::csrf());
    }
    let gateway = &inbox.app.gateway;
    let (connection, tool) = (&form.connection, form.tool.as_deref());
    let accepted = gateway
        .definitions()
        .accept(
            gateway.store().as_ref(),
            connection,
            tool,
            &signed.principal,
        )
        .await;
    let message = match accepted {
        Ok(accepted) => {
            let names: Vec<String> = accepted.iter().map(Pending::describe).collect();
            format!(
                "Accepted (served from the next start): {}",
                names.join("; ")
            )
        }
        Err(e) => format!("Nothing was accepted: {e}"),
    };
    inbox.sessions.flash(&signed.cookie, message);
    Ok(Redirect::to("/inbox/tools").into_response())
}
