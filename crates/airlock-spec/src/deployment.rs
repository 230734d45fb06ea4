//! Loading a deployment directory: one pure function from files to a validated model or the
//! list of every problem. No network, no DNS, no database.
//!
//! Layout: `airlock.toml`, `connections/<name>.yml`, `apis/<slug>.yml`,
//! `catalog/<slug>/integration.yaml`, `agents/<name>.yml`. Files are read in name order, so
//! results and errors do not depend on the directory's listing order.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use crate::agent::{AgentSpec, IntegrationRef, ScriptRef, read_agent};
use crate::api_file::read_api_file;
use crate::catalog::{Catalog, INTEGRATION_FILE, read_integration};
use crate::config::{Config, read_config};
use crate::connection::{ConnectionSpec, read_connection};
use crate::declared::Declared;
use crate::diag::{Diag, SpecErrors, SpecIssue};
use crate::model_script::{ModelScript, read_script};
use crate::refs::Reference;
use crate::scope::{Scope, ScopeId};
use crate::tool::{ToolSource, ToolSpec};
use crate::tree::{Node, parse_toml, parse_yaml};

/// Largest declaration file read, in bytes.
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// A validated deployment directory.
#[derive(Debug, Clone, PartialEq)]
pub struct Deployment {
    /// The directory.
    pub root: PathBuf,
    /// `airlock.toml` (defaults when the file is absent).
    pub config: Config,
    /// `connections/*.yml`, by namespace.
    pub connections: Vec<ConnectionSpec>,
    /// `agents/*.yml`, by name.
    pub agents: BTreeMap<String, AgentSpec>,
    /// Keys that were accepted but are not read (a `confirm:` on an api or mcp tool), each
    /// with file, line and key, sorted like problems; `airlock check` prints them and `serve`
    /// logs them.
    pub warnings: Vec<SpecIssue>,
    /// `apis/*.yml`: the operations of deployment-level tenant APIs, served in the gateway
    /// scope, in file then operation order.
    pub apis: Vec<ToolSpec>,
    /// Every credential path and URL that boot or a call resolves, with where it is declared,
    /// for the offline checks of `airlock check` (docs/rules.md DECL-38).
    pub references: Vec<Reference>,
}

impl Deployment {
    /// Loads and validates `root`. Every problem of every file is returned at once.
    pub fn load(root: &Path) -> Result<Self, SpecErrors> {
        let mut issues = Vec::new();
        let mut warnings = Vec::new();
        let mut references = Vec::new();
        let config = load_config(root, &mut issues, (&mut references, &mut warnings));
        let connections = load_connections(root, &mut issues, &mut references);
        let catalog = load_catalog(root, &mut issues, &mut references);
        // Checked even when airlock.toml is not valid, so one load reports everything.
        let agents = load_agents(
            root,
            (config.as_ref(), &catalog),
            &mut issues,
            &mut warnings,
            &mut references,
        );
        let apis = load_apis(root, config.as_ref(), &mut issues, &mut warnings);
        if let Some(config) = &config {
            let mut d = Diag::new(Path::new("airlock.toml"));
            crate::access::check_scopes(&config.access, &agents, &mut d);
            issues.extend(d.into_issues());
        }
        let by_place = |a: &SpecIssue, b: &SpecIssue| {
            (&a.file, a.line, a.column).cmp(&(&b.file, b.line, b.column))
        };
        issues.sort_by(by_place);
        warnings.sort_by(by_place);
        match config {
            Some(config) if issues.is_empty() => Ok(Self {
                root: root.to_path_buf(),
                config,
                connections,
                agents,
                warnings,
                apis,
                references,
            }),
            _ => Err(SpecErrors(issues)),
        }
    }

    /// The gateway scope before discovery: the builtins enabled in `airlock.toml` and the
    /// operations of `apis/*.yml`. Connection tools are added by discovery.
    #[must_use]
    pub fn gateway_scope(&self) -> Scope {
        let mut scope = Scope::new(ScopeId::Gateway);
        for (builtin, policy) in &self.config.builtins {
            let spec = ToolSpec {
                definition: crate::builtin::definition(*builtin),
                source: ToolSource::Builtin(*builtin),
                policy: policy.clone(),
            };
            // Builtins are unique by construction (keys of one TOML table).
            let _ = scope.add(spec);
        }
        for tool in &self.apis {
            // Collisions with builtins and between files were refused at load.
            let _ = scope.add(tool.clone());
        }
        scope
    }

    /// The scope of agent `name`.
    #[must_use]
    pub fn agent_scope(&self, name: &str) -> Option<Scope> {
        let agent = self.agents.get(name)?;
        let mut scope = Scope::new(ScopeId::Agent(name.to_owned()));
        for tool in &agent.tools {
            // Collisions were refused at load.
            let _ = scope.add(tool.clone());
        }
        Some(scope)
    }
}

/// Reads a file as text, or records why it cannot be read.
fn read_text(root: &Path, rel: &Path, issues: &mut Vec<SpecIssue>) -> Option<String> {
    let path = root.join(rel);
    let problem = match fs::metadata(&path) {
        Ok(meta) if meta.len() > MAX_FILE_BYTES => {
            format!("the file is larger than {MAX_FILE_BYTES} bytes")
        }
        Ok(_) => match fs::read(&path) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => return Some(text),
                Err(_) => "the file is not UTF-8 text".to_owned(),
            },
            Err(e) => format!("cannot read the file: {e}"),
        },
        Err(e) => format!("cannot read the file: {e}"),
    };
    issues.push(SpecIssue {
        file: rel.to_path_buf(),
        line: 1,
        column: 1,
        key: String::new(),
        reason: problem,
    });
    None
}

fn load_config(
    root: &Path,
    issues: &mut Vec<SpecIssue>,
    (references, warnings): (&mut Vec<Reference>, &mut Vec<SpecIssue>),
) -> Option<Config> {
    let rel = Path::new("airlock.toml");
    let mut d = Diag::new(rel);
    let tree = if root.join(rel).exists() {
        let text = read_text(root, rel, issues)?;
        match parse_toml(&text) {
            Ok(tree) => Some(tree),
            Err(errors) => {
                errors.into_iter().for_each(|e| d.push(e.at, "", e.message));
                issues.extend(d.into_issues());
                return None;
            }
        }
    } else {
        None
    };
    let config = read_config(tree.as_ref(), root, &mut d);
    d.drain_references(references);
    d.drain_warnings(warnings);
    issues.extend(d.into_issues());
    config
}

/// The `.yml`/`.yaml` files of `root/dir`, sorted, as (relative path, stem).
fn yaml_files(root: &Path, dir: &str, issues: &mut Vec<SpecIssue>) -> Vec<(PathBuf, String)> {
    let Ok(listing) = fs::read_dir(root.join(dir)) else {
        return Vec::new();
    };
    let mut files: Vec<(PathBuf, String)> = Vec::new();
    for entry in listing.flatten() {
        let path = entry.path();
        let is_yaml = matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yml" | "yaml")
        );
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if !is_yaml || stem.starts_with('.') {
            continue;
        }
        let rel = Path::new(dir).join(entry.file_name());
        if let Some((first, _)) = files.iter().find(|(_, s)| s == stem) {
            issues.push(SpecIssue {
                file: rel.clone(),
                line: 1,
                column: 1,
                key: String::new(),
                reason: format!("`{stem}` is also declared by {}", first.display()),
            });
            continue;
        }
        files.push((rel, stem.to_owned()));
    }
    files.sort();
    files
}

/// Parses a YAML file; `None` for an empty file or a syntax error (recorded).
fn parse_file(root: &Path, rel: &Path, issues: &mut Vec<SpecIssue>) -> Option<Node> {
    let text = read_text(root, rel, issues)?;
    match parse_yaml(&text) {
        Ok(node) => node,
        Err(e) => {
            issues.push(SpecIssue {
                file: rel.to_path_buf(),
                line: e.at.line.max(1),
                column: e.at.column.max(1),
                key: String::new(),
                reason: e.message,
            });
            None
        }
    }
}

fn load_connections(
    root: &Path,
    issues: &mut Vec<SpecIssue>,
    references: &mut Vec<Reference>,
) -> Vec<ConnectionSpec> {
    let mut out = Vec::new();
    for (rel, stem) in yaml_files(root, "connections", issues) {
        // DECL-9 (docs/rules.md): an empty connection file is ignored.
        let Some(node) = parse_file(root, &rel, issues) else {
            continue;
        };
        let mut d = Diag::new(&rel);
        let spec = read_connection(&node, &stem, &mut d);
        if d.is_clean() {
            out.extend(spec);
        }
        d.drain_references(references);
        issues.extend(d.into_issues());
    }
    out
}

/// Reads `catalog/<slug>/integration.yaml` (DECL-44): every problem fails the load.
fn load_catalog(
    root: &Path,
    issues: &mut Vec<SpecIssue>,
    references: &mut Vec<Reference>,
) -> Catalog {
    let mut catalog = Catalog::new();
    let Ok(listing) = fs::read_dir(root.join("catalog")) else {
        return catalog;
    };
    let mut entries: Vec<_> = listing.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        let Some(slug) = path.file_name().and_then(|s| s.to_str()).map(str::to_owned) else {
            continue;
        };
        if slug.starts_with('.') {
            continue;
        }
        let rel = Path::new("catalog").join(&slug).join(INTEGRATION_FILE);
        if !path.is_dir() || !root.join(&rel).is_file() {
            let place = Path::new("catalog").join(&slug);
            let reason = format!("each catalog entry is a directory holding {INTEGRATION_FILE}");
            issues.push(empty_file(place, &reason));
            continue;
        }
        let Some(node) = parse_file(root, &rel, issues) else {
            issues.push(empty_file(
                rel,
                "the file is empty: declare the integration or remove its directory",
            ));
            continue;
        };
        let mut d = Diag::new(&rel);
        let declared = read_integration(&node, &slug, &mut d);
        check_tools(&declared, None, "an integration", &mut d);
        if d.is_clean() {
            catalog.insert(slug, declared);
        }
        d.drain_references(references);
        issues.extend(d.into_issues());
    }
    catalog
}

/// The tools `refs` enable; a slug the catalog lacks, or an action the integration lacks, is a
/// warning and is skipped (DECL-46).
fn resolve_integrations(refs: &[IntegrationRef], catalog: &Catalog, d: &mut Diag) -> Vec<Declared> {
    let mut out = Vec::new();
    for r in refs {
        let Some(tools) = catalog.get(&r.slug) else {
            d.warn(r.at, &r.path, format!("integration `{}` is not in the catalog (no valid catalog/{}/{INTEGRATION_FILE}); its tools are skipped", r.slug, r.slug));
            continue;
        };
        for (action, at) in &r.actions {
            let found = tools.iter().find(|t| {
                matches!(&t.spec.source, ToolSource::Integration(a) if a.request.operation == *action)
            });
            let Some(tool) = found else {
                d.warn(
                    *at,
                    &r.actions_path,
                    format!(
                        "integration `{}` has no action `{action}`; it is skipped",
                        r.slug
                    ),
                );
                continue;
            };
            let mut spec = tool.spec.clone();
            spec.policy.approval = r.approval;
            out.push(Declared {
                spec,
                at: *at,
                path: r.actions_path.clone(),
                connection_at: None,
                auth_key: None,
            });
        }
    }
    out
}

/// Reads `agents/*.yml`. `config` is `None` when `airlock.toml` is not valid: the agents'
/// own problems are still reported, only the references into it are not checked.
fn load_agents(
    root: &Path,
    (config, catalog): (Option<&Config>, &Catalog),
    issues: &mut Vec<SpecIssue>,
    warnings: &mut Vec<SpecIssue>,
    references: &mut Vec<Reference>,
) -> BTreeMap<String, AgentSpec> {
    let mut agents = BTreeMap::new();
    let mut declared: HashMap<String, Vec<Declared>> = HashMap::new();
    for (rel, stem) in yaml_files(root, "agents", issues) {
        let Some(node) = parse_file(root, &rel, issues) else {
            issues.push(empty_file(rel, "the manifest is empty"));
            continue;
        };
        let mut d = Diag::new(&rel);
        if let Some(mut read) = read_agent(&node, &stem, &mut d) {
            let enabled = resolve_integrations(&read.integrations, catalog, &mut d);
            read.declared.extend(enabled);
            check_tools(&read.declared, config, "an agent", &mut d);
            if let Some(mut spec) = read.spec {
                if let Some(script) = &read.script {
                    spec.model.script = load_script(root, script, &mut d, issues);
                }
                spec.tools = read.declared.iter().map(|t| t.spec.clone()).collect();
                declared.insert(spec.name.clone(), read.declared);
                agents.insert(spec.name.clone(), spec);
            }
        }
        d.drain_warnings(warnings);
        d.drain_references(references);
        issues.extend(d.into_issues());
    }
    check_agent_graph(&agents, &declared, issues);
    agents
}

/// Reads and validates the script a `scripted` model names (docs/rules.md MODEL-10): a problem
/// with the path is reported at the manifest's `script` key, a problem inside the script at its
/// own file, line and key.
fn load_script(
    root: &Path,
    script: &ScriptRef,
    d: &mut Diag,
    issues: &mut Vec<SpecIssue>,
) -> Option<ModelScript> {
    if !root.join(&script.path).is_file() {
        let shown = script.path.display();
        d.push(
            script.at,
            &script.key,
            format!("`{shown}` is not a file of the deployment directory"),
        );
        return None;
    }
    let before = issues.len();
    let Some(node) = parse_file(root, &script.path, issues) else {
        // parse_file records what it could not read; an empty script is recorded here.
        if issues.len() == before {
            issues.push(empty_file(
                script.path.clone(),
                "the script is empty: write its turns",
            ));
        }
        return None;
    };
    let mut sd = Diag::new(&script.path);
    let read = read_script(&node, &script.path, &mut sd);
    issues.extend(sd.into_issues());
    read
}

/// Per-file checks: connections exist and agree with each tool's `auth` (when `config` is
/// known, DECL-86, DECL-87); no two tools of `owner` (the agent, or the gateway scope) share a
/// final name.
fn check_tools(declared: &[Declared], config: Option<&Config>, owner: &str, d: &mut Diag) {
    let mut seen: HashMap<&str, &Declared> = HashMap::new();
    // An undeclared connection, or an auth its connection contradicts, is reported once per
    // entry.
    let mut undeclared = std::collections::BTreeSet::new();
    let mut auth_reported = std::collections::BTreeSet::new();
    for tool in declared {
        let name = tool.spec.definition.name.as_str();
        if name == crate::AWAIT_TOOL {
            d.push(tool.at, &tool.path, format!("tool `{name}` collides with airlock's own await tool, which every MCP scope lists under that name; rename the tool"));
        } else if let Some(first) = seen.get(name) {
            d.push(tool.at, &tool.path, format!("tool `{name}` collides with the tool declared at {} (line {}); every tool name of {owner} must be unique", first.path, first.at.line));
        } else {
            seen.insert(name, tool);
        }
        let connection = match &tool.spec.source {
            ToolSource::Api(op) => Some(&op.connection),
            ToolSource::McpInline(t) => Some(&t.connection),
            _ => None,
        };
        let Some((connection, config)) = connection.zip(config) else {
            continue;
        };
        if let Some(entry) = config.connections.get(connection.as_str()) {
            let named = (connection.as_str(), entry);
            crate::tool_auth::check_auth(tool, named, &mut auth_reported, d);
        } else if !config.per_run_connections.contains_key(connection.as_str()) {
            let (at, key) = tool
                .connection_at
                .clone()
                .unwrap_or_else(|| (tool.at, tool.path.clone()));
            if undeclared.insert(at) {
                d.push(
                    at,
                    &key,
                    format!(
                        "connection `{connection}` is not declared in airlock.toml `[connections]`"
                    ),
                );
            }
        }
    }
}

/// Reads `apis/*.yml` (DECL-40). Every final name is unique in the gateway scope: a collision
/// with a builtin enabled in `airlock.toml`, the await tool or another file's operation is an
/// error naming both.
fn load_apis(
    root: &Path,
    config: Option<&Config>,
    issues: &mut Vec<SpecIssue>,
    warnings: &mut Vec<SpecIssue>,
) -> Vec<ToolSpec> {
    let mut tools = Vec::new();
    let mut seen: HashMap<String, (PathBuf, Declared)> = HashMap::new();
    for (rel, stem) in yaml_files(root, "apis", issues) {
        let Some(node) = parse_file(root, &rel, issues) else {
            issues.push(empty_file(
                rel,
                "the file is empty: declare the API or remove the file",
            ));
            continue;
        };
        let mut d = Diag::new(&rel);
        let declared = read_api_file(&node, &stem, &mut d);
        check_tools(&declared, config, "the gateway scope", &mut d);
        let mut mine = Vec::new();
        for tool in declared {
            let name = tool.spec.definition.name.to_string();
            match gateway_owner(&name, config, &seen) {
                Some(other) => d.push(tool.at, &tool.path, format!("tool `{name}` collides with {other}; every tool name of the gateway scope must be unique")),
                None => mine.push((name, tool)),
            }
        }
        for (name, tool) in mine {
            if let std::collections::hash_map::Entry::Vacant(slot) = seen.entry(name) {
                tools.push(tool.spec.clone());
                slot.insert((rel.clone(), tool));
            }
        }
        d.drain_warnings(warnings);
        issues.extend(d.into_issues());
    }
    tools
}

/// An empty declaration file, reported at its start.
fn empty_file(file: PathBuf, reason: &str) -> SpecIssue {
    SpecIssue {
        file,
        line: 1,
        column: 1,
        key: String::new(),
        reason: reason.to_owned(),
    }
}

/// What else in the gateway scope already has `name`, outside the file being read (a name
/// twice in one file is reported by [`check_tools`]).
fn gateway_owner(
    name: &str,
    config: Option<&Config>,
    seen: &HashMap<String, (PathBuf, Declared)>,
) -> Option<String> {
    if let Some((file, first)) = seen.get(name) {
        return Some(format!(
            "the tool declared at {}:{} ({})",
            file.display(),
            first.at.line,
            first.path
        ));
    }
    config?
        .builtins
        .iter()
        .any(|(b, _)| b.name() == name)
        .then(|| format!("the builtin enabled in airlock.toml `[builtins.{name}]`"))
}

/// `type: agent` tools name agents of this directory, and never form a cycle.
fn check_agent_graph(
    agents: &BTreeMap<String, AgentSpec>,
    declared: &HashMap<String, Vec<Declared>>,
    issues: &mut Vec<SpecIssue>,
) {
    let calls = |name: &str| -> Vec<(&str, &Declared)> {
        declared
            .get(name)
            .into_iter()
            .flatten()
            .filter_map(|t| match &t.spec.source {
                ToolSource::Agent(target) => Some((target.as_str(), t)),
                _ => None,
            })
            .collect()
    };
    for (name, agent) in agents {
        for (target, tool) in calls(name) {
            let issue = |reason: String| SpecIssue {
                file: agent.file.clone(),
                line: tool.at.line,
                column: tool.at.column,
                key: tool.path.clone(),
                reason,
            };
            if !agents.contains_key(target) {
                issues.push(issue(format!(
                    "agent `{target}` is not declared in agents/"
                )));
            } else if let Some(cycle) = find_cycle(target, name, &calls) {
                issues.push(issue(format!(
                    "agent cycle: {name} → {}",
                    cycle.join(" → ")
                )));
            }
        }
    }
}

/// A path from `from` back to `to` through agent tools, if one exists.
fn find_cycle<'a>(
    from: &'a str,
    to: &'a str,
    calls: &dyn Fn(&str) -> Vec<(&'a str, &'a Declared)>,
) -> Option<Vec<&'a str>> {
    let mut stack = vec![(from, vec![from])];
    let mut visited = std::collections::HashSet::new();
    while let Some((node, path)) = stack.pop() {
        if node == to {
            return Some(path);
        }
        if !visited.insert(node) {
            continue;
        }
        for (next, _) in calls(node) {
            let mut next_path = path.clone();
            next_path.push(next);
            stack.push((next, next_path));
        }
    }
    None
}
