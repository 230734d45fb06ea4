//! Scopes: the tools one caller can see — the gateway scope (connection tools and enabled
//! builtins) or one agent's scope — and their definitions digest.
//!
//! The digest is SHA-256 over canonical JSON of the sorted model-visible definitions
//! (name, description, input schema), so it does not depend on file or key order and changes
//! whenever anything the model sees changes.

use serde_json::json;

use crate::canonical::{canonical_json, sha256_hex};
use crate::tool::{ToolDefinition, ToolSpec};

/// Which scope a set of tools belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ScopeId {
    /// The gateway's own scope, served at `/mcp`.
    Gateway,
    /// One agent's scope, served at `/agents/{name}/mcp` and used by its runs.
    Agent(String),
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
}

/// SHA-256 (hex) of the canonical JSON of `definitions`, sorted by name.
pub fn definitions_digest<'a>(definitions: impl IntoIterator<Item = &'a ToolDefinition>) -> String {
    let mut defs: Vec<&ToolDefinition> = definitions.into_iter().collect();
    defs.sort_by(|a, b| a.name.cmp(&b.name));
    let list: Vec<serde_json::Value> = defs
        .into_iter()
        .map(|d| json!({"name": d.name.as_str(), "description": d.description, "input_schema": d.input_schema}))
        .collect();
    sha256_hex(canonical_json(&serde_json::Value::Array(list)).as_bytes())
}
