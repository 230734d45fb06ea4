//! The grant a person may give with an approval over the API (docs/rules.md POLICY-62):
//! `{"grant": {"reach": "call" | "tool", "uses": N, "for": "30m", "session": true}}` on
//! `POST /v1/invocations/{id}/approve`.
//!
//! Guarantees: a grant is always bounded — by uses, a time or the session, and always by a
//! time no later than `max_grant` from now (the time defaults to it); anything else is a 422
//! saying why, and nothing is decided.

use std::time::Duration;

use airlock_ledger::{Grant, GrantReach};
use serde::Deserialize;

/// The `grant` of an approval's body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GrantBody {
    /// `call` (identical calls, the default) or `tool` (any of the tool's calls).
    #[serde(default)]
    reach: Reach,
    /// How many later calls it lets through.
    uses: Option<u32>,
    /// How long it lasts, as `30m`, `2h`, `1d`.
    #[serde(rename = "for")]
    lasts: Option<String>,
    /// Only calls in the approved call's session.
    #[serde(default)]
    session: bool,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Reach {
    #[default]
    Call,
    Tool,
}

impl GrantBody {
    /// The grant it asks for, lasting no longer than `max`; or what is wrong with it.
    pub(super) fn grant(&self, max: Duration) -> Result<Grant, String> {
        if self.uses.is_none() && self.lasts.is_none() && !self.session {
            return Err("a grant is bounded: give `uses`, `for` or `session`".to_owned());
        }
        if self.uses == Some(0) {
            return Err("a grant lets at least one later call through (`uses` ≥ 1)".to_owned());
        }
        let lasts = match &self.lasts {
            None => max,
            Some(text) => airlock_spec::parse_duration(text)
                .filter(|d| !d.is_zero())
                .ok_or_else(|| format!("`for: {text}` is not a duration such as `30m` or `2h`"))?,
        };
        if lasts > max {
            return Err(format!(
                "a grant lasts at most {}s here (`max_grant`)",
                max.as_secs()
            ));
        }
        Ok(Grant {
            reach: match self.reach {
                Reach::Call => GrantReach::SameCall,
                Reach::Tool => GrantReach::Tool,
            },
            uses: self.uses,
            lasts,
            session: self.session,
        })
    }
}
