//! `/inbox/freezes`: the kill switch in a browser (docs/rules.md POLICY-56, INBOX-13): the
//! freezes in force, each with a button to lift it, and a form to freeze a target.
//!
//! Guarantees: only a signed-in admin sees, freezes or lifts; every change is a POST carrying
//! the session's CSRF token, checked before anything else is read, and is recorded under the
//! admin's principal; a freeze's reason and names are shown as escaped text with hidden
//! characters made visible (a reason is typed by a person, but a name may be a caller's).

use axum::Form;
use axum::extract::State;
use axum::response::{Html, Response};
use maud::{Markup, html};

use super::sessions::Signed;
use super::{Inbox, InboxError, changed, view};
use airlock_ledger::{Freeze, FreezeTarget};

/// The freeze and lift forms: the target, and the reason (freezing only).
#[derive(Debug, serde::Deserialize)]
pub(super) struct FreezeForm {
    /// Missing reads as empty, so it is refused as a wrong token (403), not a bad form.
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    reason: String,
}

const KINDS: [&str; 5] = ["everything", "agent", "principal", "connection", "tool"];

/// `GET /inbox/freezes`.
pub(super) async fn list(
    State(inbox): State<Inbox>,
    signed: Signed,
) -> Result<Html<String>, InboxError> {
    let freezes = inbox.app.gateway.store().freezes().await?;
    let flash = inbox.sessions.take_flash(&signed.cookie);
    let body = html! {
        h1 { "Freezes" }
        @if freezes.is_empty() {
            p.muted { "Nothing is frozen." }
        } @else {
            p.muted { "Calls these cover are refused on every replica, running agent runs stop before them, and approvals of them wait until the freeze is lifted." }
            @for f in &freezes { (entry(f, &signed)) }
        }
        h2 { "Freeze" }
        form method="post" action="/inbox/freezes/freeze" {
            input type="hidden" name="csrf" value=(signed.csrf);
            label { "What " select name="kind" { @for k in KINDS { option value=(k) { (k) } } } }
            label { " Name " input type="text" name="name" placeholder="(none for everything)"; }
            label { " Reason " input type="text" name="reason" required; }
            button type="submit" { "Freeze" }
        }
    };
    let page = view::page("Freezes", Some(&signed), flash.as_deref(), None, &body);
    Ok(Html(page.into_string()))
}

fn entry(f: &Freeze, signed: &Signed) -> Markup {
    html! {
        section {
            h2 { (view::visible(&f.target.to_string())) }
            p { "By " (view::visible(&f.by)) ": " (view::visible(&f.reason)) }
            form method="post" action="/inbox/freezes/lift" {
                input type="hidden" name="csrf" value=(signed.csrf);
                input type="hidden" name="kind" value=(f.target.kind());
                input type="hidden" name="name" value=(f.target.name());
                button type="submit" { "Lift" }
            }
        }
    }
}

/// `POST /inbox/freezes/freeze`.
pub(super) async fn freeze(
    State(inbox): State<Inbox>,
    signed: Signed,
    Form(form): Form<FreezeForm>,
) -> Result<Response, InboxError> {
    let change = async {
        let target = match FreezeTarget::parse(&form.kind, form.name.trim()) {
            Ok(target) => target,
            Err(e) => return format!("Nothing was frozen: {e}"),
        };
        let watch = inbox.app.gateway.freezes();
        match watch.freeze(target, &form.reason, &signed.principal).await {
            Ok(f) => format!("Frozen: {} (by {}: {})", f.target, f.by, f.reason),
            Err(e) => format!("Nothing was frozen: {e}"),
        }
    };
    changed(&inbox, &signed, (&form.csrf, "/inbox/freezes"), change).await
}

/// `POST /inbox/freezes/lift`.
pub(super) async fn lift(
    State(inbox): State<Inbox>,
    signed: Signed,
    Form(form): Form<FreezeForm>,
) -> Result<Response, InboxError> {
    let change = async {
        let target = match FreezeTarget::parse(&form.kind, &form.name) {
            Ok(target) => target,
            Err(e) => return format!("Nothing was lifted: {e}"),
        };
        let watch = inbox.app.gateway.freezes();
        match watch.unfreeze(target.clone(), &signed.principal).await {
            Ok(Some(_)) => format!("Lifted: {target}"),
            Ok(None) => format!("{target} was not frozen"),
            Err(e) => format!("Nothing was lifted: {e}"),
        }
    };
    changed(&inbox, &signed, (&form.csrf, "/inbox/freezes"), change).await
}
