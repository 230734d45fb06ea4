//! Per-tool policy words shared by declarations, the ledger and the runtime.
//!
//! Each enum has one spelling per variant (`as_str` / `FromStr`), the same in YAML, in the
//! database and in JSON, so a stored row always reads back as the policy that was declared.

use std::fmt;
use std::str::FromStr;

macro_rules! words {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $word:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($(#[$vmeta])* $variant),+ }

        impl $name {
            /// Every accepted spelling, in declaration order (used in error messages).
            pub const WORDS: &'static [&'static str] = &[$($word),+];

            /// The one spelling of this value.
            #[must_use]
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $word),+ }
            }
        }

        impl FromStr for $name {
            type Err = UnknownWord;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($word => Ok(Self::$variant),)+
                    other => Err(UnknownWord { word: other.to_owned(), expected: Self::WORDS }),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

words! {
    /// What happened to a call that a person is told about (docs/rules.md NOTIFY-1): the
    /// `type` of a webhook event, and what the ledger's outbox records (LEDGER-30).
    NotifyEvent {
        /// The call waits for a person: an approval or an answer.
        #[default]
        Parked = "invocation.parked",
        /// The call was not run: it waits as a proposal a person may approve or deny.
        Proposed = "invocation.proposed",
        /// Nobody decided it within its tool's `escalate.after`: more people may now.
        Escalated = "invocation.escalated",
        /// A person approved, denied, answered or resolved it.
        Decided = "invocation.decided",
        /// Nobody decided before it expired.
        Expired = "invocation.expired",
        /// It may have run: a person must settle it.
        InDoubt = "invocation.in_doubt",
        /// It waits until its principal has a credential for its connection (docs/rules.md
        /// LEDGER-82): that person must connect their account or set their secret.
        CredentialRequired = "invocation.credential_required",
    }
}

impl NotifyEvent {
    /// Every event, in the order a call meets them.
    pub const ALL: [Self; 7] = [
        Self::Parked,
        Self::Proposed,
        Self::Escalated,
        Self::Decided,
        Self::Expired,
        Self::InDoubt,
        Self::CredentialRequired,
    ];
}

words! {
    /// When a call waits for a person before it runs.
    Approval {
        /// Runs at once; no approval is recorded.
        #[default]
        Never = "never",
        /// Parks unless an identical call (same scope principal or session, tool and
        /// canonical arguments) was approved before.
        Once = "once",
        /// Every call parks for a person.
        Always = "always",
        /// Every call parks for a person like `always`; through the MCP endpoint, a client that
        /// declares elicitation asks its own person to confirm the exact call instead of
        /// waiting for an approver (docs/rules.md POLICY-38).
        Caller = "caller",
    }
}

words! {
    /// What airlock promises about running a call more than once.
    Effect {
        /// Local tools only: claim, effect and result commit in one database transaction.
        Transactional = "transactional",
        /// Runs at most once; a crash mid-call parks the row `in_doubt` for a person.
        #[default]
        AtMostOnce = "at_most_once",
        /// Safe to repeat: re-run after a crash with the same idempotency key.
        Idempotent = "idempotent",
    }
}

words! {
    /// How a call is carried out.
    Mode {
        /// The call runs.
        #[default]
        Execute = "execute",
        /// The call is recorded and returned as a proposal; nobody is called.
        Propose = "propose",
    }
}

words! {
    /// Whose budget a limit keeps.
    LimitBy {
        /// The declaration's tools as a whole.
        #[default]
        Tool = "tool",
        /// Each principal's calls.
        Principal = "principal",
        /// Each agent run's calls (each session's, outside a run).
        Run = "run",
        /// Each agent's calls (the gateway scope's, for the MCP endpoint's).
        Agent = "agent",
    }
}

words! {
    /// What a call over a limit gets.
    LimitOver {
        /// A tool error naming the limit and what is left; nothing is sent.
        #[default]
        Deny = "deny",
        /// The call waits for a person, who sees the figures.
        Approval = "approval",
    }
}

words! {
    /// Where a tool runs.
    SourceKind {
        /// Compiled into the process.
        #[default]
        Local = "local",
        /// A remote MCP server.
        Mcp = "mcp",
        /// A declarative HTTP API.
        Api = "api",
        /// A sub-agent.
        Agent = "agent",
        /// A tool built into airlock (`ask_human`, `fetch`).
        Builtin = "builtin",
    }
}

/// A word that is not one of an enum's spellings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{word:?} is not one of {}", expected.join(" | "))]
pub struct UnknownWord {
    /// What was given.
    pub word: String,
    /// What is accepted.
    pub expected: &'static [&'static str],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip() {
        for w in Effect::WORDS {
            assert_eq!(w.parse::<Effect>().unwrap().as_str(), *w);
        }
        for w in Approval::WORDS {
            assert_eq!(w.parse::<Approval>().unwrap().to_string(), *w);
        }
    }

    #[test]
    fn unknown_word_lists_choices() {
        let err = "sometimes".parse::<Approval>().unwrap_err();
        assert_eq!(
            err.to_string(),
            r#""sometimes" is not one of never | once | always | caller"#
        );
    }

    #[test]
    fn defaults_follow_decl_10() {
        assert_eq!(Approval::default(), Approval::Never);
        assert_eq!(Effect::default(), Effect::AtMostOnce);
    }
}
