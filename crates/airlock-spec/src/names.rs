//! Names: tool names, slugs, namespaces, credential paths — validated once, at the edge.
//!
//! A [`ToolName`] always matches `^[a-zA-Z0-9_-]{1,64}$`, the limit model providers and MCP
//! clients share (DECL-30). Final names are built by docs/rules.md DECL-9, DECL-19 and DECL-27:
//! `<slug with - → _>_<operation>` (api), `<slug with - → _>_<tool normalized>` (mcp),
//! `<connection file>__<remote tool>` (connection files).

use std::fmt;

/// Longest final tool name.
pub const MAX_TOOL_NAME: usize = 64;

/// The name of airlock's own await tool, which every MCP scope lists beside the declared tools:
/// no declared tool may take it.
pub const AWAIT_TOOL: &str = "airlock_await_decision";

/// A model-visible tool name: `^[a-zA-Z0-9_-]{1,64}$`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct ToolName(String);

impl ToolName {
    /// A name fixed in airlock's own code (builtins); checked by a unit test, not at run time.
    pub(crate) fn from_static(name: &'static str) -> Self {
        debug_assert!(
            Self::try_from(name).is_ok(),
            "{name} is not a valid tool name"
        );
        Self(name.to_owned())
    }

    /// The name as text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<&str> for ToolName {
    type Error = String;

    fn try_from(name: &str) -> Result<Self, Self::Error> {
        if name.is_empty() {
            return Err("a tool name cannot be empty".into());
        }
        if name.len() > MAX_TOOL_NAME {
            return Err(format!(
                "tool name `{name}` is {} characters; the limit is {MAX_TOOL_NAME}",
                name.len()
            ));
        }
        if let Some(c) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
        {
            return Err(format!(
                "tool name `{name}` contains {c:?}; only letters, digits, `_` and `-` are allowed"
            ));
        }
        Ok(Self(name.to_owned()))
    }
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Checks a kebab-case slug: lowercase letters and digits in words joined by single `-`.
pub(crate) fn check_slug(slug: &str, max: usize) -> Result<(), String> {
    let words_ok = !slug.is_empty()
        && slug.split('-').all(|w| {
            !w.is_empty()
                && w.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
        && slug.as_bytes()[0].is_ascii_lowercase();
    if !words_ok {
        return Err(format!(
            "`{slug}` is not a kebab-case slug (lowercase words joined by `-`, starting with a letter, e.g. `erp-cliente`)"
        ));
    }
    if slug.len() > max {
        return Err(format!(
            "`{slug}` is {} characters; the limit is {max}",
            slug.len()
        ));
    }
    Ok(())
}

/// Lowercase letters, digits and `_`, starting with a letter: the shape shared by operation
/// names, namespaces and configuration names.
fn is_lower_ident(name: &str) -> bool {
    name.as_bytes().first().is_some_and(u8::is_ascii_lowercase)
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// Checks a snake_case identifier (operation names).
pub(crate) fn check_snake(name: &str) -> Result<(), String> {
    if is_lower_ident(name) && name.split('_').all(|w| !w.is_empty()) {
        Ok(())
    } else {
        Err(format!(
            "`{name}` is not snake_case (lowercase words joined by `_`, e.g. `buscar_cliente`)"
        ))
    }
}

/// Checks a connection file's namespace (its file stem): `^[a-z][a-z0-9_]{0,31}$`.
///
/// No `__` and no trailing `_`, so `<namespace>__<tool>` splits back unambiguously.
pub(crate) fn check_namespace(name: &str) -> Result<(), String> {
    if name.len() <= 32 && is_lower_ident(name) && !name.contains("__") && !name.ends_with('_') {
        Ok(())
    } else {
        Err(format!(
            "`{name}` cannot be a namespace: use 1-32 characters of lowercase letters, digits and single `_`, starting with a letter (the file name becomes the tool prefix `{name}__`)"
        ))
    }
}

/// Checks a configuration name (`[connections.<name>]`): `^[a-z][a-z0-9_]{0,63}$`.
pub(crate) fn check_identifier(name: &str) -> Result<(), String> {
    if name.len() <= 64 && is_lower_ident(name) {
        Ok(())
    } else {
        Err(format!(
            "`{name}` is not a valid name: use lowercase letters, digits and `_`, starting with a letter"
        ))
    }
}

/// `erp-cliente` → `erp_cliente`.
pub(crate) fn slug_prefix(slug: &str) -> String {
    slug.replace('-', "_")
}

/// An MCP tool name lowercased, with anything outside `[a-z0-9_]` replaced by `_` (DECL-27).
pub(crate) fn normalize_tool(name: &str) -> String {
    name.chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A dotted path into the credentials store (`crm.mcp_token`) — never the secret itself.
///
/// Segments are `[a-z0-9_]+`, 1 to 8 of them, so each maps to one environment variable name
/// (`AIRLOCK_CREDENTIALS__CRM__MCP_TOKEN`) without collisions.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct CredentialPath(String);

impl CredentialPath {
    /// The path as written.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The segments of the path.
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.0.split('.')
    }
}

impl TryFrom<&str> for CredentialPath {
    type Error = String;

    fn try_from(path: &str) -> Result<Self, Self::Error> {
        let segments: Vec<&str> = path.split('.').collect();
        let ok = segments.len() <= 8
            && segments.iter().all(|s| {
                !s.is_empty()
                    && s.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            });
        if ok {
            Ok(Self(path.to_owned()))
        } else {
            Err(format!(
                "`{path}` is not a credential path: write dotted lowercase segments such as `crm.mcp_token` (the path, never the secret)"
            ))
        }
    }
}

impl fmt::Display for CredentialPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names() {
        assert!(ToolName::try_from("crm__search").is_ok());
        assert!(ToolName::try_from(&*"a".repeat(64)).is_ok());
        assert!(
            ToolName::try_from(&*"a".repeat(65))
                .unwrap_err()
                .contains("the limit is 64")
        );
        assert!(ToolName::try_from("a.b").is_err());
        assert!(ToolName::try_from("").is_err());
    }

    #[test]
    fn slugs() {
        assert!(check_slug("erp-cliente", 64).is_ok());
        assert!(check_slug("Erp", 64).is_err());
        assert!(check_slug("erp--x", 64).is_err());
        assert!(check_slug("erp_x", 64).is_err());
        assert!(check_slug("-erp", 64).is_err());
        assert!(check_slug("1erp", 64).is_err());
        assert!(
            check_slug(&"a".repeat(31), 30)
                .unwrap_err()
                .contains("limit is 30")
        );
    }

    #[test]
    fn snake_names() {
        assert!(check_snake("buscar_cliente").is_ok());
        assert!(check_snake("BuscarCliente").is_err());
        assert!(check_snake("buscar-cliente").is_err());
        assert!(check_snake("a__b").is_err());
    }

    #[test]
    fn namespaces() {
        assert!(check_namespace("crm").is_ok());
        assert!(check_namespace("crm_eu2").is_ok());
        assert!(check_namespace("crm-eu").is_err());
        assert!(check_namespace("crm__x").is_err());
        assert!(check_namespace("Crm").is_err());
        assert!(check_namespace("").is_err());
    }

    #[test]
    fn normalization_follows_decl_27() {
        assert_eq!(normalize_tool("Buscar-Ticket.v2"), "buscar_ticket_v2");
        assert_eq!(slug_prefix("erp-cliente"), "erp_cliente");
    }

    #[test]
    fn credential_paths() {
        assert_eq!(
            CredentialPath::try_from("crm.mcp_token")
                .unwrap()
                .segments()
                .count(),
            2
        );
        assert!(CredentialPath::try_from("sk-live-123").is_err());
        assert!(CredentialPath::try_from("crm..token").is_err());
        assert!(CredentialPath::try_from("CRM.token").is_err());
    }
}
