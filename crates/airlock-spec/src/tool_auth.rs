//! Whether a tenant tool's `auth` and its connection's `credential` agree (docs/rules.md
//! DECL-86, DECL-87), checked when the deployment loads, so `airlock check` and `serve` refuse
//! the same mismatch before any call is made.
//!
//! Guarantees: a `type: api` or `type: mcp` tool on a connection that has a credential writes
//! `auth` (a block pasted without it would otherwise call with no credential, silently); a tool
//! whose `auth` sends a credential names a connection that has one to send (it would otherwise
//! load and fail every call `credential_missing`). `auth: {scheme: none}` declares a call
//! without a credential and passes both. Each problem is reported once per declaration entry,
//! at its `auth` key (or at the entry, when the key is absent). A connection declared `per_run`
//! (DECL-83) is not checked here: its credential comes with each run.

use std::collections::BTreeSet;

use crate::config::ApiConnection;
use crate::declared::Declared;
use crate::diag::Diag;
use crate::tool::{ApiAuth, McpAuth, ToolSource};
use crate::tree::Pos;

/// Checks `tool` against `connection` (its `[connections.<name>]`); `reported` holds the
/// entries already reported, so an api declaration's operations make one problem, not one each.
pub(crate) fn check_auth(
    tool: &Declared,
    (name, connection): (&str, &ApiConnection),
    reported: &mut BTreeSet<Pos>,
    d: &mut Diag,
) {
    let Some(key) = &tool.auth_key else { return };
    let Some(sends) = sends_credential(&tool.spec.source) else {
        return;
    };
    let problem = if !key.written && connection.sends_credential() {
        Some(format!(
            "connection `{name}` has a credential, but this tool declares no `auth`, so its calls would go without it; declare how it is sent (`auth: {{scheme: bearer}}`, or `header` with `header`), or `auth: {{scheme: none}}` to send none"
        ))
    } else if sends && !connection.sends_credential() {
        Some(format!(
            "this `auth` sends connection `{name}`'s credential, but `[connections.{name}]` in airlock.toml names no `credential`, so every call would fail `credential_missing`; add `credential`, or declare `auth: {{scheme: none}}`"
        ))
    } else {
        None
    };
    if let Some(reason) = problem
        && reported.insert(key.at)
    {
        d.push(key.at, &key.path, reason);
    }
}

/// Whether the tool's declared auth sends a credential; `None` for a tool that names no
/// connection.
fn sends_credential(source: &ToolSource) -> Option<bool> {
    match source {
        ToolSource::Api(op) => Some(op.auth != ApiAuth::None),
        ToolSource::McpInline(t) => Some(t.auth != McpAuth::None),
        _ => None,
    }
}
