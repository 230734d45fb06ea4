//! A session's page and a run's page (docs/rules.md INBOX-7): the whole story in the order it
//! happened — each call as it was recorded, each decision and resolution, each result — read
//! from the ledger's rows of that session or run.

use airlock_ledger::{Invocation, RunId, SessionId};
use axum::extract::{Path, State};
use axum::response::Html;
use maud::{Markup, html};
use time::OffsetDateTime;

use super::sessions::Signed;
use super::view::{self, json_block, visible, when};
use super::{Inbox, InboxError, bad_id};
use crate::result::result_json;

/// `GET /inbox/sessions/{id}`.
pub(super) async fn session(
    State(inbox): State<Inbox>,
    signed: Signed,
    Path(id): Path<String>,
) -> Result<Html<String>, InboxError> {
    let id: SessionId = bad_id(&id, "a session")?;
    let store = inbox.app.gateway.store();
    let session = store.get_session(id).await?;
    let calls = store.session_invocations(id).await?;
    let body = html! {
        h1 { "Session " code { (id) } }
        dl {
            dt { "Channel" } dd { (visible(&session.channel)) }
            dt { "Principal" } dd { (visible(session.principal.as_deref().unwrap_or("—"))) }
            dt { "Opened" } dd { (when(session.created_at)) }
        }
        (story(&calls))
    };
    let page = view::page("Session", Some(&signed), None, None, &body);
    Ok(Html(page.into_string()))
}

/// `GET /inbox/runs/{id}`.
pub(super) async fn run(
    State(inbox): State<Inbox>,
    signed: Signed,
    Path(id): Path<String>,
) -> Result<Html<String>, InboxError> {
    let id: RunId = bad_id(&id, "a run")?;
    let store = inbox.app.gateway.store();
    let run = store.get_run(id).await?;
    let calls = store.run_invocations(id).await?;
    let body = html! {
        h1 { "Run " code { (id) } }
        dl {
            dt { "Agent" } dd { (visible(&run.agent)) }
            dt { "Status" } dd { (run.status.to_string()) @if let Some(why) = &run.status_reason { " (" (visible(why)) ")" } }
            dt { "Started" } dd { (when(run.created_at)) }
            dt { "Session" } dd { a href=(format!("/inbox/sessions/{}", run.session_id)) { "the session's story" } }
        }
        (story(&calls))
    };
    let page = view::page("Run", Some(&signed), None, None, &body);
    Ok(Html(page.into_string()))
}

/// Every event of `calls`, oldest first (events at the same instant keep the order they
/// happen in: a call, then its decision, then its result).
fn story(calls: &[Invocation]) -> Markup {
    let mut events: Vec<(OffsetDateTime, Markup)> = calls.iter().flat_map(events).collect();
    events.sort_by_key(|(at, _)| *at);
    html! {
        h2 { "What happened" }
        @if events.is_empty() {
            p { "No calls yet." }
        } @else {
            ol.story {
                @for (at, event) in &events {
                    li { span.muted { (when(*at)) } " " (event) }
                }
            }
        }
    }
}

fn events(call: &Invocation) -> Vec<(OffsetDateTime, Markup)> {
    let link =
        html! { a href=(format!("/inbox/invocations/{}", call.id)) { (visible(&call.tool)) } };
    let mut out = vec![(
        call.created_at,
        html! {
            "called " (link) " — now " span.state { (call.state.to_string()) }
            details { summary { "arguments" } (json_block(&call.arguments)) }
        },
    )];
    if let Some(d) = &call.decision {
        out.push((
            d.at,
            html! {
                (link) ": " (d.decision.to_string()) " by " strong { (visible(&d.by)) }
                @if let Some(reason) = &d.reason { " — “" (visible(reason)) "”" }
            },
        ));
    }
    if let Some(r) = &call.resolution {
        out.push((
            r.at,
            html! {
                (link) ": resolved as " (r.resolution.to_string()) " by " strong { (visible(&r.by)) }
                " — “" (visible(&r.note)) "”"
            },
        ));
    }
    if let Some(result) = result_json(call) {
        out.push((
            call.updated_at,
            html! { (link) ": " (call.state.to_string()) (json_block(&result)) },
        ));
    }
    out
}
