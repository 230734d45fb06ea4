//! `GET /inbox`: every call waiting for a person — for an approval, an answer, or a word on
//! whether it ran — newest first, filtered by tool, agent and principal, paged
//! (docs/rules.md INBOX-5). The page reloads itself every [`REFRESH_SECS`] while live; `live=off`
//! stops the reload and shows the filter form, so typing a filter or moving through the rows
//! with the keyboard is never interrupted.

use std::collections::HashMap;
use std::fmt::Write as _;

use airlock_ledger::{Invocation, SessionId};
use airlock_runtime::decisions::pending::{self, Origin};
use airlock_spec::ScopeId;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Html;
use maud::{Markup, html};
use serde::Deserialize;

use super::sessions::Signed;
use super::view::{self, REFRESH_SECS, visible, waiting_for, when};
use super::{Inbox, InboxError};

/// Rows per page unless the query says otherwise.
const PAGE: u32 = 25;

/// The list's query string; empty values mean "no filter".
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListQuery {
    tool: Option<String>,
    agent: Option<String>,
    principal: Option<String>,
    limit: Option<u32>,
    offset: Option<u32>,
    live: Option<String>,
}

impl ListQuery {
    fn filter(value: Option<&String>) -> Option<String> {
        value
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    }

    fn live(&self) -> bool {
        self.live.as_deref() != Some("off")
    }

    fn limit(&self) -> u32 {
        self.limit.unwrap_or(PAGE).clamp(1, pending::MAX_LIMIT)
    }

    /// This list's URL at `offset`, live or not.
    fn url(&self, offset: u32, live: bool) -> String {
        let mut url = format!("/inbox?offset={offset}&limit={}", self.limit());
        for (key, value) in [
            ("tool", &self.tool),
            ("agent", &self.agent),
            ("principal", &self.principal),
        ] {
            if let Some(value) = Self::filter(value.as_ref()) {
                let _ = write!(url, "&{key}={}", encode(&value));
            }
        }
        if !live {
            url.push_str("&live=off");
        }
        url
    }
}

/// Percent-encodes a query value.
fn encode(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// `GET /inbox`.
pub(super) async fn list(
    State(inbox): State<Inbox>,
    signed: Signed,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Html<String>, InboxError> {
    let Query(query) =
        query.map_err(|e| InboxError::new(StatusCode::BAD_REQUEST, "bad_query", e.body_text()))?;
    let store = inbox.app.gateway.store().as_ref();
    let wanted = pending::Query {
        kind: None,
        tool: ListQuery::filter(query.tool.as_ref()),
        principal: ListQuery::filter(query.principal.as_ref()),
        agent: ListQuery::filter(query.agent.as_ref()),
        older_than: None,
        limit: Some(query.limit()),
        offset: query.offset,
        newest_first: true,
    };
    let page = pending::list(store, &wanted).await?;
    let origins = pending::origins(store, &page.rows).await?;
    let flash = inbox.sessions.take_flash(&signed.cookie);
    let definitions = inbox.app.gateway.definitions().pending().len();
    let frozen = inbox.app.gateway.freezes().current();
    let body = html! {
        @if !frozen.is_empty() {
            p.flash { a href="/inbox/freezes" { "Frozen: " (view::visible(&frozen.iter().map(|f| f.target.to_string()).collect::<Vec<_>>().join(", "))) } }
        }
        @if definitions > 0 {
            p.flash { a href="/inbox/tools" { (definitions) " connection tool definition(s) changed and wait to be accepted" } }
        }
        h1 { "Waiting for a person" }
        (controls(&query))
        (table(&page.rows, &origins))
        (pages(&query, page.next_offset))
    };
    let refresh = query.live().then_some(REFRESH_SECS);
    let page = view::page("Waiting", Some(&signed), flash.as_deref(), refresh, &body);
    Ok(Html(page.into_string()))
}

/// Live: a link to pause (and filter). Paused: the filter form and a link back to live.
fn controls(query: &ListQuery) -> Markup {
    let offset = query.offset.unwrap_or(0);
    if query.live() {
        return html! {
            p.muted {
                "Live: reloads every " (REFRESH_SECS) " s. "
                a href=(query.url(offset, false)) { "Pause to filter" }
            }
        };
    }
    let value = |v: &Option<String>| ListQuery::filter(v.as_ref()).unwrap_or_default();
    html! {
        form.filters method="get" action="/inbox" {
            div { label for="tool" { "Tool" } input #tool type="text" name="tool" value=(value(&query.tool)); }
            div { label for="agent" { "Agent" } input #agent type="text" name="agent" value=(value(&query.agent)); }
            div { label for="principal" { "Principal" } input #principal type="text" name="principal" value=(value(&query.principal)); }
            input type="hidden" name="limit" value=(query.limit());
            div { button type="submit" { "Filter and go live" } }
        }
        p.muted { "Paused. " a href=(query.url(offset, true)) { "Go live" } }
    }
}

fn scope_words(origin: Option<&Origin>) -> String {
    match origin.and_then(|o| o.scope.as_ref()) {
        Some(ScopeId::Gateway) => "gateway".to_owned(),
        Some(ScopeId::Agent(name)) => format!("agent {name}"),
        None => "unknown".to_owned(),
    }
}

fn table(rows: &[Invocation], origins: &HashMap<SessionId, Origin>) -> Markup {
    if rows.is_empty() {
        return html! { p { "Nothing waits for a person." } };
    }
    html! {
        table {
            thead { tr {
                th { "Tool" } th { "Waiting for" } th { "Scope" } th { "Principal" }
                th { "Channel" } th { "Asked" } th { "Expires" } th { "Effect" }
            } }
            tbody {
                @for row in rows {
                    @let origin = origins.get(&row.session_id);
                    tr {
                        td data-label="Tool" { a href=(format!("/inbox/invocations/{}", row.id)) { (visible(&row.tool)) } }
                        td data-label="Waiting for" { (waiting_for(row)) }
                        td data-label="Scope" { (visible(&scope_words(origin))) }
                        td data-label="Principal" { (visible(row.principal.as_deref().unwrap_or("—"))) }
                        td data-label="Channel" { (visible(origin.map_or("—", |o| o.channel.as_str()))) }
                        td data-label="Asked" { (when(row.created_at)) }
                        td data-label="Expires" { (row.expires_at.map_or_else(|| "—".to_owned(), when)) }
                        td data-label="Effect" { (row.effect.to_string()) " · " (row.mode.to_string()) }
                    }
                }
            }
        }
    }
}

fn pages(query: &ListQuery, next: Option<u32>) -> Markup {
    let offset = query.offset.unwrap_or(0);
    let live = query.live();
    html! {
        nav.pages aria-label="pages" {
            @if offset > 0 {
                a href=(query.url(offset.saturating_sub(query.limit()), live)) { "← Newer" }
            }
            @if let Some(next) = next {
                a href=(query.url(next, live)) { "Older →" }
            }
        }
    }
}
