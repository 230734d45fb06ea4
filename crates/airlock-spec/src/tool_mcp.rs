//! `type: mcp` tools (docs/rules.md DECL-24 to DECL-27): a tenant MCP server with a snapshot of its
//! tools inline. Built with no DNS and no network; each tool is `<slug with _>_<tool normalized>`,
//! or the name its entry gives in `served_as` (DECL-81); an entry may say the server runs it only
//! as a task (`requires_tasks`, DECL-82).

use crate::connection::{effect, header_name, protocol};
use crate::declared::{
    Declared, declare, non_empty_list, shared_policy, under_connection, unread_confirm,
    writes_and_mode,
};
use crate::diag::Diag;
use crate::fields::Fields;
use crate::names::{check_slug, normalize_tool, slug_prefix};
use crate::schema::check_input_schema;
use crate::tool::{McpAuth, McpInlineTool, McpProtocol, Policy, ToolSource};
use crate::tree::Node;

/// Longest slug of a `type: mcp` declaration.
pub const MAX_MCP_SLUG: usize = 30;
/// Longest remote tool name.
pub const MAX_REMOTE_TOOL_NAME: usize = 128;

pub(crate) const KEYS: [&str; 15] = [
    "name",
    "type",
    "connection",
    "path",
    "auth",
    "tools",
    "description",
    "rate_limit",
    "limits",
    "approval",
    "approvers",
    "effect",
    "protocol",
    "confirm",
    "offers",
];
const TOOL_KEYS: [&str; 8] = [
    "name",
    "description",
    "input_schema",
    "writes",
    "mode",
    "confirm",
    "served_as",
    "requires_tasks",
];

/// Reads one `type: mcp` entry of `spec.tools` into one tool per snapshot entry.
pub(crate) fn read_mcp(f: &Fields<'_>, d: &mut Diag) -> Vec<Declared> {
    unread_confirm(f, "mcp", d);
    let slug = f.req_str("name", d).filter(|s| {
        check_slug(s, MAX_MCP_SLUG)
            .map_err(|r| d.push(f.key_at("name"), &f.key("name"), r))
            .is_ok()
    });
    let connection = f.req_str("connection", d);
    let path = f.req_str("path", d).filter(|p| {
        check_path(p)
            .map_err(|r| d.push(f.key_at("path"), &f.key("path"), r))
            .is_ok()
    });
    // A server without auth needs none (DECL-24).
    let auth = f
        .get("auth")
        .map_or(Some(McpAuth::None), |n| auth(n, &f.key("auth"), d));
    let policy = Policy {
        effect: effect(f, d).unwrap_or_default(),
        ..shared_policy(f, d)
    };
    let protocol = protocol(f, d);
    // The server's resources, prompts and completions are served only when asked for: the
    // declaration lists what the tenant offers, nothing more (DECL-77).
    let offers = f.opt_bool("offers", d).ok().flatten().unwrap_or(false);
    let entries: Vec<Entry> = non_empty_list(f, "tools", "tool", d)
        .into_iter()
        .filter_map(|(path, node)| entry(node, &path, d))
        .collect();
    let (Some(slug), Some(connection), Some(path), Some(auth), Some(protocol)) =
        (slug, connection, path, auth, protocol)
    else {
        return Vec::new();
    };
    if protocol == McpProtocol::Legacy {
        refuse_tasks_on_legacy(&entries, d);
    }
    let prefix = slug_prefix(&slug);
    let tools = entries
        .into_iter()
        .filter_map(|e| {
            let source = ToolSource::McpInline(McpInlineTool {
                slug: slug.clone(),
                remote_name: e.name.clone(),
                connection: connection.clone(),
                path: path.clone(),
                auth: auth.clone(),
                protocol,
                offers,
                requires_tasks: e.requires_tasks,
            });
            let policy = Policy {
                writes: e.writes,
                mode: e.mode,
                ..policy.clone()
            };
            let final_name = e
                .served_as
                .unwrap_or_else(|| format!("{prefix}_{}", normalize_tool(&e.name)));
            declare(
                &final_name,
                e.description,
                e.schema,
                source,
                policy,
                (e.at, &e.path),
                d,
            )
        })
        .collect();
    under_connection(f, tools)
}

/// A session-era server is never offered a task (MCP-76), so a tool it runs only as one could
/// never run: `requires_tasks` needs `protocol: 2026-07-28` or `auto` (DECL-82).
fn refuse_tasks_on_legacy(entries: &[Entry], d: &mut Diag) {
    for e in entries.iter().filter(|e| e.requires_tasks) {
        d.push(
            e.tasks_at,
            &e.tasks_path,
            "`requires_tasks` needs `protocol: 2026-07-28` or `auto`: a session-era server is never offered a task",
        );
    }
}

/// The endpoint path: starts with `/`, no query, no fragment.
fn check_path(path: &str) -> Result<(), String> {
    if !path.starts_with('/') || path.starts_with("//") {
        return Err(format!("`{path}` must start with a single `/`"));
    }
    if path.contains(['?', '#']) {
        return Err(format!("`{path}` cannot have a query or fragment"));
    }
    Ok(())
}

fn auth(node: &Node, path: &str, d: &mut Diag) -> Option<McpAuth> {
    let f = Fields::open(node, path, &["scheme", "header"], d)?;
    match f.req_str("scheme", d)?.as_str() {
        // Written out, so a server without auth on a credentialed connection is a choice
        // (DECL-86), not a forgotten key.
        "none" => Some(McpAuth::None),
        "bearer" => Some(McpAuth::Bearer),
        "header" => header_name(&f, d).map(McpAuth::Header),
        other => {
            d.push(
                f.key_at("scheme"),
                &f.key("scheme"),
                format!(
                    "`{other}` is not an auth scheme for an MCP server; use `bearer`, `header` or `none`"
                ),
            );
            None
        }
    }
}

struct Entry {
    name: String,
    /// The name clients call it by instead of `<prefix>_<name>` (DECL-81), checked as any
    /// final tool name.
    served_as: Option<String>,
    description: String,
    schema: serde_json::Value,
    writes: bool,
    mode: crate::policy::Mode,
    /// The server runs it only as a task (`execution.taskSupport: "required"`, DECL-82).
    requires_tasks: bool,
    at: crate::tree::Pos,
    path: String,
    tasks_at: crate::tree::Pos,
    tasks_path: String,
}

fn entry(node: &Node, path: &str, d: &mut Diag) -> Option<Entry> {
    let f = Fields::open(node, path, &TOOL_KEYS, d)?;
    unread_confirm(&f, "mcp", d);
    let name = f.req_str("name", d).filter(|n| {
        let ok = !n.is_empty() && n.chars().count() <= MAX_REMOTE_TOOL_NAME;
        if !ok {
            d.push(
                f.key_at("name"),
                &f.key("name"),
                format!("a tool name has 1 to {MAX_REMOTE_TOOL_NAME} characters"),
            );
        }
        ok
    });
    let description = f.req_str("description", d);
    let schema = f.required("input_schema", d).map(|n| {
        let schema = n.to_json();
        check_input_schema(&schema, f.key_at("input_schema"), &f.key("input_schema"), d);
        schema
    });
    let (writes, mode) = writes_and_mode(&f, d)?;
    let served_as = f.opt_str("served_as", d);
    let requires_tasks = f.opt_bool("requires_tasks", d).ok()?.unwrap_or(false);
    Some(Entry {
        name: name?,
        served_as,
        description: description?,
        schema: schema?,
        writes,
        mode,
        requires_tasks,
        at: f.key_at("name"),
        path: f.key("name"),
        tasks_at: f.key_at("requires_tasks"),
        tasks_path: f.key("requires_tasks"),
    })
}
