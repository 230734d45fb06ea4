//! `[notify]` of `airlock.toml`: who is told when a call waits for a person or is decided
//! (docs/rules.md NOTIFY-1 … NOTIFY-10, DECL-55 … DECL-58). Secrets are credential paths, never
//! values; URLs are checked like every other URL the gateway reaches.

use crate::diag::Diag;
use crate::fields::Fields;
use crate::names::CredentialPath;
use crate::policy::NotifyEvent;
use crate::refs::Referenced;
use crate::tree::Node;
use crate::values::{credential_at, credential_path, secret_url};

/// Slack's Web API, the default `api_base`.
pub const SLACK_API: &str = "https://slack.com/api";

/// `[notify]`: nothing is configured by default, and then nothing is written to the outbox.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NotifySettings {
    /// `[[notify.webhooks]]`: signed JSON events POSTed to each URL.
    pub webhooks: Vec<WebhookSettings>,
    /// `[notify.slack]`: a card in one channel per parked call, decided by allow-listed users.
    pub slack: Option<SlackSettings>,
}

impl NotifySettings {
    /// Whether anything is to be told at all.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.webhooks.is_empty() && self.slack.is_none()
    }
}

/// One `[[notify.webhooks]]` entry (DECL-56).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookSettings {
    /// `url`: where events are POSTed (through the egress guard).
    pub url: String,
    /// `secret`: credential path of the signing secret (`whsec_<base64>`, or raw text).
    pub secret: CredentialPath,
    /// `previous_secrets`: credential paths of secrets being rotated out; each delivery is
    /// signed with them too, after `secret` (default none).
    pub previous_secrets: Vec<CredentialPath>,
    /// `events`: which events this receiver gets (default: all four).
    pub events: Vec<NotifyEvent>,
}

/// `[notify.slack]` (DECL-57).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlackSettings {
    /// `bot_token`: credential path of the bot's `xoxb-` token.
    pub bot_token: CredentialPath,
    /// `channel`: the channel id (or name) cards are posted to.
    pub channel: String,
    /// `signing_secret`: credential path of the app's signing secret.
    pub signing_secret: CredentialPath,
    /// `deciders`: Slack user ids allowed to approve or deny (empty: nobody decides in Slack).
    pub deciders: Vec<String>,
    /// `api_base`: Slack's Web API (default `https://slack.com/api`).
    pub api_base: String,
}

/// Reads `[notify]`.
pub(crate) fn read_notify(node: Option<&Node>, d: &mut Diag) -> NotifySettings {
    let Some(f) = node.and_then(|n| Fields::open(n, "notify", &["webhooks", "slack"], d)) else {
        return NotifySettings::default();
    };
    let webhooks = f
        .opt_list("webhooks", d)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(path, item)| webhook(item, &path, d))
        .collect();
    let slack = f.get("slack").and_then(|n| slack(n, d));
    NotifySettings { webhooks, slack }
}

fn webhook(node: &Node, path: &str, d: &mut Diag) -> Option<WebhookSettings> {
    let keys = ["url", "secret", "previous_secrets", "events"];
    let f = Fields::open(node, path, &keys, d)?;
    let secret = secret(&f, "secret", d);
    let previous_secrets = previous_secrets(&f, d);
    let url = secret_url(&f, "url", d);
    let events = match f.opt_str_list("events", d) {
        None => NotifyEvent::ALL.to_vec(),
        Some(words) => words
            .into_iter()
            .filter_map(|(word, at)| {
                word.parse::<NotifyEvent>()
                    .map_err(|e| d.push(at, &f.key("events"), e.to_string()))
                    .ok()
            })
            .collect(),
    };
    Some(WebhookSettings {
        url: url?,
        secret: secret?,
        previous_secrets: previous_secrets?,
        events,
    })
}

fn slack(node: &Node, d: &mut Diag) -> Option<SlackSettings> {
    let keys = [
        "bot_token",
        "channel",
        "signing_secret",
        "deciders",
        "api_base",
    ];
    let f = Fields::open(node, "notify.slack", &keys, d)?;
    let bot_token = secret(&f, "bot_token", d);
    let signing_secret = secret(&f, "signing_secret", d);
    let channel = f.req_str("channel", d);
    let deciders = f
        .opt_str_list("deciders", d)
        .unwrap_or_default()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    let api_base = match f.get("api_base") {
        Some(_) => secret_url(&f, "api_base", d)?,
        None => SLACK_API.to_owned(),
    };
    Some(SlackSettings {
        bot_token: bot_token?,
        channel: channel?,
        signing_secret: signing_secret?,
        deciders,
        api_base: api_base.trim_end_matches('/').to_owned(),
    })
}

/// A required credential path, referenced so `airlock check` finds it missing.
fn secret(f: &Fields<'_>, key: &str, d: &mut Diag) -> Option<CredentialPath> {
    f.required(key, d)?;
    credential_at(f, key, d)
}

/// `previous_secrets`: credential paths, each referenced like `secret`; `None` after an error.
fn previous_secrets(f: &Fields<'_>, d: &mut Diag) -> Option<Vec<CredentialPath>> {
    let Some(items) = f.opt_list("previous_secrets", d) else {
        return f.get("previous_secrets").is_none().then(Vec::new);
    };
    let count = items.len();
    let paths: Vec<CredentialPath> = items
        .into_iter()
        .filter_map(|(at, item)| {
            let path = credential_path(item, &at, d)?;
            d.refer(item.at, &at, Referenced::Credential(path.clone()));
            Some(path)
        })
        .collect();
    // Every item is checked (all problems reported at once); one bad item fails the key.
    (paths.len() == count).then_some(paths)
}
