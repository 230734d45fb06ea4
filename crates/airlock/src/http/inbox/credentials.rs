//! `/inbox/credentials`: the signed-in person's own credentials for the connections declared
//! `per_principal = true` (docs/rules.md INBOX-14, CALL-13, CALL-15): set or replace a secret,
//! revoke it, or connect an account through the connection's authorization server.
//!
//! Guarantees: a person sees and changes only their own (the session's principal), never
//! anyone else's; a secret is typed into a password field, sealed, and never shown again (the
//! page shows its digest); every change is a POST carrying the session's CSRF token, checked
//! before anything else; connecting is a plain link to this server's own connect route, which
//! sends the browser on to the authorization server.

use airlock_runtime::agent::RunCredential;
use airlock_runtime::vault::{PersonalVault, Source};
use axum::Form;
use axum::extract::State;
use axum::response::{Html, Response};
use maud::{Markup, html};
use secrecy::SecretString;
use serde_json::Value;

use super::sessions::Signed;
use super::{Inbox, InboxError, changed, view};
use crate::http::error::ApiError;

const BACK: &str = "/inbox/credentials";

/// The set and revoke forms.
#[derive(serde::Deserialize)]
pub(super) struct CredentialForm {
    /// Missing reads as empty, so it is refused as a wrong token (403), not a bad form.
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    connection: String,
    #[serde(default)]
    secret: String,
}

/// `GET /inbox/credentials`.
pub(super) async fn list(
    State(inbox): State<Inbox>,
    signed: Signed,
) -> Result<Html<String>, InboxError> {
    let flash = inbox.sessions.take_flash(&signed.cookie);
    let body = match inbox.app.gateway.vault() {
        None => html! {
            h1 { "Credentials" }
            p.muted { "No connection of this deployment takes each person's own credential." }
        },
        Some(vault) => {
            let mine = vault
                .list(Some(&signed.principal))
                .await
                .map_err(|e| InboxError::Api(ApiError::internal(&e)))?;
            html! {
                h1 { "Your credentials" }
                p.muted { "Calls you make through these connections carry your own credential. A call made before you set it waits, and runs once you do." }
                @for (name, source) in vault.connections() {
                    (entry(vault, name, source, held(&mine, name), &signed))
                }
            }
        }
    };
    let page = view::page("Credentials", Some(&signed), flash.as_deref(), None, &body);
    Ok(Html(page.into_string()))
}

fn held<'a>(mine: &'a [Value], connection: &str) -> Option<&'a Value> {
    mine.iter().find(|row| row["connection"] == connection)
}

fn entry(
    vault: &PersonalVault,
    name: &str,
    source: &Source,
    held: Option<&Value>,
    signed: &Signed,
) -> Markup {
    let text = |row: &Value, key: &str| row[key].as_str().unwrap_or("-").to_owned();
    html! {
        section {
            h2 { (view::visible(name)) }
            @match held {
                Some(row) => p { "Set (" (text(row, "kind")) ", digest " code { (text(row, "digest")) } ") by " (view::visible(&text(row, "set_by"))) " at " (text(row, "set_at")) "." },
                None => p.muted { "Not set." },
            }
            @match source {
                Source::Exchange(_) => p.muted { "Your own sign-in token is exchanged on each call; there is nothing to set." },
                Source::OAuth(_) => @if let Ok(link) = vault.connect_link(name, &signed.principal) {
                    p { a href=(link.as_str()) { "Connect your account" } }
                },
                Source::Stored => form method="post" action="/inbox/credentials/set" {
                    input type="hidden" name="csrf" value=(signed.csrf);
                    input type="hidden" name="connection" value=(name);
                    label { "Secret " input type="password" name="secret" autocomplete="off" required; }
                    button type="submit" { "Set" }
                },
            }
            @if held.is_some() {
                form method="post" action="/inbox/credentials/revoke" {
                    input type="hidden" name="csrf" value=(signed.csrf);
                    input type="hidden" name="connection" value=(name);
                    button.secondary type="submit" { "Revoke" }
                }
            }
        }
    }
}

/// `POST /inbox/credentials/set`.
pub(super) async fn set(
    State(inbox): State<Inbox>,
    signed: Signed,
    Form(form): Form<CredentialForm>,
) -> Result<Response, InboxError> {
    let change = async {
        let Some(vault) = inbox.app.gateway.vault() else {
            return "Nothing was set: no connection takes a person's own credential".to_owned();
        };
        let secret = RunCredential::Token(SecretString::from(form.secret.clone()));
        let who = &signed.principal;
        match vault.set(&form.connection, who, &secret, who).await {
            Ok(released) => format!(
                "Your credential for {} is set; {} waiting call(s) continue",
                form.connection,
                released.len()
            ),
            Err(e) => format!("Nothing was set: {e}"),
        }
    };
    changed(&inbox, &signed, (&form.csrf, BACK), change).await
}

/// `POST /inbox/credentials/revoke`.
pub(super) async fn revoke(
    State(inbox): State<Inbox>,
    signed: Signed,
    Form(form): Form<CredentialForm>,
) -> Result<Response, InboxError> {
    let change = async {
        let Some(vault) = inbox.app.gateway.vault() else {
            return "Nothing was revoked".to_owned();
        };
        let who = &signed.principal;
        match vault.revoke(Some(&form.connection), who, who).await {
            Ok(n) => format!("{n} credential(s) revoked for {}", form.connection),
            Err(e) => format!("Nothing was revoked: {e}"),
        }
    };
    changed(&inbox, &signed, (&form.csrf, BACK), change).await
}
