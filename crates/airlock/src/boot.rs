//! Boot: from a deployment directory to a running gateway's parts — validated declarations
//! (fail loud), credentials, the ledger (migrated), the egress guard, discovered connection
//! tools (fail loud, naming the connection), every scope, and the agents that run over them
//! (each model connected through the same guard when a run asks for it).

use std::path::Path;
use std::sync::Arc;

use airlock_egress::GuardedClient;
use airlock_ledger::{Invocation, InvocationState, PgStore, SqliteStore, Store, StoreConfig};
use airlock_mcp::{EndpointConfig, EndpointToken, McpClient, OAuthSettings, ResourceServer};
use airlock_model::{ModelError, ModelErrorKind};
use airlock_runtime::agent::{Agents, Limits, ModelFactory, YesWords};
use airlock_runtime::notify::{self, Notifications, SlackInteractions};
use airlock_runtime::vault::{PersonalVault, Source};
use airlock_runtime::{Gateway, HowToDecide, Offered, discover, egress_policy, pins};
use airlock_spec::{AgentSpec, Credentials, Deployment, EndpointAuth, Scope, ScopeId, ToolSpec};
use anyhow::Context as _;
use secrecy::SecretString;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::telemetry::Telemetry;

/// Everything `serve` needs.
pub struct Booted {
    /// The validated deployment.
    pub deployment: Deployment,
    /// The gateway over every scope.
    pub gateway: Arc<Gateway>,
    /// The deployment's agents, run over the gateway.
    pub agents: Agents,
    /// Admin tokens → principals.
    pub admin: Tokens,
    /// The MCP endpoint's tokens and host names.
    pub mcp: EndpointConfig,
    /// `[notify]`'s destinations with their secrets; `None` when nothing is configured.
    pub notifications: Option<Arc<Notifications>>,
    /// `[notify.slack]`'s verifier of button clicks, if Slack is configured.
    pub slack: Option<Arc<SlackInteractions>>,
    /// The egress guard every outgoing request goes through (notifications too).
    pub egress: GuardedClient,
    /// `[telemetry]`'s tracer and exporter; `None` when traces are off.
    pub telemetry: Option<Telemetry>,
}

/// Bearer tokens resolved from their credential paths, each with its principal.
#[derive(Clone, Default)]
pub struct Tokens(pub Arc<Vec<(SecretString, String)>>);

/// Loads the deployment and builds the gateway. Any problem aborts with a clear message.
pub async fn boot(dir: &Path) -> anyhow::Result<Booted> {
    load(dir, None).await
}

/// [`boot`] as `serve` boots: the ledger hears other processes' changes (a CLI decision wakes
/// this process's waiters and worker, DECIDE-10), the gateway's lease on running calls may be
/// overridden (default 60 s), and the gateway stops with the process: its long polls end when
/// `long_polls` is cancelled, and its background calls run on `tasks`
/// (`GatewayBuilder::shutdown`, docs/rules.md OPS-9).
pub async fn boot_serving(
    dir: &Path,
    lease: Option<std::time::Duration>,
    long_polls: CancellationToken,
    tasks: TaskTracker,
) -> anyhow::Result<Booted> {
    let serving = Serving {
        lease,
        long_polls,
        tasks,
    };
    load(dir, Some(serving)).await
}

/// What only a serving process gives its gateway.
struct Serving {
    lease: Option<std::time::Duration>,
    long_polls: CancellationToken,
    tasks: TaskTracker,
}

async fn load(dir: &Path, serving: Option<Serving>) -> anyhow::Result<Booted> {
    // The gate `airlock check` uses: what it refuses, boot refuses in its words (OPS-70).
    let deployment = crate::preflight::load(dir).map_err(|e| anyhow::anyhow!("{e}"))?;
    let credentials = load_credentials(dir, &deployment)?;
    let config = store_config(&deployment.config, serving.is_some());
    let store = open_ledger(&deployment.config.database_url, config).await?;
    assemble(deployment, credentials, store, serving).await
}

/// [`boot`] on a ledger the caller opened (benchmarks and tests: e.g. a store with other
/// settings); the deployment's `database_url` is not used.
pub async fn boot_on_store(dir: &Path, store: Arc<dyn Store>) -> anyhow::Result<Booted> {
    let deployment = crate::preflight::load(dir).map_err(|e| anyhow::anyhow!("{e}"))?;
    let credentials = load_credentials(dir, &deployment)?;
    assemble(deployment, credentials, store, None).await
}

pub(crate) fn load_credentials(
    dir: &Path,
    deployment: &Deployment,
) -> anyhow::Result<Arc<Credentials>> {
    Ok(Arc::new(Credentials::load(
        dir,
        &deployment.config.credentials,
        std::env::vars(),
    )?))
}

/// One `warn` line for each tool or skill withheld from its pin (OPS-49, OPS-79).
fn warn_withheld(pending: &[pins::Pending]) {
    for pending in pending {
        tracing::warn!(
            "{}: withheld until an operator accepts it (`airlock tools diff`, `airlock tools accept {}`)",
            pending.describe(),
            pending.connection
        );
    }
}

/// Everything after the ledger is open: the guard, discovery, the scopes, the tokens.
async fn assemble(
    deployment: Deployment,
    credentials: Arc<Credentials>,
    store: Arc<dyn Store>,
    serving: Option<Serving>,
) -> anyhow::Result<Booted> {
    let config = &deployment.config;
    let egress =
        GuardedClient::new(egress_policy(&config.egress)).context("building the egress client")?;
    let mcp_client = McpClient::new(egress.clone());
    let discovered = discover(&mcp_client, &deployment.connections, &credentials).await?;
    let pinned_before = pins::pinned_connections(store.as_ref())
        .await
        .context("pinned tool definitions")?;
    let mut checked = pins::check(store.as_ref(), discovered, true)
        .await
        .context("pinned tool definitions")?;
    let removed: Vec<ToolSpec> = checked
        .pending
        .iter()
        .filter_map(pins::removed_spec)
        .collect();
    warn_withheld(&checked.pending);
    let removed_names = removed
        .iter()
        .map(|t| t.definition.name.to_string())
        .collect::<Vec<_>>();
    let mut gateway_scope = deployment.gateway_scope();
    add_discovered(&mut gateway_scope, checked.served)?;
    add_discovered(&mut gateway_scope, removed)?;
    let agent_scopes: Vec<_> = deployment
        .agents
        .keys()
        .filter_map(|name| deployment.agent_scope(name))
        .collect();
    let scopes: Vec<_> = std::iter::once(&gateway_scope)
        .chain(&agent_scopes)
        .collect();
    let mut offered = Offered::discover(
        &mcp_client,
        &scopes,
        &deployment.connections,
        &config.connections,
        &credentials,
    )
    .await?;
    let skills = offered
        .pin_skills(store.as_ref(), &pinned_before, true)
        .await
        .context("pinned skills")?;
    warn_withheld(&skills);
    checked.pending.extend(skills);
    let vault = personal_vault(&deployment, &credentials, (&store, &egress))?;
    let mut builder = Gateway::builder(store, egress.clone(), Arc::clone(&credentials))
        .removed(removed_names)
        .pending_definitions(checked.pending)
        .how_to_decide(how_to_decide(&deployment.root))
        .connections(config.connections.clone())
        .per_run_connections(&config.per_run_connections)
        .integrations_use_egress_allow(&config.egress.allow_integrations)
        .fetch_uses_egress_allow(config.egress.allow_fetch)
        .mcp_connections(deployment.connections.clone())
        .mcp_client(mcp_client)
        .access(config.access.clone())
        .offered(offered)
        .scope(gateway_scope)?;
    if let Some(vault) = vault {
        builder = builder.vault(vault);
    }
    let telemetry = Telemetry::start(config, &credentials)?;
    if let Some(serving) = serving {
        // Runs, decisions and the workers are traced by a serving process only (OPS-80): the
        // CLI's own work is not.
        builder = builder
            .shutdown(serving.long_polls, serving.tasks)
            .tracer(telemetry.as_ref().map(|t| t.tracer.clone()));
        if let Some(lease) = serving.lease {
            builder = builder.lease(lease);
        }
    }
    for scope in agent_scopes {
        builder = builder.scope(scope)?;
    }
    let admin = tokens(&config.admin, &credentials).context("admin tokens")?;
    let notifications =
        Notifications::new(&config.notify, config.public_url.as_deref(), &credentials)
            .context("[notify]")?;
    let slack =
        notify::slack_interactions(&config.notify, &credentials).context("[notify.slack]")?;
    let mcp = EndpointConfig {
        tokens: mcp_tokens(&deployment, &credentials).context("MCP tokens")?,
        allowed_hosts: config.mcp.allowed_hosts.clone(),
        tracer: telemetry.as_ref().map(|t| t.tracer.clone()),
        request_states: Some(crate::state_key::request_states(&deployment, &credentials)?),
        oauth: resource_server(&deployment, &egress).context("[mcp.oauth]")?,
    };
    let gateway = Arc::new(builder.build());
    // A process serves no call before it knows what is frozen (POLICY-51).
    gateway
        .freezes()
        .refresh()
        .await
        .context("reading the freezes")?;
    let models = models(egress.clone(), credentials);
    // An empty `[confirm] yes_words` means the runtime's defaults (POLICY-33).
    let yes_words = if config.yes_words.is_empty() {
        YesWords::default()
    } else {
        YesWords::new(&config.yes_words)
    };
    let agents = Agents::with_yes_words(
        gateway.clone(),
        deployment.agents.clone(),
        models,
        Limits::default(),
        yes_words,
    );
    Ok(Booted {
        gateway,
        agents,
        deployment,
        admin,
        mcp,
        notifications: (!notifications.is_empty()).then(|| Arc::new(notifications)),
        slack: slack.map(Arc::new),
        egress,
        telemetry,
    })
}

/// Connects an agent's model when a run needs it, through the guarded client, with the API key
/// its manifest names (a missing credential is a configuration error naming its path).
fn models(egress: GuardedClient, credentials: Arc<Credentials>) -> ModelFactory {
    Arc::new(move |agent: &AgentSpec| {
        let key = match &agent.model.credential {
            None => None,
            Some(path) => Some(credentials.get(path).cloned().map_err(|e| ModelError {
                kind: ModelErrorKind::Configuration,
                status: None,
                message: e.to_string(),
            })?),
        };
        airlock_model::connect(&agent.model, egress.clone(), key)
    })
}

/// Adds discovered connection tools to the gateway scope, as `serve` does.
///
/// # Errors
/// A discovered name that collides with a declared one.
pub fn add_discovered(scope: &mut Scope, discovered: Vec<ToolSpec>) -> anyhow::Result<()> {
    for tool in discovered {
        let name = tool.definition.name.to_string();
        scope.add(tool).map_err(|_| {
            anyhow::anyhow!(
                "discovered tool `{name}` collides with another tool of the gateway scope"
            )
        })?;
    }
    Ok(())
}

/// The ledger's settings for a deployment: its approval TTL, and the outbox routes of
/// `[notify]` — every process that writes (`serve`, a CLI decision) writes the same
/// notifications (LEDGER-30).
/// The principals' own credentials, when a connection takes them (docs/rules.md CALL-11);
/// the vault key is read (or its file created) only then.
pub(crate) fn personal_vault(
    deployment: &Deployment,
    credentials: &Credentials,
    (store, egress): (&Arc<dyn Store>, &GuardedClient),
) -> anyhow::Result<Option<Arc<PersonalVault>>> {
    let config = &deployment.config;
    let mut declared = std::collections::BTreeMap::new();
    for (name, connection) in &config.connections {
        if let Some(spec) = &connection.per_principal {
            let source = Source::from_spec(spec, credentials)
                .map_err(|why| anyhow::anyhow!("[connections.{name}]: {why}"))?;
            declared.insert(name.clone(), source);
        }
    }
    if declared.is_empty() {
        return Ok(None);
    }
    let keys = crate::state_key::vault_keys(deployment, credentials).context("the vault key")?;
    let public_url = config.public_url.clone();
    Ok(Some(Arc::new(PersonalVault::new(
        Arc::clone(store),
        keys,
        declared,
        (public_url, egress.clone()),
    ))))
}

pub(crate) fn store_config(config: &airlock_spec::Config, listen: bool) -> StoreConfig {
    StoreConfig {
        approval_ttl: config.approval_ttl,
        listen,
        outbox: notify::routes(&config.notify),
        ..StoreConfig::default()
    }
}

/// Opens (and migrates) the ledger named by `url`.
pub async fn open_store(
    url: &str,
    approval_ttl: std::time::Duration,
) -> anyhow::Result<Arc<dyn Store>> {
    let config = StoreConfig {
        approval_ttl,
        ..StoreConfig::default()
    };
    open_ledger(url, config).await
}

pub(crate) async fn open_ledger(url: &str, config: StoreConfig) -> anyhow::Result<Arc<dyn Store>> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Arc::new(
            PgStore::connect_url(url, config)
                .await
                .context("opening the PostgreSQL ledger")?,
        ))
    } else {
        Ok(Arc::new(
            SqliteStore::open_url(url, config)
                .await
                .context("opening the SQLite ledger")?,
        ))
    }
}

fn tokens(auth: &EndpointAuth, credentials: &Credentials) -> anyhow::Result<Tokens> {
    let mut out = Vec::new();
    for token in &auth.tokens {
        let secret = credentials.get(&token.credential)?.clone();
        // An empty value would make an empty bearer token a valid login.
        if secrecy::ExposeSecret::expose_secret(&secret)
            .trim()
            .is_empty()
        {
            anyhow::bail!(
                "credential `{}` (token of principal {}) is empty",
                token.credential,
                token.principal
            );
        }
        out.push((secret, token.principal.clone()));
    }
    Ok(Tokens(Arc::new(out)))
}

/// `[[mcp.tokens]]` with their scopes; a scope naming an agent that is not deployed is an
/// error, not a token that silently grants nothing.
fn mcp_tokens(
    deployment: &Deployment,
    credentials: &Credentials,
) -> anyhow::Result<Vec<EndpointToken>> {
    let specs = &deployment.config.mcp.tokens;
    let secrets = tokens(&deployment.config.mcp, credentials)?;
    let mut out = Vec::with_capacity(specs.len());
    for (spec, (token, principal)) in specs.iter().zip(secrets.0.iter()) {
        let scopes = match &spec.scopes {
            None => None,
            Some(scopes) => Some(
                scopes
                    .iter()
                    .map(|s| host_scope(deployment, s, &format!("of principal {principal}")))
                    .collect::<anyhow::Result<Vec<_>>>()?,
            ),
        };
        out.push(EndpointToken {
            token: token.clone(),
            principal: principal.clone(),
            groups: spec.groups.clone(),
            scopes,
        });
    }
    Ok(out)
}

/// `[mcp.oauth]` as the endpoint's resource server, its keys fetched through `egress`; a scope
/// naming an agent that is not deployed is an error, as for tokens.
fn resource_server(
    deployment: &Deployment,
    egress: &GuardedClient,
) -> anyhow::Result<Option<ResourceServer>> {
    let Some(spec) = &deployment.config.mcp.oauth else {
        return Ok(None);
    };
    let mut scopes = Vec::with_capacity(spec.scopes.len());
    for (name, grants) in &spec.scopes {
        let label = format!("of the token scope `{name}`");
        let grants = grants
            .iter()
            .map(|s| host_scope(deployment, s, &label))
            .collect::<anyhow::Result<Vec<_>>>()?;
        scopes.push((name.clone(), grants));
    }
    let settings = OAuthSettings {
        issuer: spec.issuer.clone(),
        jwks_uri: spec.jwks_uri.clone(),
        // Set by the loader: `resource`, or else `[server] public_url` (DECL-74).
        resource: spec.resource.clone().unwrap_or_default(),
        audiences: spec.audience.clone(),
        principal_claim: spec.principal_claim.clone(),
        groups_claim: spec.groups_claim.clone(),
        scopes,
        algorithms: spec.algorithms.clone(),
        leeway: spec.leeway,
    };
    Ok(Some(ResourceServer::new(settings, egress.clone())?))
}

fn host_scope(deployment: &Deployment, scope: &ScopeId, whose: &str) -> anyhow::Result<ScopeId> {
    match scope {
        ScopeId::Agent(name) if !deployment.agents.contains_key(name.as_str()) => anyhow::bail!(
            "the token {whose} names scope \"{scope}\", but no agent `{name}` is deployed"
        ),
        ScopeId::Gateway | ScopeId::Agent(_) => Ok(scope.clone()),
    }
}

/// The scopes served, for the start-up banner.
pub fn scope_paths(booted: &Booted) -> Vec<String> {
    let mut paths = vec!["/mcp".to_owned()];
    paths.extend(
        booted
            .deployment
            .agents
            .keys()
            .filter(|n| {
                booted
                    .gateway
                    .scope(&ScopeId::Agent((*n).clone()))
                    .is_some()
            })
            .map(|n| format!("/agents/{n}/mcp")),
    );
    paths
}

/// What a park's log line tells the operator (docs/rules.md OPS-11): the command, with this
/// deployment's directory made absolute so it can be pasted anywhere, and the API route.
fn how_to_decide(root: &Path) -> HowToDecide {
    let dir = std::path::absolute(root).unwrap_or_else(|_| root.to_owned());
    let dir = shell_word(&dir.to_string_lossy());
    Arc::new(move |row: &Invocation| {
        let id = row.id;
        match row.state {
            InvocationState::AwaitingApproval => Some(format!(
                "airlock approve {id} --dir {dir} (or deny {id} --reason R); POST /v1/invocations/{id}/approve"
            )),
            InvocationState::AwaitingAnswer => Some(format!(
                "airlock answer {id} --text T --dir {dir}; POST /v1/invocations/{id}/answer"
            )),
            _ => None,
        }
    })
}

/// `word` as one shell word: as it is when it holds nothing a shell reads, else single-quoted.
pub(crate) fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@%,=".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}
