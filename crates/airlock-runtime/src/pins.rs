//! Pinned tool definitions of connection files (docs/rules.md LEDGER-49, OPS-49 … OPS-52),
//! and their skills' entries ([`check_skills`], OPS-79): what a connection server says now,
//! against what an operator accepted.
//!
//! Guarantees: a connection without any pin is pinned whole on its first boot (trust on first
//! use); after that a discovered tool is served only when its definition equals its pin. A
//! changed tool, a new one, or one renamed (a new name whose definition, name aside, is that of
//! a pinned tool now gone) is withheld and reported; a pinned tool the server no longer lists is
//! reported removed, and its calls fail naming it. Accepting pins what the server says now.
//! What waits is described on one line, a skill's URI (the server's own text) with every
//! character that could disguise it written as an escape (INBOX-4).

use std::collections::BTreeMap;

use airlock_ledger::{LedgerError, Store, ToolPin};
use airlock_spec::ToolSpec;
use serde_json::Value;

use crate::execute::mcp::Discovered;

mod skills;

pub use skills::{CheckedSkills, check_skills, is_skill};

/// Who pinned a connection's tools on its first boot.
pub const FIRST_USE: &str = "trust on first use";

/// How a discovered tool differs from its pin.
#[derive(Debug, Clone, PartialEq)]
pub enum Difference {
    /// Pinned under this name with another definition.
    Changed {
        /// The pinned definition.
        pinned: Value,
    },
    /// Not pinned, and not a renamed pinned tool.
    New,
    /// Not pinned; its definition, name aside, is that of `from`, which the server no longer
    /// lists.
    Renamed {
        /// The pinned name it replaces.
        from: String,
    },
    /// Pinned, and no longer listed by the server.
    Removed {
        /// The pinned definition.
        pinned: Value,
    },
}

/// What is pinned: a tool's definition, or a skill's entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pinned {
    /// A tool, by its name on the server.
    Tool,
    /// A skill (SEP-2640), by the URI of its `SKILL.md` on the server (OPS-79).
    Skill,
}

/// One tool or skill that is not served as discovered, until an operator accepts it.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    /// The connection file's namespace.
    pub connection: String,
    /// The tool's name on the server, or the skill's URI there.
    pub tool: String,
    /// Which of the two it is.
    pub kind: Pinned,
    /// What differs.
    pub difference: Difference,
    /// Its definition now (`Null` for a removed tool).
    pub definition: Value,
}

impl Pending {
    /// One line for a log or a terminal.
    #[must_use]
    pub fn describe(&self) -> String {
        // A skill's URI is the server's own text, shown on one line with nothing hidden.
        let t = airlock_spec::visible_text(&self.tool).replace('\n', "\\n");
        let (c, t) = (&self.connection, t.replace('\t', "\\t"));
        let (kind, changed) = match self.kind {
            Pinned::Tool => ("tool", "its definition"),
            Pinned::Skill => ("skill", "its files or frontmatter"),
        };
        match &self.difference {
            Difference::Changed { .. } => format!("{c}: {kind} `{t}` changed {changed}"),
            Difference::New => format!("{c}: {kind} `{t}` is new"),
            Difference::Renamed { from } => {
                format!("{c}: {kind} `{t}` is new (`{from}` renamed?)")
            }
            Difference::Removed { .. } => format!("{c}: {kind} `{t}` was removed by the server"),
        }
    }
}

/// What a boot serves of the discovered tools.
#[derive(Debug, Default)]
pub struct Checked {
    /// Discovered tools whose definitions equal their pins: served.
    pub served: Vec<ToolSpec>,
    /// What waits for an operator.
    pub pending: Vec<Pending>,
}

/// Compares `discovered` with the ledger's pins; a connection without pins is pinned whole
/// when `first_use` (a boot) and only served otherwise (a read-only `airlock tools diff`).
///
/// # Errors
/// The ledger's.
pub async fn check(
    store: &dyn Store,
    discovered: Vec<Discovered>,
    first_use: bool,
) -> Result<Checked, LedgerError> {
    let pins = store.tool_pins().await?;
    let pins = by_connection(pins.into_iter().filter(|p| !is_skill(&p.tool)).collect());
    let mut checked = Checked::default();
    for (connection, tools) in group(discovered) {
        let Some(pinned) = pins.get(&connection) else {
            for tool in tools.iter().filter(|_| first_use) {
                store.pin_tool(pin_of(&connection, tool, FIRST_USE)).await?;
            }
            checked.served.extend(tools.into_iter().map(|t| t.spec));
            continue;
        };
        compare(&connection, tools, pinned, &mut checked);
    }
    // A connection whose server now lists nothing still has its pins: all removed.
    for (connection, pinned) in &pins {
        if !checked
            .served
            .iter()
            .any(|s| namespace(s) == Some(connection.as_str()))
            && !checked.pending.iter().any(|p| &p.connection == connection)
        {
            compare(connection, Vec::new(), pinned, &mut checked);
        }
    }
    Ok(checked)
}

/// The connections with a pin of any kind (a tool's or a skill's): read before a boot's
/// [`check`], it tells [`check_skills`] which connections are on their first boot (OPS-52).
///
/// # Errors
/// The ledger's.
pub async fn pinned_connections(
    store: &dyn Store,
) -> Result<std::collections::HashSet<String>, LedgerError> {
    let pins = store.tool_pins().await?;
    Ok(pins.into_iter().map(|p| p.connection).collect())
}

/// Pins what the server says now for `connection` (every pending tool, or only `tool`), and
/// drops the pins of removed tools it covers. Returns what was accepted.
///
/// # Errors
/// The ledger's; [`LedgerError::Invalid`] when nothing of `connection` (or `tool`) waits.
pub async fn accept(
    store: &dyn Store,
    pending: &[Pending],
    connection: &str,
    tool: Option<&str>,
    by: &str,
) -> Result<Vec<Pending>, LedgerError> {
    let chosen: Vec<Pending> = pending
        .iter()
        .filter(|p| p.connection == connection && tool.is_none_or(|t| t == p.tool))
        .cloned()
        .collect();
    if chosen.is_empty() {
        let what = tool.map_or_else(|| connection.to_owned(), |t| format!("{connection} {t}"));
        return Err(LedgerError::Invalid(format!(
            "nothing of {what} waits to be accepted"
        )));
    }
    for p in &chosen {
        match p.difference {
            Difference::Removed { .. } => {
                store
                    .unpin_tool(p.connection.clone(), p.tool.clone())
                    .await?;
            }
            _ => {
                let pin = ToolPin {
                    connection: p.connection.clone(),
                    tool: p.tool.clone(),
                    definition: p.definition.clone(),
                    pinned_by: by.to_owned(),
                    pinned_at: time::OffsetDateTime::now_utc(),
                };
                store.pin_tool(pin).await?;
            }
        }
    }
    Ok(chosen)
}

fn compare(
    connection: &str,
    tools: Vec<Discovered>,
    pinned: &BTreeMap<String, Value>,
    checked: &mut Checked,
) {
    let listed: Vec<String> = tools.iter().filter_map(remote_name).collect();
    let gone: Vec<(&String, &Value)> = pinned.iter().filter(|(n, _)| !listed.contains(n)).collect();
    for tool in tools {
        let Some(name) = remote_name(&tool) else {
            continue;
        };
        let difference = match pinned.get(&name) {
            Some(pin) if *pin == tool.definition => {
                checked.served.push(tool.spec);
                continue;
            }
            Some(pin) => Difference::Changed {
                pinned: pin.clone(),
            },
            None => match gone
                .iter()
                .find(|(_, pin)| same_but_name(pin, &tool.definition))
            {
                Some((from, _)) => Difference::Renamed {
                    from: (*from).clone(),
                },
                None => Difference::New,
            },
        };
        checked.pending.push(Pending {
            connection: connection.to_owned(),
            tool: name,
            kind: Pinned::Tool,
            difference,
            definition: tool.definition,
        });
    }
    for (name, pin) in gone {
        checked.pending.push(Pending {
            connection: connection.to_owned(),
            tool: name.clone(),
            kind: Pinned::Tool,
            difference: Difference::Removed {
                pinned: pin.clone(),
            },
            definition: Value::Null,
        });
    }
}

fn same_but_name(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(map) = v.as_object_mut() {
            map.remove("name");
        }
        v
    };
    strip(a) == strip(b)
}

fn pin_of(connection: &str, tool: &Discovered, by: &str) -> ToolPin {
    ToolPin {
        connection: connection.to_owned(),
        tool: remote_name(tool).unwrap_or_default(),
        definition: tool.definition.clone(),
        pinned_by: by.to_owned(),
        pinned_at: time::OffsetDateTime::now_utc(),
    }
}

fn namespace(spec: &ToolSpec) -> Option<&str> {
    match &spec.source {
        airlock_spec::ToolSource::Connection(c) => Some(&c.namespace),
        _ => None,
    }
}

fn remote_name(tool: &Discovered) -> Option<String> {
    match &tool.spec.source {
        airlock_spec::ToolSource::Connection(c) => Some(c.remote_name.clone()),
        _ => None,
    }
}

fn group(discovered: Vec<Discovered>) -> BTreeMap<String, Vec<Discovered>> {
    let mut out: BTreeMap<String, Vec<Discovered>> = BTreeMap::new();
    for tool in discovered {
        if let Some(ns) = namespace(&tool.spec).map(str::to_owned) {
            out.entry(ns).or_default().push(tool);
        }
    }
    out
}

fn by_connection(pins: Vec<ToolPin>) -> BTreeMap<String, BTreeMap<String, Value>> {
    let mut out: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
    for pin in pins {
        out.entry(pin.connection)
            .or_default()
            .insert(pin.tool, pin.definition);
    }
    out
}

/// A removed tool as the gateway scope keeps it, from its pin, so its calls fail naming it
/// instead of being unknown (docs/rules.md OPS-51); `None` for anything else.
#[must_use]
pub fn removed_spec(pending: &Pending) -> Option<ToolSpec> {
    let Difference::Removed { pinned } = &pending.difference else {
        return None;
    };
    if pending.kind == Pinned::Skill {
        return None;
    }
    let name = format!("{}__{}", pending.connection, pending.tool);
    let name = airlock_spec::ToolName::try_from(name.as_str()).ok()?;
    let schema = pinned.get("inputSchema").cloned();
    Some(ToolSpec {
        definition: airlock_spec::ToolDefinition {
            name,
            description: pinned["description"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            input_schema: schema.unwrap_or_else(|| serde_json::json!({"type": "object"})),
        },
        source: airlock_spec::ToolSource::Connection(airlock_spec::ConnectionTool {
            namespace: pending.connection.clone(),
            remote_name: pending.tool.clone(),
            output_schema: pinned.get("outputSchema").cloned(),
        }),
        policy: airlock_spec::Policy::default(),
    })
}
