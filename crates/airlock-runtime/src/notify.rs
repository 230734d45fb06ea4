//! Telling people (docs/rules.md NOTIFY): what the ledger's outbox holds, delivered to signed
//! webhooks and to a Slack channel, and Slack's button clicks verified on their way back.
//!
//! The ledger writes a notification in the transaction of the transition that causes it, for
//! the routes [`routes`] gives it (LEDGER-30); the [`deliver`] worker sends each, retries with
//! backoff, and gives up after [`MAX_ATTEMPTS`]. Nothing here decides anything: a click becomes
//! a decision through `decisions::decide` like every other surface's.

mod deliver;
mod slack;
mod slack_in;
mod webhook;

use airlock_ledger::OutboxRoute;
use airlock_spec::{CredentialError, CredentialPath, Credentials, NotifyEvent, NotifySettings};
use secrecy::ExposeSecret as _;

pub use deliver::{LEASE, MAX_ATTEMPTS, POLL, backoff, deliver};
pub use slack::escape as slack_escape;
pub use slack_in::{Click, ClickRefusal, SlackInteractions, WINDOW_SECS};

use slack::SlackOut;
use webhook::WebhookKey;

/// The Slack destination's name in the outbox.
pub const SLACK: &str = "slack";

/// The events a Slack channel gets: cards for parks and proposals, replaced on a decision or an
/// expiry. In-doubt calls are settled in the inbox or the CLI (a button cannot say whether it
/// ran).
const SLACK_EVENTS: [NotifyEvent; 4] = [
    NotifyEvent::Parked,
    NotifyEvent::Proposed,
    NotifyEvent::Decided,
    NotifyEvent::Expired,
];

/// A webhook's destination name: stable across restarts and reorderings, and without the URL
/// itself (which may carry a token in its query).
fn webhook_destination(url: &str) -> String {
    let digest = airlock_spec::sha256_hex(url.as_bytes());
    format!("webhook:{}", &digest[..16])
}

/// The outbox routes `[notify]` asks for (empty: no outbox rows at all).
#[must_use]
pub fn routes(settings: &NotifySettings) -> Vec<OutboxRoute> {
    let mut routes: Vec<OutboxRoute> = settings
        .webhooks
        .iter()
        .map(|w| OutboxRoute {
            destination: webhook_destination(&w.url),
            events: w.events.clone(),
        })
        .collect();
    if settings.slack.is_some() {
        routes.push(OutboxRoute {
            destination: SLACK.to_owned(),
            events: SLACK_EVENTS.to_vec(),
        });
    }
    routes
}

/// Why `[notify]` cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    /// A secret's credential is missing.
    #[error(transparent)]
    Credential(#[from] CredentialError),
    /// A webhook secret says `whsec_` but is not base64, or is empty.
    #[error("credential `{0}`: a webhook secret must be `whsec_<base64>` or non-empty text")]
    BadWebhookSecret(CredentialPath),
}

/// One receiver of signed events.
struct Webhook {
    destination: String,
    url: String,
    /// The current secret's key first, then those of `previous_secrets` (NOTIFY-10).
    keys: Vec<WebhookKey>,
}

/// Every destination, with its secrets, and where links point.
pub struct Notifications {
    webhooks: Vec<Webhook>,
    slack: Option<SlackOut>,
    public_url: Option<String>,
}

impl std::fmt::Debug for Notifications {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifications")
            .field("webhooks", &self.webhooks.len())
            .field("slack", &self.slack.is_some())
            .finish_non_exhaustive()
    }
}

impl Notifications {
    /// The destinations of `settings`, their secrets read from `credentials`.
    ///
    /// # Errors
    /// A missing credential, or a webhook secret that cannot be a key.
    pub fn new(
        settings: &NotifySettings,
        public_url: Option<&str>,
        credentials: &Credentials,
    ) -> Result<Self, NotifyError> {
        let mut webhooks = Vec::with_capacity(settings.webhooks.len());
        for w in &settings.webhooks {
            let keys = std::iter::once(&w.secret)
                .chain(&w.previous_secrets)
                .map(|path| webhook_key(path, credentials))
                .collect::<Result<_, _>>()?;
            webhooks.push(Webhook {
                destination: webhook_destination(&w.url),
                url: w.url.clone(),
                keys,
            });
        }
        let slack = match &settings.slack {
            Some(s) => Some(SlackOut {
                api_base: s.api_base.clone(),
                token: credentials.get(&s.bot_token)?.clone(),
                channel: s.channel.clone(),
            }),
            None => None,
        };
        Ok(Self {
            webhooks,
            slack,
            public_url: public_url.map(str::to_owned),
        })
    }

    /// Whether there is anything to deliver to.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.webhooks.is_empty() && self.slack.is_none()
    }

    /// The inbox card of a call: absolute under `[server] public_url`, else relative.
    fn inbox_url(&self, invocation: &str) -> String {
        let base = self.public_url.as_deref().unwrap_or("");
        format!("{base}/inbox/invocations/{invocation}")
    }
}

/// The signing key the credential at `path` holds.
fn webhook_key(
    path: &CredentialPath,
    credentials: &Credentials,
) -> Result<WebhookKey, NotifyError> {
    let secret = credentials.get(path)?;
    WebhookKey::parse(secret.expose_secret())
        .ok_or_else(|| NotifyError::BadWebhookSecret(path.clone()))
}

/// The Slack verifier `[notify.slack]` asks for, if any.
///
/// # Errors
/// The signing secret's credential is missing.
pub fn slack_interactions(
    settings: &NotifySettings,
    credentials: &Credentials,
) -> Result<Option<SlackInteractions>, NotifyError> {
    let Some(s) = &settings.slack else {
        return Ok(None);
    };
    let secret = credentials.get(&s.signing_secret)?.clone();
    Ok(Some(SlackInteractions::new(secret, s.deciders.clone())))
}

/// Why an attempt delivered nothing: retried later, or given up at once (nothing a retry
/// could change). Its text is stored on the notice and logged: never a secret or a body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Undelivered {
    reason: String,
    give_up: bool,
}

impl Undelivered {
    pub(crate) fn retry(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            give_up: false,
        }
    }

    pub(crate) fn give_up(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            give_up: true,
        }
    }

    /// The guard's refusal or a failed connection: its own words name the host, not secrets.
    pub(crate) fn egress(error: &airlock_egress::EgressError) -> Self {
        Self::retry(error.to_string())
    }

    /// Any answer but 2xx is retried — a receiver that is down or overloaded comes back —
    /// except `410 Gone` (the receiver says it wants no more of this) and `413 Payload Too
    /// Large` (the same bytes are sent again on a retry), which are final (NOTIFY-12).
    pub(crate) fn status(status: u16) -> Self {
        let reason = format!("the receiver answered HTTP {status}");
        if matches!(status, 410 | 413) {
            Self::give_up(format!("{reason}, which is final"))
        } else {
            Self::retry(reason)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NOTIFY-12: 410 and 413 end a delivery; every other failed status is retried.
    #[test]
    fn gone_and_too_large_are_final_and_other_statuses_are_retried() {
        for status in [410, 413] {
            assert!(Undelivered::status(status).give_up, "{status}");
        }
        for status in [400, 404, 408, 429, 500, 502, 503] {
            assert!(!Undelivered::status(status).give_up, "{status}");
        }
    }
}
