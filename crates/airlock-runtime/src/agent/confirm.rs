//! The confirmation gate (docs/rules.md POLICY-30..POLICY-35): a call of a `confirm: true`
//! catalog action is not run when the model makes it. airlock holds it in the ledger (one per
//! session, by tool and arguments fingerprint) and tells the person itself — a
//! [`RunEvent::ConfirmationRequired`] and the report's `confirmation`, never model text — and
//! only the person's literal next message, one of the yes-words, lets one call with the same
//! tool and arguments through, once, in the run that message started.
//!
//! Who may consent: only a person's message, which is the input of a root run
//! ([`answer`], called when a run starts). A sub-agent's input comes from a model, so it never
//! grants; a sub-agent's call belongs to its root run and uses the root's consent.

use airlock_ledger::{Answered, Confirmation, RunId};
use airlock_model::ToolCall;
use airlock_spec::{canonical_json, sha256_hex};
use serde::Serialize;
use serde_json::Value;

use super::Agents;
use super::ctx::RunCtx;
use super::settle::{self, Settled};
use super::types::{AgentError, RunEvent};

/// The words a person consents with unless configured otherwise.
pub const DEFAULT_YES_WORDS: [&str; 3] = ["yes", "y", "confirm"];

/// The messages that consent: compared after trimming, collapsing inner whitespace and
/// lowercasing, so `"  Yes "` consents and `"yes please"` or `"yes."` do not (POLICY-33).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YesWords(Vec<String>);

impl YesWords {
    /// The given words (normalized); an empty list is the defaults, so some word consents.
    pub fn new<S: AsRef<str>>(words: impl IntoIterator<Item = S>) -> Self {
        let words: Vec<String> = words
            .into_iter()
            .map(|w| normalize(w.as_ref()))
            .filter(|w| !w.is_empty())
            .collect();
        if words.is_empty() {
            return Self::default();
        }
        Self(words)
    }

    /// Whether `message` is one of the words.
    #[must_use]
    pub fn consents(&self, message: &str) -> bool {
        let message = normalize(message);
        self.0.contains(&message)
    }

    /// The words, normalized.
    #[must_use]
    pub fn words(&self) -> &[String] {
        &self.0
    }
}

impl Default for YesWords {
    fn default() -> Self {
        Self(DEFAULT_YES_WORDS.iter().map(|w| (*w).to_owned()).collect())
    }
}

fn normalize(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// What the person is shown while a call waits for their consent: airlock's own words.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConfirmationNotice {
    /// The tool the model called.
    pub tool: String,
    /// The arguments it would run with (the model's: show them escaped).
    pub arguments: Value,
    /// The messages that consent; anything else cancels.
    pub yes_words: Vec<String>,
}

impl ConfirmationNotice {
    pub(super) fn of(held: &Confirmation, words: &YesWords) -> Self {
        Self {
            tool: held.tool.clone(),
            arguments: held.arguments.clone(),
            yes_words: words.words().to_vec(),
        }
    }
}

/// Logs what the person's message that started run `run` did to the session's held call
/// (POLICY-33; the ledger answered it in the run's first commit).
pub(super) fn answered(run: RunId, answered: &Answered) {
    match answered {
        Answered::Nothing => {}
        Answered::Granted(held) => {
            tracing::info!(target: crate::EVENTS, run = %run, tool = %held.tool, "the person confirmed a held call");
        }
        Answered::Cancelled(held) => {
            tracing::info!(target: crate::EVENTS, run = %run, tool = %held.tool, "a held call was cancelled by the person's message");
        }
    }
}

/// Whether `tool` of the run's scope asks for the person's consent.
pub(super) fn confirms(agents: &Agents, ctx: &RunCtx<'_>, tool: &str) -> bool {
    agents
        .gateway()
        .scope(&ctx.scope)
        .and_then(|s| s.get(tool))
        .is_some_and(|t| t.policy.confirm)
}

/// A call of a `confirm: true` action: along the one path when the person consented to exactly
/// this tool and these arguments in this run (POLICY-34); else held, and the person asked.
pub(super) async fn gate(
    agents: &Agents,
    ctx: &RunCtx<'_>,
    call_id: &str,
    call: &ToolCall,
) -> Result<Settled, AgentError> {
    let root = agents.store().get_run(ctx.detail.root).await?;
    let fingerprint = sha256_hex(canonical_json(&call.arguments).as_bytes());
    let held = (call.name.clone(), fingerprint.clone());
    let consented = agents
        .store()
        .take_confirmation(root.session_id, root.id, held, call_id.to_owned())
        .await?;
    if consented {
        return settle::through_gateway(agents, ctx, call_id, call).await;
    }
    let held = Confirmation {
        session_id: root.session_id,
        run_id: root.id,
        tool: call.name.clone(),
        fingerprint,
        arguments: call.arguments.clone(),
        granted_run: None,
        used_by_call: None,
    };
    agents.store().hold_confirmation(held.clone()).await?;
    tracing::info!(target: crate::EVENTS, run = %root.id, tool = %call.name, "a call waits for the person's confirmation");
    let notice = ConfirmationNotice::of(&held, &agents.inner.yes_words);
    ctx.emit(RunEvent::ConfirmationRequired { notice }).await;
    Ok(Settled::Result {
        content: format!(
            "NOT EXECUTED: `{}` runs only after the person confirms it. airlock has asked them directly; their next message decides. Do not say it was done, and do not ask again in other words.",
            call.name
        ),
        is_error: false,
    })
}
