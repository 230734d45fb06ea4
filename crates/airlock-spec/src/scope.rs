//! Scopes: the tools one caller can see — the gateway scope (connection tools and enabled
//! builtins) or one agent's scope — their definitions digest, and each tool's own digest.
//!
//! The scope digest is SHA-256 over canonical JSON of the sorted model-visible definitions
//! (name, description, input schema), so it does not depend on file or key order and changes
//! whenever anything the model sees changes. A tool's digest covers the same fields of that one
//! tool plus the scope's id: it changes when that tool changes and never when another tool of
//! the scope does, which is what approvals and `once` grants are bound to (docs/rules.md
//! POLICY-6), and it keeps a grant given in one scope from matching a same-named tool of another.
//!
//! A [`ScopeId`] has one written form, `gateway` or `agent:<name>`, produced by its `Display`
//! and read back by its `FromStr` — in `airlock.toml` token scopes, in session metadata stored
//! in the ledger, and in messages — so the form cannot drift between those places.

use std::fmt;
use std::str::FromStr;

use serde_json::json;

use crate::canonical::{canonical_json, sha256_hex};
use crate::names::check_slug;
use crate::tool::{ToolDefinition, ToolSpec};

/// Which scope a set of tools belongs to. Written `gateway` or `agent:<name>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ScopeId {
    /// The gateway's own scope, served at `/mcp`.
    Gateway,
    /// One agent's scope, served at `/agents/{name}/mcp` and used by its runs.
    Agent(String),
}

/// The prefix of an agent scope's written form.
const AGENT_PREFIX: &str = "agent:";

impl fmt::Display for ScopeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Gateway => f.write_str("gateway"),
            Self::Agent(name) => write!(f, "{AGENT_PREFIX}{name}"),
        }
    }
}

/// Text that is not a scope, with the reason for the person who wrote it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseScopeError(String);

impl FromStr for ScopeId {
    type Err = ParseScopeError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text == "gateway" {
            return Ok(Self::Gateway);
        }
        match text.strip_prefix(AGENT_PREFIX) {
            // Agent names are the manifests' slugs, so anything else names no agent.
            Some(name) => check_slug(name, 64)
                .map(|()| Self::Agent(name.to_owned()))
                .map_err(|reason| ParseScopeError(format!("agent name `{name}`: {reason}"))),
            None => Err(ParseScopeError(format!(
                "unknown scope `{text}`: expected \"gateway\" or \"agent:<name>\""
            ))),
        }
    }
}

/// The tools of one scope, unique by name.
#[derive(Debug, Clone, PartialEq)]
pub struct Scope {
    /// Which scope this is.
    pub id: ScopeId,
    tools: Vec<ToolSpec>,
}

/// A tool name already taken in a scope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tool `{0}` is declared twice in this scope; rename one of them")]
pub struct NameCollision(pub String);

impl Scope {
    /// An empty scope.
    #[must_use]
    pub fn new(id: ScopeId) -> Self {
        Self {
            id,
            tools: Vec::new(),
        }
    }

    /// Adds a tool; a name already present is refused (never overwritten).
    pub fn add(&mut self, tool: ToolSpec) -> Result<(), NameCollision> {
        if self.get(tool.definition.name.as_str()).is_some() {
            return Err(NameCollision(tool.definition.name.to_string()));
        }
        self.tools.push(tool);
        Ok(())
    }

    /// The tool named `name`.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&ToolSpec> {
        self.tools
            .iter()
            .find(|t| t.definition.name.as_str() == name)
    }

    /// Every tool, in declaration order.
    #[must_use]
    pub fn tools(&self) -> &[ToolSpec] {
        &self.tools
    }

    /// The definitions digest of this scope.
    #[must_use]
    pub fn digest(&self) -> String {
        definitions_digest(self.tools.iter().map(|t| &t.definition))
    }

    /// The digest of `definition` as a tool of this scope (docs/rules.md DECL-34): SHA-256
    /// (hex) of the canonical JSON of the scope's id and the tool's model-visible definition.
    #[must_use]
    pub fn tool_digest(&self, definition: &ToolDefinition) -> String {
        let value = json!({"scope": self.id.to_string(), "tool": model_visible(definition)});
        sha256_hex(canonical_json(&value).as_bytes())
    }
}

/// What the model sees of a tool, as hashed by both digests.
fn model_visible(d: &ToolDefinition) -> serde_json::Value {
    json!({"name": d.name.as_str(), "description": d.description, "input_schema": d.input_schema})
}

/// SHA-256 (hex) of the canonical JSON of `definitions`, sorted by name.
pub fn definitions_digest<'a>(definitions: impl IntoIterator<Item = &'a ToolDefinition>) -> String {
    let mut defs: Vec<&ToolDefinition> = definitions.into_iter().collect();
    defs.sort_by(|a, b| a.name.cmp(&b.name));
    let list: Vec<serde_json::Value> = defs.into_iter().map(model_visible).collect();
    sha256_hex(canonical_json(&serde_json::Value::Array(list)).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_forms_round_trip() {
        for (scope, text) in [
            (ScopeId::Gateway, "gateway"),
            (ScopeId::Agent("support".into()), "agent:support"),
        ] {
            assert_eq!(scope.to_string(), text);
            assert_eq!(text.parse::<ScopeId>(), Ok(scope));
        }
    }

    fn tool(name: &str, description: &str) -> ToolSpec {
        ToolSpec {
            definition: ToolDefinition {
                name: crate::ToolName::try_from(name).unwrap(),
                description: description.to_owned(),
                input_schema: json!({"type": "object"}),
            },
            source: crate::ToolSource::Local,
            policy: crate::Policy::default(),
        }
    }

    fn scope_of(id: ScopeId, tools: &[ToolSpec]) -> Scope {
        let mut scope = Scope::new(id);
        tools.iter().for_each(|t| scope.add(t.clone()).unwrap());
        scope
    }

    /// POLICY-6: a tool's digest moves with that tool only, and differs between scopes.
    #[test]
    fn a_tools_digest_ignores_the_other_tools_of_its_scope() {
        let (a, b) = (tool("a", "A"), tool("b", "B"));
        let before = scope_of(ScopeId::Gateway, &[a.clone(), b.clone()]);
        let b2 = tool("b", "B, changed");
        let after = scope_of(ScopeId::Gateway, &[a.clone(), b2.clone(), tool("c", "C")]);
        let digest = |scope: &Scope, t: &ToolSpec| scope.tool_digest(&t.definition);
        assert_ne!(before.digest(), after.digest());
        assert_eq!(digest(&before, &a), digest(&after, &a));
        assert_ne!(digest(&before, &b), digest(&after, &b2));
        assert_ne!(
            digest(&before, &a),
            digest(&before, &tool("a", "A, changed"))
        );
        let elsewhere = scope_of(ScopeId::Agent("x".into()), std::slice::from_ref(&a));
        assert_ne!(digest(&before, &a), digest(&elsewhere, &a));
    }

    #[test]
    fn parse_errors_name_the_expected_forms() {
        let unknown = "everything".parse::<ScopeId>().unwrap_err();
        assert_eq!(
            unknown.to_string(),
            "unknown scope `everything`: expected \"gateway\" or \"agent:<name>\""
        );
        let bad = "agent:Bad Name".parse::<ScopeId>().unwrap_err();
        assert!(
            bad.to_string().starts_with("agent name `Bad Name`: "),
            "{bad}"
        );
        assert!("agent:".parse::<ScopeId>().is_err());
        assert!("Gateway".parse::<ScopeId>().is_err());
    }
}
