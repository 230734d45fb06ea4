//! A call's card, `/inbox/invocations/{id}` (docs/rules.md INBOX-6, INBOX-7): what was called,
//! by whom, from where, with which arguments (escaped, hidden characters shown), under which
//! declaration (the tool's description and the digest the row was recorded under), and the
//! forms its state allows — approve, edit the arguments and approve (DECIDE-20), or deny with a
//! reason, answer a question, resolve a call in doubt. A decided call says who decided and
//! when; an edited approval shows the proposed and the approved arguments.
//!
//! A decision is `POST /inbox/invocations/{id}/{approve|edit|deny|answer|resolve}`: the CSRF token
//! first, then `decisions::decide` by the session's principal — the same function as the API
//! and the CLI — then `303 See Other` back to the card with a flash message saying what
//! happened, in words when it was refused (already decided: by whom and when; edited arguments
//! that are not JSON or fail the tool's checks, DECIDE-21: what is wrong, nothing decided).

use airlock_ledger::{Decision, Invocation, InvocationId, InvocationState, Resolution};
use airlock_runtime::decisions::{self, pending};
use airlock_spec::ScopeId;
use axum::Form;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;

use super::sessions::Signed;
use super::view::{self, json_block, json_text, visible, waiting_for, when};
use super::{Inbox, InboxError, bad_id};
use crate::http::error::ApiError;
use crate::result::result_json;

/// Every decision form's fields; which are read depends on the verb.
#[derive(Debug, Deserialize)]
pub(super) struct DecisionForm {
    /// Missing reads as empty, so it is refused as a wrong token (403), not a bad form.
    #[serde(default)]
    csrf: String,
    reason: Option<String>,
    text: Option<String>,
    outcome: Option<String>,
    note: Option<String>,
    /// Edited arguments, as JSON text (DECIDE-20).
    arguments: Option<String>,
}

/// `GET /inbox/invocations/{id}`.
pub(super) async fn card(
    State(inbox): State<Inbox>,
    signed: Signed,
    Path(id): Path<String>,
) -> Result<Html<String>, InboxError> {
    let id: InvocationId = bad_id(&id, "an invocation")?;
    let store = inbox.app.gateway.store();
    let row = store.get(id).await?;
    let origin = pending::origins(store.as_ref(), std::slice::from_ref(&row))
        .await?
        .remove(&row.session_id);
    let scope = origin.as_ref().and_then(|o| o.scope.clone());
    let description = scope
        .as_ref()
        .and_then(|s| inbox.app.gateway.scope(s))
        .and_then(|s| s.get(&row.tool))
        .map(|tool| tool.definition.description.clone());
    let flash = inbox.sessions.take_flash(&signed.cookie);
    // POLICY-59: what the call's limits stood at when it was recorded.
    let limits = store.budget_uses(row.id).await?;
    let body = html! {
        h1 { (visible(&row.tool)) " " span.state { (row.state.to_string()) } }
        (facts(&row, origin.as_ref().map(|o| o.channel.as_str()), scope.as_ref()))
        @if !limits.is_empty() {
            h2 { "Limits" }
            ul {
                @for u in &limits {
                    li {
                        @if u.over { strong { "Over its limit: " } }
                        (visible(&u.figures()))
                    }
                }
            }
        }
        h2 { "What the tool does" }
        p { (visible(description.as_deref().unwrap_or("(this tool is no longer declared)"))) }
        @if let Some(approved) = &row.approved_arguments {
            h2 { "Arguments proposed" }
            (json_block(&row.arguments))
            h2 { "Arguments approved (edited by the decider; the call runs with these)" }
            (json_block(approved))
        } @else {
            h2 { "Arguments" }
            (json_block(&row.arguments))
        }
        (decided(&row))
        (forms(&row, &signed))
    };
    let title = format!("{} {}", row.tool, row.id);
    let page = view::page(&title, Some(&signed), flash.as_deref(), None, &body);
    Ok(Html(page.into_string()))
}

fn facts(row: &Invocation, channel: Option<&str>, scope: Option<&ScopeId>) -> Markup {
    html! {
        dl {
            dt { "Waiting for" } dd { (waiting_for(row)) }
            dt { "Principal" } dd { (visible(row.principal.as_deref().unwrap_or("—"))) }
            dt { "Scope" } dd { (scope.map_or_else(|| "unknown".to_owned(), ToString::to_string)) }
            dt { "Channel" } dd { (visible(channel.unwrap_or("—"))) }
            dt { "Asked" } dd { (when(row.created_at)) }
            dt { "Expires" } dd { (row.expires_at.map_or_else(|| "—".to_owned(), when)) }
            dt { "Effect" } dd { (row.effect.to_string()) " · " (row.mode.to_string()) " · approval " (row.approval.to_string()) }
            dt { "Declaration digest" } dd { code { (row.definitions_digest) } }
            dt { "Invocation" } dd { code { (row.id) } }
            dt { "Session" } dd { a href=(format!("/inbox/sessions/{}", row.session_id)) { "the session's story" } }
            @if let Some(run) = row.run_id {
                dt { "Run" } dd { a href=(format!("/inbox/runs/{run}")) { "the run's story" } }
            }
        }
    }
}

/// Who decided or resolved the call, and its result once settled.
fn decided(row: &Invocation) -> Markup {
    html! {
        @if let Some(d) = &row.decision {
            h2 { "Decision" }
            p { (d.decision.to_string()) " by " strong { (visible(&d.by)) } " at " (when(d.at)) }
            @if let Some(reason) = &d.reason { p { "“" (visible(reason)) "”" } }
        }
        @if let Some(r) = &row.resolution {
            h2 { "Resolution" }
            p { "resolved as " (r.resolution.to_string()) " by " strong { (visible(&r.by)) } " at " (when(r.at)) }
            p { "“" (visible(&r.note)) "”" }
        }
        @if let Some(result) = result_json(row) {
            h2 { "Result" }
            (json_block(&result))
        }
    }
}

/// The forms the row's state allows; none for a row nobody has to decide.
fn forms(row: &Invocation, signed: &Signed) -> Markup {
    let action = |verb: &str| format!("/inbox/invocations/{}/{verb}", row.id);
    let csrf = html! { input type="hidden" name="csrf" value=(signed.csrf); };
    match row.state {
        InvocationState::AwaitingApproval => html! {
            h2 { "Decide" }
            form.decide method="post" action=(action("approve")) {
                (csrf)
                button type="submit" { "Approve" }
            }
            (edit_form(row, &action("edit"), &csrf))
            (deny_form(&action("deny"), &csrf))
        },
        // DECIDE-18: a proposal did not run; approved, it runs once, as proposed.
        InvocationState::Proposed => html! {
            h2 { "Decide on the proposal" }
            p { "The caller proposed this call instead of running it. Approve to run it once, as proposed." }
            form.decide method="post" action=(action("approve")) {
                (csrf)
                button type="submit" { "Approve and run" }
            }
            (edit_form(row, &action("edit"), &csrf))
            (deny_form(&action("deny"), &csrf))
        },
        InvocationState::AwaitingAnswer => html! {
            h2 { "Answer" }
            form.decide method="post" action=(action("answer")) {
                (csrf)
                label for="text" { "Your answer" }
                textarea #text name="text" rows="3" required {}
                button type="submit" { "Answer" }
            }
            (deny_form(&action("deny"), &csrf))
        },
        InvocationState::InDoubt => html! {
            h2 { "Did it run?" }
            p { "The call was running when its runner stopped. Say whether it ran; “did not run” runs it once now." }
            form.decide method="post" action=(action("resolve")) {
                (csrf)
                label for="outcome" { "Outcome" }
                select #outcome name="outcome" {
                    option value="ran" { "It ran (settle it with the note)" }
                    option value="did_not_run" { "It did not run (run it now)" }
                    option value="abandoned" { "Give up (never run; the note is the reason)" }
                }
                label for="note" { "Note" }
                textarea #note name="note" rows="2" {}
                button type="submit" { "Resolve" }
            }
        },
        // CALL-12: only its principal can give it what it waits for; the caller's
        // message says how, and the person may still deny it.
        InvocationState::AwaitingCredential => html! {
            h2 { "Waiting for a credential" }
            @if let Some(error) = &row.error {
                p { (error.message) }
            }
            @if row.principal.as_deref() == Some(signed.principal.as_str()) {
                p { a href="/inbox/credentials" { "Set your credential" } }
            }
            (deny_form(&action("deny"), &csrf))
        },
        InvocationState::Pending | InvocationState::Approved | InvocationState::Running => {
            html! { p.muted { "Nothing to decide: the call is " (row.state.to_string()) "." } }
        }
        InvocationState::Succeeded
        | InvocationState::Failed
        | InvocationState::Denied
        | InvocationState::Expired
        | InvocationState::Resolved
        | InvocationState::Abandoned
        | InvocationState::InputRequired => html! {},
    }
}

/// DECIDE-20: the arguments as JSON, pre-filled with the proposed ones, to edit and approve.
fn edit_form(row: &Invocation, action: &str, csrf: &Markup) -> Markup {
    html! {
        form.decide method="post" action=(action) {
            (csrf)
            label for="arguments" { "Edit the arguments (JSON); the call runs with these" }
            textarea #arguments name="arguments" rows="8" required { (json_text(&row.arguments)) }
            button type="submit" { "Edit and approve" }
        }
    }
}

fn deny_form(action: &str, csrf: &Markup) -> Markup {
    html! {
        form.decide method="post" action=(action) {
            (csrf)
            label for="reason" { "Reason for denying (the caller sees it)" }
            input #reason type="text" name="reason" required;
            button.danger type="submit" { "Deny" }
        }
    }
}

/// `POST /inbox/invocations/{id}/{verb}`.
pub(super) async fn decide(
    State(inbox): State<Inbox>,
    signed: Signed,
    Path((id, verb)): Path<(String, String)>,
    Form(form): Form<DecisionForm>,
) -> Result<Response, InboxError> {
    // INBOX-3: nothing is read or decided before the form is known to be the session's.
    if !signed.csrf_matches(&form.csrf) {
        return Err(InboxError::csrf());
    }
    let id: InvocationId = bad_id(&id, "an invocation")?;
    let card = format!("/inbox/invocations/{id}");
    let message = match decision(&verb, form)? {
        Ok(decision) => apply(&inbox, &signed, id, decision).await?,
        Err(problem) => format!("Nothing was done: {problem}"),
    };
    inbox.sessions.flash(&signed.cookie, message);
    Ok(Redirect::to(&card).into_response())
}

/// The decision a form names; `Err` for an unknown verb (404), `Ok(Err(problem))` for a form
/// that cannot be taken as written.
fn decision(verb: &str, form: DecisionForm) -> Result<Result<Decision, String>, InboxError> {
    let given = |v: Option<String>| v.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
    Ok(match verb {
        "approve" => Ok(Decision::Approve),
        "edit" => serde_json::from_str(form.arguments.as_deref().unwrap_or_default())
            .map(|arguments| Decision::Edit { arguments })
            .map_err(|e| format!("the edited arguments are not JSON ({e})")),
        // INBOX-6: a denial from the inbox says why (the caller reads it).
        "deny" => given(form.reason)
            .map(|reason| Decision::Deny { reason })
            .ok_or_else(|| "a denial needs a reason".to_owned()),
        "answer" => given(form.text)
            .map(|text| Decision::Answer { text })
            .ok_or_else(|| "an answer cannot be empty".to_owned()),
        "resolve" => resolution(form.outcome.as_deref()).map(|resolution| Decision::Resolve {
            resolution,
            note: form.note.unwrap_or_default().trim().to_owned(),
        }),
        _ => {
            return Err(InboxError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                format!("there is no decision `{verb}`"),
            ));
        }
    })
}

fn resolution(outcome: Option<&str>) -> Result<Resolution, String> {
    match outcome {
        Some("ran") => Ok(Resolution::Ran),
        Some("did_not_run") => Ok(Resolution::DidNotRun),
        Some("abandoned") => Ok(Resolution::Abandoned),
        _ => Err("choose whether the call ran, did not run, or is given up".to_owned()),
    }
}

/// Takes `decision` by the session's principal; the flash message saying what happened. A
/// refusal the person can act on (already decided, expired, wrong state) is a message; an
/// unknown call or a broken ledger is an error page.
async fn apply(
    inbox: &Inbox,
    signed: &Signed,
    id: InvocationId,
    decision: Decision,
) -> Result<String, InboxError> {
    if let Some(problem) = decision.problem() {
        return Ok(format!("Nothing was done: {problem}."));
    }
    let done = match &decision {
        Decision::Approve => "Approved. The call runs now; its result shows here once it is done.",
        Decision::Edit { .. } => {
            "Approved with your arguments. The call runs with them now; its result shows here once it is done."
        }
        Decision::Deny { .. } => "Denied. The caller sees your reason.",
        Decision::Answer { .. } => "Answered. The caller has your answer.",
        Decision::Resolve { .. } => "Resolved.",
        // The inbox offers no such form (a caller records its own outcome over the API).
        Decision::Record { .. } => "Recorded.",
        Decision::Withdraw => "Withdrawn.",
    };
    let gateway = &inbox.app.gateway;
    match decisions::decide(gateway, id, &signed.principal, decision, "inbox").await {
        // POLICY-61: an approval toward a quorum leaves the call waiting for the others.
        Ok(row) if row.state.is_parked() || row.state == InvocationState::Proposed => Ok(
            "Your approval is counted; the call waits for more approvals before it runs."
                .to_owned(),
        ),
        Ok(_) => Ok(done.to_owned()),
        Err(error) => {
            let error = ApiError::from(error);
            match error.status() {
                StatusCode::CONFLICT | StatusCode::GONE | StatusCode::UNPROCESSABLE_ENTITY => {
                    Ok(refused(inbox, id, &error).await)
                }
                _ => Err(InboxError::Api(error)),
            }
        }
    }
}

/// A refusal in words; when someone decided first, who and when (read from the row).
async fn refused(inbox: &Inbox, id: InvocationId, error: &ApiError) -> String {
    if error.code() == "already_decided"
        && let Ok(row) = inbox.app.gateway.store().get(id).await
        && let Some(first) = row.decision
    {
        return format!(
            "Nothing was done: {} already {} this call at {}.",
            first.by,
            first.decision,
            when(first.at)
        );
    }
    format!("Nothing was done: {}.", error.message())
}
