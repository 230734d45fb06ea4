//! Pinned skills of connection files (docs/rules.md OPS-79, LEDGER-75): a skill entry (its
//! frontmatter and every file's digest and size, SEP-2640) against the one an operator
//! accepted, kept beside the tools' pins.
//!
//! Guarantees: a skill is pinned under the URI of its `SKILL.md` on the server, in the pins'
//! table with its connection; a URI always holds `:`, which a tool name never does, so a skill's
//! pin is never taken for a tool's, nor a tool's for a skill's. A connection with no pin of any
//! kind is pinned whole on its first boot (OPS-52); after that a listed skill is served only when
//! its entry equals its pin. A changed entry (any file's digest or size, a file added or gone,
//! the frontmatter) or a new skill is withheld and reported; a pinned skill the server no longer
//! lists is reported removed. A listed skill whose `uri` is no URI is neither served nor pinned.

use std::collections::BTreeMap;

use airlock_ledger::{LedgerError, Store, ToolPin};
use airlock_mcp::Entry;
use serde_json::Value;

use super::{Difference, FIRST_USE, Pending, Pinned};

/// Whether a pin's key is a skill's (a URI) rather than a tool's name.
#[must_use]
pub fn is_skill(key: &str) -> bool {
    key.contains(':')
}

/// What a boot serves of a connection's listed skills.
#[derive(Debug, Default)]
pub struct CheckedSkills {
    /// Listed skills whose entries equal their pins: served.
    pub served: Vec<Entry>,
    /// What waits for an operator.
    pub pending: Vec<Pending>,
}

/// Compares the skills `connection`'s server `listed` with their pins among `pins`; a
/// connection with no pin of any kind before this boot (`fresh`) is pinned whole when
/// `first_use` (a boot) and only served otherwise (a read-only `airlock tools diff`).
///
/// # Errors
/// The ledger's.
pub async fn check_skills(
    store: &dyn Store,
    connection: &str,
    listed: Vec<Entry>,
    pins: &[ToolPin],
    fresh: bool,
    first_use: bool,
) -> Result<CheckedSkills, LedgerError> {
    let pinned: BTreeMap<&str, &Value> = pins
        .iter()
        .filter(|p| p.connection == connection && is_skill(&p.tool))
        .map(|p| (p.tool.as_str(), &p.definition))
        .collect();
    let mut checked = CheckedSkills::default();
    let mut seen = Vec::new();
    for skill in listed {
        let uri = skill.get("uri").and_then(Value::as_str).unwrap_or_default();
        if !is_skill(uri) {
            tracing::warn!(
                connection,
                uri,
                "a skill whose uri is not a URI is not served"
            );
            continue;
        }
        let uri = uri.to_owned();
        let definition = Value::Object(skill.clone());
        let difference = match pinned.get(uri.as_str()) {
            Some(pin) if **pin == definition => None,
            Some(pin) => Some(Difference::Changed {
                pinned: (*pin).clone(),
            }),
            None if fresh => None,
            None => Some(Difference::New),
        };
        if fresh && first_use {
            store
                .pin_tool(pin_of(connection, &uri, &definition))
                .await?;
        }
        match difference {
            None => checked.served.push(skill),
            Some(difference) => checked.pending.push(Pending {
                connection: connection.to_owned(),
                tool: uri.clone(),
                kind: Pinned::Skill,
                difference,
                definition,
            }),
        }
        seen.push(uri);
    }
    for (uri, pin) in pinned
        .into_iter()
        .filter(|(u, _)| !seen.iter().any(|s| s == u))
    {
        checked.pending.push(Pending {
            connection: connection.to_owned(),
            tool: uri.to_owned(),
            kind: Pinned::Skill,
            difference: Difference::Removed {
                pinned: pin.clone(),
            },
            definition: Value::Null,
        });
    }
    Ok(checked)
}

fn pin_of(connection: &str, uri: &str, definition: &Value) -> ToolPin {
    ToolPin {
        connection: connection.to_owned(),
        tool: uri.to_owned(),
        definition: definition.clone(),
        pinned_by: FIRST_USE.to_owned(),
        pinned_at: time::OffsetDateTime::now_utc(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skills_uri_is_described_on_one_line_with_nothing_hidden() {
        let pending = Pending {
            connection: "crm".into(),
            tool: "skill://a\u{202E}b\nwithheld: nothing/SKILL.md".into(),
            kind: Pinned::Skill,
            difference: Difference::New,
            definition: Value::Null,
        };
        assert_eq!(
            pending.describe(),
            "crm: skill `skill://a\\u{202E}b\\nwithheld: nothing/SKILL.md` is new"
        );
    }
}
