//! What the upstream MCP servers of each scope offer beside tools — resources, resource
//! templates, prompts, completion, skills — discovered once at boot, and how each entry is
//! served (docs/rules.md MCP-54..MCP-58, MCP-88..MCP-91, DECL-77).
//!
//! Guarantees: a connection file's server is asked for what it declares, at boot, and a
//! failure stops the boot as its `tools/list` would; a `type: mcp` declaration's server only
//! with `offers: true`, and a failure there is logged and its server offers nothing (a
//! tenant's server being down never stops the deployment). Entries are served namespaced like
//! the server's tools: names get the tools' prefix (`<slug with _>_`, `<namespace>__`) and URIs
//! the reversible mapping of [`uri`]. A served name or URI resolves back to exactly one
//! server's entry, or to none; nothing is resolved that was not listed (or, for a URI, matched
//! by a listed template, or listed as a file of a listed skill). A connection file's skills are
//! served only as pinned ([`Offered::pin_skills`], OPS-79). A client's resource subscriptions
//! are relayed from the upstreams that declared them (`watch`, MCP-92).

mod skills;
mod uri;
mod watch;

use std::collections::{BTreeMap, HashMap, HashSet};

use airlock_ledger::{LedgerError, Store};
use airlock_mcp::{Entry, Listed, McpClient, McpTarget, Offers, RemoteCatalog};
use airlock_spec::{ApiConnection, ConnectionSpec, Credentials, Scope, ScopeId, ToolSource};
use serde_json::Value;

use crate::execute::mcp::{DiscoveryError, connection_target, inline_target};
use crate::pins::{self, Pending};

/// Every scope's upstream catalogs, each with the client that reaches it.
#[derive(Default)]
pub struct Offered {
    scopes: HashMap<ScopeId, Vec<Source>>,
}

/// One upstream server of a scope and what it listed.
pub(crate) struct Source {
    /// The URI namespace: the declaration's slug, or the connection file's namespace.
    namespace: String,
    /// The connection a freeze names to cover it (POLICY-52): the connection file's
    /// namespace, or the `[connections]` entry an inline declaration reaches it through.
    pub(crate) connection: String,
    /// What its entries' names start with, as its tools' do.
    prefix: String,
    pub(crate) target: McpTarget,
    /// The client that reaches it: through the operator's guard for a connection file or a
    /// connection the operator vouched for, else through the public-only one (EGRESS-38).
    pub(crate) client: McpClient,
    catalog: RemoteCatalog,
    /// A connection file's server: its skills are pinned (OPS-79).
    pinned: bool,
    /// The files (upstream URIs) of its skills withheld from their pins: never read, even
    /// when its `resources/list` names them (OPS-79).
    withheld: HashSet<String>,
}

/// One server to ask at boot.
struct Asked {
    scope: ScopeId,
    source: Source,
    /// A connection file's: a failure stops the boot.
    required: bool,
}

impl Offered {
    /// Asks every connection file's server (the gateway scope) and every `offers: true`
    /// declaration's server of `scopes`, each once.
    ///
    /// # Errors
    /// The first connection file whose server cannot be listed, named.
    pub async fn discover(
        client: &McpClient,
        scopes: &[&Scope],
        connections: &[ConnectionSpec],
        api: &BTreeMap<String, ApiConnection>,
        credentials: &Credentials,
    ) -> Result<Self, DiscoveryError> {
        let mut offered = Self::default();
        for mut asked in servers(client, scopes, connections, api, credentials)? {
            let source = &asked.source;
            match source.client.discover_catalog(&source.target).await {
                Ok(catalog) => asked.source.catalog = catalog,
                Err(e) if asked.required => {
                    return Err(DiscoveryError {
                        namespace: asked.source.namespace,
                        reason: format!("resources and prompts: {}", e.message),
                    });
                }
                Err(e) => {
                    tracing::warn!(server = %asked.source.namespace, scope = %asked.scope, error = %e.message, "offers: true, but the server's resources and prompts could not be listed; it offers none");
                    continue;
                }
            }
            // A connection file's server is kept even when it lists nothing: its skill pins are
            // checked against what it lists now, nothing included (OPS-79).
            if !asked.source.catalog.is_empty() || asked.source.pinned {
                offered
                    .scopes
                    .entry(asked.scope)
                    .or_default()
                    .push(asked.source);
            }
        }
        Ok(offered)
    }

    /// Serves of each connection file's skills only those equal to their pins, pinning a
    /// connection's whole when it had no pin of any kind before this boot (none in
    /// `pinned_before`, [`pins::pinned_connections`]) and `first_use`; returns what waits for
    /// an operator (OPS-79).
    ///
    /// # Errors
    /// The ledger's.
    pub async fn pin_skills(
        &mut self,
        store: &dyn Store,
        pinned_before: &HashSet<String>,
        first_use: bool,
    ) -> Result<Vec<Pending>, LedgerError> {
        let pinned = store.tool_pins().await?;
        let mut pending = Vec::new();
        let sources = self.scopes.get_mut(&ScopeId::Gateway).into_iter().flatten();
        for source in sources.filter(|s| s.pinned) {
            let listed = std::mem::take(&mut source.catalog.skills);
            let connection = &source.connection;
            let new = !pinned_before.contains(connection);
            let checked =
                pins::check_skills(store, connection, listed, &pinned, new, first_use).await?;
            source.catalog.skills = checked.served;
            source.withhold(&checked.pending);
            pending.extend(checked.pending);
        }
        Ok(pending)
    }

    fn sources(&self, scope: &ScopeId) -> &[Source] {
        self.scopes.get(scope).map_or(&[], Vec::as_slice)
    }

    /// The capabilities `scope` has entries for.
    pub(crate) fn offers(&self, scope: &ScopeId) -> Offers {
        let sources = self.sources(scope);
        let any = |f: fn(&RemoteCatalog) -> bool| sources.iter().any(|s| f(&s.catalog));
        Offers {
            // A skill's files are resources: a scope with skills serves `resources/read`.
            resources: any(|c| {
                !(c.resources.is_empty() && c.templates.is_empty() && c.skills.is_empty())
            }),
            prompts: any(|c| !c.prompts.is_empty()),
            completions: any(|c| {
                c.completions && !(c.prompts.is_empty() && c.templates.is_empty())
            }),
            skills: any(|c| !c.skills.is_empty()),
            subscribe: any(|c| c.subscribe && !(c.resources.is_empty() && c.templates.is_empty())),
        }
    }

    /// The entries of `list` in `scope` whose served name `visible` accepts, as served.
    pub(crate) fn list(
        &self,
        scope: &ScopeId,
        list: Listed,
        visible: &dyn Fn(&str) -> bool,
    ) -> Vec<Entry> {
        self.sources(scope)
            .iter()
            .flat_map(|source| {
                let entries = match list {
                    Listed::Resources => &source.catalog.resources,
                    Listed::Templates => &source.catalog.templates,
                    Listed::Prompts => &source.catalog.prompts,
                    Listed::Skills => &source.catalog.skills,
                };
                entries
                    .iter()
                    .filter(move |e| !source.withheld.contains(field(e, "uri")))
                    .filter(move |e| visible(&source.access_name(list, e)))
                    .map(move |e| source.serve(list, e))
            })
            .collect()
    }

    /// The server and upstream URI of the served `uri`: a listed resource's, or one a listed
    /// template covers, whose served name `visible` accepts.
    pub(crate) fn resource(
        &self,
        scope: &ScopeId,
        served: &str,
        visible: &dyn Fn(&str) -> bool,
    ) -> Option<(&Source, String)> {
        self.sources(scope).iter().find_map(|source| {
            let upstream = uri::upstream(&source.namespace, served)?;
            if source.withheld.contains(upstream) {
                return None;
            }
            let listed = source
                .catalog
                .resources
                .iter()
                .find(|r| field(r, "uri") == upstream);
            let covered = || {
                let templates = source.catalog.templates.iter();
                templates
                    .filter(|t| uri::matches(field(t, "uriTemplate"), upstream))
                    .find(|t| visible(&source.name(t)))
            };
            let seen = match listed {
                Some(resource) => visible(&source.name(resource)),
                None => source.skill_file(upstream, visible).is_some() || covered().is_some(),
            };
            seen.then(|| (source, upstream.to_owned()))
        })
    }

    /// The server and upstream name of the served prompt `name`, if listed and visible.
    pub(crate) fn prompt(
        &self,
        scope: &ScopeId,
        name: &str,
        visible: &dyn Fn(&str) -> bool,
    ) -> Option<(&Source, String)> {
        let found = self.sources(scope).iter().find_map(|source| {
            let upstream = name.strip_prefix(&source.prefix)?;
            let listed = source
                .catalog
                .prompts
                .iter()
                .any(|p| field(p, "name") == upstream);
            listed.then(|| (source, upstream.to_owned()))
        });
        found.filter(|_| visible(name))
    }

    /// The server and upstream template of the served template `uri_template`, if listed and
    /// visible.
    pub(crate) fn template(
        &self,
        scope: &ScopeId,
        served: &str,
        visible: &dyn Fn(&str) -> bool,
    ) -> Option<(&Source, String)> {
        self.sources(scope).iter().find_map(|source| {
            let upstream = uri::upstream(&source.namespace, served)?;
            let listed = source
                .catalog
                .templates
                .iter()
                .find(|t| field(t, "uriTemplate") == upstream)?;
            visible(&source.name(listed)).then(|| (source, upstream.to_owned()))
        })
    }
}

impl Source {
    /// Whether the server completes arguments.
    pub(crate) fn completes(&self) -> bool {
        self.catalog.completions
    }

    /// `entry`'s served name.
    fn name(&self, entry: &Entry) -> String {
        format!("{}{}", self.prefix, field(entry, "name"))
    }

    /// The name `[[access]]` grants `entry` of `list` by: its served name, or a skill's.
    fn access_name(&self, list: Listed, entry: &Entry) -> String {
        match list {
            Listed::Skills => self.skill_name(entry),
            _ => self.name(entry),
        }
    }

    /// `entry` of `list` as served: its name prefixed, its URI (or template) mapped; a
    /// skill's frontmatter verbatim.
    fn serve(&self, list: Listed, entry: &Entry) -> Entry {
        if list == Listed::Skills {
            return self.serve_skill(entry);
        }
        let mut served = entry.clone();
        served.insert("name".into(), Value::String(self.name(entry)));
        let key = match list {
            Listed::Resources => "uri",
            Listed::Templates => "uriTemplate",
            Listed::Prompts | Listed::Skills => return served,
        };
        served.insert(
            key.into(),
            Value::String(self.served_uri(field(entry, key))),
        );
        served
    }

    /// The served form of the server's URI `upstream`.
    pub(crate) fn served_uri(&self, upstream: &str) -> String {
        uri::served(&self.namespace, upstream)
    }
}

fn field<'a>(entry: &'a Entry, key: &str) -> &'a str {
    entry.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The servers to ask: connection files' for the gateway scope, then each scope's
/// `offers: true` declarations (one server per slug).
fn servers(
    client: &McpClient,
    scopes: &[&Scope],
    connections: &[ConnectionSpec],
    api: &BTreeMap<String, ApiConnection>,
    credentials: &Credentials,
) -> Result<Vec<Asked>, DiscoveryError> {
    let mut asked = Vec::new();
    let tenant = McpClient::new(client.guard().public_only());
    for connection in connections {
        let target = connection_target(connection, credentials).map_err(|e| DiscoveryError {
            namespace: connection.namespace.clone(),
            reason: e.message,
        })?;
        let source = Source {
            namespace: connection.namespace.clone(),
            connection: connection.namespace.clone(),
            prefix: format!("{}__", connection.namespace),
            target,
            client: client.clone(),
            catalog: RemoteCatalog::default(),
            pinned: true,
            withheld: HashSet::new(),
        };
        asked.push(Asked {
            scope: ScopeId::Gateway,
            source,
            required: true,
        });
    }
    for scope in scopes {
        let mut slugs = std::collections::HashSet::new();
        for spec in scope.tools() {
            let ToolSource::McpInline(tool) = &spec.source else {
                continue;
            };
            if !tool.offers || !slugs.insert(tool.slug.clone()) {
                continue;
            }
            let target = api
                .get(&tool.connection)
                .ok_or_else(|| format!("connection `{}` is not configured", tool.connection))
                .and_then(|c| {
                    let guarded = if c.use_egress_allow { client } else { &tenant };
                    let target = inline_target(tool, c, credentials).map_err(|e| e.message)?;
                    Ok((target, guarded.clone()))
                });
            let (target, client) = match target {
                Ok(target) => target,
                Err(reason) => {
                    tracing::warn!(server = %tool.slug, scope = %scope.id, reason, "offers: true, but the server cannot be reached; it offers none");
                    continue;
                }
            };
            let source = Source {
                namespace: tool.slug.clone(),
                connection: tool.connection.clone(),
                prefix: format!("{}_", tool.slug.replace('-', "_")),
                target,
                client,
                catalog: RemoteCatalog::default(),
                pinned: false,
                withheld: HashSet::new(),
            };
            asked.push(Asked {
                scope: scope.id.clone(),
                source,
                required: false,
            });
        }
    }
    Ok(asked)
}
