//! `airlock.toml`: server settings. Every key is optional and has a documented default;
//! unknown keys are errors.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::access::{AccessPolicy, read_access};
use crate::diag::Diag;
use crate::egress_settings::{EgressSettings, read_egress};
use crate::fields::Fields;
use crate::names::{CredentialPath, check_identifier};
use crate::notify::{NotifySettings, read_notify};
use crate::oauth::{OAuthSpec, oauth_resource, read_oauth};
use crate::per_principal::{
    Available, PerPrincipal, read_per_principal, refuse_without_per_principal,
};
use crate::policy::{Approval, Effect};
use crate::refs::Referenced;
use crate::scope::ScopeId;
use crate::telemetry::{TelemetrySettings, read_telemetry};
use crate::tool::{Builtin, Policy};
use crate::tree::{Node, Pos};
use crate::urls::check_credential_url;
use crate::values::{credential_path, duration, refer_credential};

mod server;

use server::server;
pub use server::{
    DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_MAX_IN_FLIGHT_PER_PRINCIPAL, ServerLimits,
};

/// Default listen address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// Default approval TTL: 7 days.
pub const DEFAULT_APPROVAL_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// The longest grant a person may give with an approval when `max_grant` is not set.
pub(crate) const DEFAULT_MAX_GRANT: Duration = Duration::from_secs(24 * 3600);

/// The validated `airlock.toml`.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `listen`: address of the HTTP server (default `127.0.0.1:8080`).
    pub listen: SocketAddr,
    /// `database_url`: `sqlite://…` or `postgres://…` (default an SQLite file `airlock.sqlite`
    /// inside the deployment directory).
    pub database_url: String,
    /// `approval_ttl`: how long a parked call waits for a person (default `7d`).
    pub approval_ttl: Duration,
    /// `max_grant`: the longest a grant given with an approval may last (default `24h`,
    /// docs/rules.md POLICY-62).
    pub max_grant: Duration,
    /// `[mcp]`: who may call the MCP endpoint (none by default: every request is refused).
    pub mcp: EndpointAuth,
    /// `[admin]`: who may decide approvals over the API (none by default).
    pub admin: EndpointAuth,
    /// `[egress]`: the operator's egress policy.
    pub egress: EgressSettings,
    /// `[connections.<name>]`: base URLs and credentials of tenant APIs and MCP servers.
    pub connections: BTreeMap<String, ApiConnection>,
    /// `[connections.<name>]` declared `per_run = true`: no base URL or credential here, each
    /// run's caller supplies both (docs/rules.md DECL-83).
    pub per_run_connections: BTreeMap<String, PerRunConnection>,
    /// `[credentials]`: where secrets come from.
    pub credentials: CredentialsSettings,
    /// `[builtins.<name>]`: builtin tools enabled in the gateway scope, with their policy.
    pub builtins: Vec<(Builtin, Policy)>,
    /// `[server]`: what one client, or many, may hold of the HTTP server (OPS-12, OPS-13).
    pub server: ServerLimits,
    /// `[server] public_url`: where people reach notifications' links (DECL-55; unset: relative).
    pub public_url: Option<String>,
    /// `[notify]`: webhooks and Slack (NOTIFY).
    pub notify: NotifySettings,
    /// `[confirm] yes_words`: the messages that consent to a held call (empty: the runtime's
    /// defaults, `yes`, `y`, `confirm`).
    pub yes_words: Vec<String>,
    /// `[telemetry]`: where traces are exported (`None`: tracing export is off).
    pub telemetry: Option<TelemetrySettings>,
    /// `[[access]]`: who may see and call which tools (POLICY-43); empty: no filtering.
    pub access: AccessPolicy,
    /// `[audit.export]`: where audit events are exported, with or without arguments (DECL-90).
    pub audit_export: crate::audit::AuditExport,
}

/// Bearer tokens accepted by an endpoint, each mapped to a principal.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EndpointAuth {
    /// `[[mcp.tokens]]` / `[[admin.tokens]]`: `credential` path → `principal` name.
    pub tokens: Vec<TokenSpec>,
    /// `allowed_hosts`: `Host`/`Origin` names accepted (default loopback names only).
    pub allowed_hosts: Vec<String>,
    /// `[mcp] request_state_key`: the credential holding the key input requests' states are
    /// sealed with (64 hex characters); `None`: a key file beside the ledger (MCP-48).
    pub request_state_key: Option<CredentialPath>,
    /// `[mcp] request_state_previous_keys`: keys a rotation retired, which still open states
    /// sealed before it and never seal one (DECL-89).
    pub request_state_previous_keys: Vec<CredentialPath>,
    /// `[mcp.oauth]`: OAuth access tokens accepted beside `tokens` (MCP only).
    pub oauth: Option<OAuthSpec>,
}

/// One accepted bearer token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenSpec {
    /// Where the token is stored.
    pub credential: CredentialPath,
    /// The principal recorded on every call made with it.
    pub principal: String,
    /// `scopes` (MCP tokens only): the endpoints it may call, `"gateway"` (`POST /mcp`) or
    /// `"agent:<name>"` (`POST /agents/<name>/mcp`). `None` (the key absent): every scope.
    pub scopes: Option<Vec<ScopeId>>,
    /// `groups`: the groups its principal belongs to, for `[[access]]` rules (POLICY-44).
    pub groups: Vec<String>,
}

/// `[connections.<name>]`: where a tenant API or MCP server lives, and its credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiConnection {
    /// `base_url`: scheme, host and optional base path.
    pub base_url: String,
    /// `credential`: path of the credential sent to it.
    pub credential: Option<CredentialPath>,
    /// `use_egress_allow` (default `false`): the operator vouches for this connection, so its
    /// calls may reach what `[egress] allow` lets through; without it they reach public
    /// addresses only, like every destination a tenant declares (docs/rules.md EGRESS-38).
    pub use_egress_allow: bool,
    /// `per_principal = true`: each principal's own credential, and where it comes from
    /// (docs/rules.md DECL-91); `None`: the deployment's `credential`, if any.
    pub per_principal: Option<PerPrincipal>,
}

impl ApiConnection {
    /// Whether a call through it carries a credential: the deployment's, or its principal's.
    #[must_use]
    pub fn sends_credential(&self) -> bool {
        self.credential.is_some() || self.per_principal.is_some()
    }
}

/// `[connections.<name>]` with `per_run = true`: a connection each run's caller supplies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PerRunConnection {
    /// `use_egress_allow`, as for [`ApiConnection::use_egress_allow`]: the URLs callers
    /// supply for it may reach what `[egress] allow` lets through.
    pub use_egress_allow: bool,
}

/// `[credentials]`: sources of secrets. The environment (`AIRLOCK_CREDENTIALS__…`) always
/// comes first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialsSettings {
    /// `file`: a plain YAML credentials file (development only).
    pub file: Option<PathBuf>,
    /// `encrypted`: the encrypted file (default `credentials.yml.enc`; used when it exists).
    pub encrypted: PathBuf,
    /// `master_key_file`: key file (default `master.key`); `AIRLOCK_MASTER_KEY` wins.
    pub master_key_file: PathBuf,
    /// `vault_key`: credential path of the key that seals principals' own credentials in the
    /// ledger (docs/rules.md CALL-14); unset: the key file `vault.key`, generated on first use.
    pub vault_key: Option<CredentialPath>,
    /// `vault_previous_keys`: keys a rotation retired; they open what they sealed, never seal.
    pub vault_previous_keys: Vec<CredentialPath>,
}

const TOP_KEYS: [&str; 16] = [
    "access",
    "audit",
    "listen",
    "database_url",
    "approval_ttl",
    "max_grant",
    "mcp",
    "admin",
    "egress",
    "connections",
    "credentials",
    "builtins",
    "server",
    "notify",
    "confirm",
    "telemetry",
];

/// Reads `airlock.toml` (its tree) into a [`Config`]; `root` is the deployment directory.
pub(crate) fn read_config(node: Option<&Node>, root: &Path, d: &mut Diag) -> Option<Config> {
    let empty = Node {
        at: Pos { line: 1, column: 1 },
        value: crate::tree::NodeValue::Map(Vec::new()),
    };
    let f = Fields::open(node.unwrap_or(&empty), "", &TOP_KEYS, d)?;
    let listen = f
        .opt_str("listen", d)
        .unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
    let listen = listen.parse().map_err(|_| {
        d.push(
            f.key_at("listen"),
            "listen",
            format!("`{listen}` is not an address such as `127.0.0.1:8080`"),
        );
    });
    let database_url = f.opt_str("database_url", d).map_or_else(
        || format!("sqlite://{}", root.join("airlock.sqlite").display()),
        |url| database_url(&url, root, f.key_at("database_url"), d),
    );
    let approval_ttl = f
        .get("approval_ttl")
        .and_then(|n| duration(n, "approval_ttl", d))
        .unwrap_or(DEFAULT_APPROVAL_TTL);
    let max_grant = f
        .get("max_grant")
        .and_then(|n| duration(n, "max_grant", d))
        .unwrap_or(DEFAULT_MAX_GRANT);
    let mut mcp = f
        .get("mcp")
        .map(|n| endpoint_auth(n, "mcp", d))
        .unwrap_or_default();
    let admin = f
        .get("admin")
        .map(|n| endpoint_auth(n, "admin", d))
        .unwrap_or_default();
    let egress = read_egress(f.get("egress"), d);
    let credentials = credentials(f.get("credentials"), d);
    let builtins = f
        .get("builtins")
        .map(|n| builtins(n, d))
        .unwrap_or_default();
    let server = server(f.get("server"), d);
    let public_url = public_url(f.get("server"), d);
    let has = Available {
        mcp_oauth: mcp.oauth.is_some(),
        public_url: public_url.is_some(),
    };
    let (connections, per_run_connections) = f
        .get("connections")
        .map(|n| connections(n, has, d))
        .unwrap_or_default();
    shared_vault_key(&f, (database_url.as_str(), &connections, &credentials), d);
    let at = f.key_at("mcp");
    oauth_resource(mcp.oauth.as_mut(), public_url.as_deref(), at, d);
    let notify = read_notify(f.get("notify"), d);
    let yes_words = yes_words(f.get("confirm"), d);
    let telemetry = read_telemetry(f.get("telemetry"), d);
    let access = read_access(f.get("access"), d);
    Some(Config {
        listen: listen.ok()?,
        database_url,
        approval_ttl,
        max_grant,
        mcp,
        admin,
        egress,
        connections,
        per_run_connections,
        credentials,
        builtins,
        server,
        public_url,
        notify,
        yes_words,
        telemetry,
        access,
        audit_export: crate::audit::read_audit(f.get("audit"), root, d),
    })
}

/// `[confirm] yes_words`: the messages by which a person consents to a held call
/// (docs/rules.md POLICY-33); empty means the runtime's defaults.
fn yes_words(node: Option<&Node>, d: &mut Diag) -> Vec<String> {
    let Some(f) = node.and_then(|n| Fields::open(n, "confirm", &["yes_words"], d)) else {
        return Vec::new();
    };
    let words = f.opt_str_list("yes_words", d).unwrap_or_default();
    if words.iter().any(|(w, _)| w.trim().is_empty()) || f.has("yes_words") && words.is_empty() {
        d.push(
            f.key_at("yes_words"),
            "confirm.yes_words",
            "every yes-word must be non-empty, and the list must hold at least one",
        );
    }
    words.into_iter().map(|(w, _)| w).collect()
}

/// `[server] public_url`: an http(s) URL without a trailing slash (DECL-55).
fn public_url(node: Option<&Node>, d: &mut Diag) -> Option<String> {
    // `[server]` that is not a mapping is reported once, by `server`.
    let node = node.filter(|n| matches!(n.value, crate::tree::NodeValue::Map(_)))?;
    let f = Fields::open_free(node, "server", d)?;
    let url = f.opt_str("public_url", d)?;
    match url::Url::parse(&url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => {
            Some(url.trim_end_matches('/').to_owned())
        }
        _ => {
            d.push(
                f.key_at("public_url"),
                "server.public_url",
                format!("`{url}` is not an http(s) URL such as `https://airlock.example.com`"),
            );
            None
        }
    }
}

fn database_url(url: &str, root: &Path, at: Pos, d: &mut Diag) -> String {
    if let Some(path) = url.strip_prefix("sqlite://") {
        let path = Path::new(path.split('?').next().unwrap_or(path));
        let absolute = if path.is_absolute() {
            path.to_path_buf()
        } else {
            root.join(path)
        };
        return format!("sqlite://{}", absolute.display());
    }
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        d.push(
            at,
            "database_url",
            "expected `sqlite://PATH` or `postgres://…`",
        );
    }
    url.to_owned()
}

/// `[mcp]` or `[admin]`; only MCP tokens may name `scopes`, only `[mcp]` may have `oauth`.
fn endpoint_auth(node: &Node, path: &str, d: &mut Diag) -> EndpointAuth {
    let keys = ["tokens", "allowed_hosts", "oauth", "request_state_key"];
    let keys = [&keys[..], &["request_state_previous_keys"]].concat();
    let keys = if path == "mcp" { &keys[..] } else { &keys[..2] };
    let Some(f) = Fields::open(node, path, keys, d) else {
        return EndpointAuth::default();
    };
    // Each key is a credential `check` and boot resolve, named where it is written.
    let state_key = |path: String, at: Pos, node: &Node, d: &mut Diag| {
        let key = credential_path(node, &path, d)?;
        d.refer(at, &path, Referenced::Credential(key.clone()));
        Some(key)
    };
    let request_state_key = f.get("request_state_key").and_then(|n| {
        let at = f.key_at("request_state_key");
        state_key(f.key("request_state_key"), at, n, d)
    });
    let previous = f.opt_list("request_state_previous_keys", d);
    let request_state_previous_keys = previous
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(path, n)| state_key(path, n.at, n, d))
        .collect();
    let token_keys: &[&str] = if path == "mcp" {
        &["credential", "principal", "scopes", "groups"]
    } else {
        &["credential", "principal"]
    };
    let mut tokens = Vec::new();
    for (item_path, item) in f.opt_list("tokens", d).unwrap_or_default() {
        let Some(t) = Fields::open(item, &item_path, token_keys, d) else {
            continue;
        };
        let scopes = t.opt_str_list("scopes", d).map(|list| {
            if list.is_empty() {
                d.push(
                    t.key_at("scopes"),
                    &t.key("scopes"),
                    "an empty list grants nothing; name the scopes, or remove the key to allow every scope",
                );
            }
            list.into_iter()
                .filter_map(|(text, at)| {
                    text.parse::<ScopeId>()
                        .map_err(|reason| d.push(at, &t.key("scopes"), reason.to_string()))
                        .ok()
                })
                .collect()
        });
        let credential = t
            .required("credential", d)
            .and_then(|n| credential_path(n, &t.key("credential"), d));
        refer_credential(&t, credential.as_ref(), d);
        let principal = t.req_str("principal", d);
        let groups = t.opt_str_list("groups", d).unwrap_or_default();
        let groups = groups.into_iter().map(|(g, _)| g).collect();
        if let (Some(credential), Some(principal)) = (credential, principal) {
            tokens.push(TokenSpec {
                credential,
                principal,
                scopes,
                groups,
            });
        }
    }
    let allowed_hosts = f.opt_str_list("allowed_hosts", d).map_or_else(
        || {
            vec![
                "localhost".to_owned(),
                "127.0.0.1".to_owned(),
                "::1".to_owned(),
            ]
        },
        |hosts| {
            hosts
                .into_iter()
                .map(|(h, _)| h.to_ascii_lowercase())
                .collect()
        },
    );
    EndpointAuth {
        tokens,
        allowed_hosts,
        request_state_key,
        request_state_previous_keys,
        oauth: f
            .get("oauth")
            .filter(|_| path == "mcp")
            .and_then(|n| read_oauth(n, d)),
    }
}

/// `[connections]`: the connections with a base URL here, and the names declared per run.
type Connections = (
    BTreeMap<String, ApiConnection>,
    BTreeMap<String, PerRunConnection>,
);

fn connections(node: &Node, has: Available, d: &mut Diag) -> Connections {
    let mut out = BTreeMap::new();
    let mut per_run = BTreeMap::new();
    let Some(f) = Fields::open_free(node, "connections", d) else {
        return (out, per_run);
    };
    for entry in f.entries() {
        let path = f.key(&entry.key);
        if let Err(reason) = check_identifier(&entry.key) {
            d.push(entry.key_at, &path, reason);
        }
        let keys = [
            "base_url",
            "credential",
            "use_egress_allow",
            "per_run",
            "per_principal",
            "oauth",
            "token_exchange",
        ];
        let Some(c) = Fields::open(&entry.value, &path, &keys, d) else {
            continue;
        };
        let use_egress_allow = c.opt_bool("use_egress_allow", d).ok().flatten() == Some(true);
        if c.opt_bool("per_run", d) == Ok(Some(true)) {
            per_run_only(&c, d);
            per_run.insert(entry.key.clone(), PerRunConnection { use_egress_allow });
            continue;
        }
        let per_principal = if c.opt_bool("per_principal", d) == Ok(Some(true)) {
            read_per_principal(&c, has, d)
        } else {
            refuse_without_per_principal(&c, d);
            None
        };
        let credential = c
            .get("credential")
            .and_then(|n| credential_path(n, &c.key("credential"), d));
        refer_credential(&c, credential.as_ref(), d);
        let Some(base_url) = c.req_str("base_url", d) else {
            continue;
        };
        let sends = credential.is_some() || per_principal.is_some();
        match check_credential_url(&base_url, sends) {
            Ok(()) => d.refer(
                c.key_at("base_url"),
                &c.key("base_url"),
                Referenced::Url(base_url.clone(), reach_of(use_egress_allow)),
            ),
            Err(reason) => d.push(c.key_at("base_url"), &c.key("base_url"), reason),
        }
        out.insert(
            entry.key.clone(),
            ApiConnection {
                base_url,
                credential,
                use_egress_allow,
                per_principal,
            },
        );
    }
    (out, per_run)
}

/// On PostgreSQL, replicas share the ledger but not a key file: principals' credentials
/// sealed by one would not open on another without one shared `[credentials] vault_key`
/// (DECL-94). A warning, since one process alone is served well by its key file.
fn shared_vault_key(
    f: &Fields<'_>,
    (database_url, connections, credentials): (
        &str,
        &BTreeMap<String, ApiConnection>,
        &CredentialsSettings,
    ),
    d: &mut Diag,
) {
    let personal = connections.values().any(|c| c.per_principal.is_some());
    if personal && database_url.starts_with("postgres") && credentials.vault_key.is_none() {
        d.warn(
            f.key_at("connections"),
            "connections",
            "a connection takes each principal's own credential and the ledger is PostgreSQL, but `[credentials] vault_key` is not set: each replica would make its own `vault.key`, and a credential set through one would not open on another; set one shared `vault_key`",
        );
    }
}

fn reach_of(use_egress_allow: bool) -> crate::Reach {
    if use_egress_allow {
        crate::Reach::Operator
    } else {
        crate::Reach::Tenant
    }
}

/// A per-run connection has no base URL or credential here: both come from each run's caller.
fn per_run_only(c: &Fields<'_>, d: &mut Diag) {
    for key in [
        "base_url",
        "credential",
        "per_principal",
        "oauth",
        "token_exchange",
    ] {
        if c.get(key).is_some() {
            d.push(
                c.key_at(key),
                &c.key(key),
                format!("`{key}` is not allowed with `per_run = true`: each run's caller supplies the connection"),
            );
        }
    }
}

fn credentials(node: Option<&Node>, d: &mut Diag) -> CredentialsSettings {
    let mut settings = CredentialsSettings {
        file: None,
        encrypted: PathBuf::from("credentials.yml.enc"),
        master_key_file: PathBuf::from("master.key"),
        vault_key: None,
        vault_previous_keys: Vec::new(),
    };
    let keys = [
        "file",
        "encrypted",
        "master_key_file",
        "vault_key",
        "vault_previous_keys",
    ];
    let Some(f) = node.and_then(|n| Fields::open(n, "credentials", &keys, d)) else {
        return settings;
    };
    let key = |path: String, at: Pos, node: &Node, d: &mut Diag| {
        let key = credential_path(node, &path, d)?;
        d.refer(at, &path, Referenced::Credential(key.clone()));
        Some(key)
    };
    settings.vault_key = f
        .get("vault_key")
        .and_then(|n| key(f.key("vault_key"), f.key_at("vault_key"), n, d));
    settings.vault_previous_keys = f
        .opt_list("vault_previous_keys", d)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(path, n)| key(path, n.at, n, d))
        .collect();
    settings.file = f.opt_str("file", d).map(PathBuf::from);
    if let Some(path) = f.opt_str("encrypted", d) {
        settings.encrypted = PathBuf::from(path);
    }
    if let Some(path) = f.opt_str("master_key_file", d) {
        settings.master_key_file = PathBuf::from(path);
    }
    settings
}

fn builtins(node: &Node, d: &mut Diag) -> Vec<(Builtin, Policy)> {
    let mut out = Vec::new();
    let Some(f) = Fields::open_free(node, "builtins", d) else {
        return out;
    };
    for entry in f.entries() {
        let path = f.key(&entry.key);
        let Some(builtin) = Builtin::by_name(&entry.key) else {
            let names: Vec<&str> = Builtin::ALL.iter().map(|(n, _)| *n).collect();
            d.push(
                entry.key_at,
                &path,
                format!(
                    "unknown builtin `{}`; expected one of: {}",
                    entry.key,
                    names.join(", ")
                ),
            );
            continue;
        };
        let Some(b) = Fields::open(&entry.value, &path, &["approval"], d) else {
            continue;
        };
        let approval = b
            .word::<Approval>("approval", d)
            .ok()
            .flatten()
            .unwrap_or_default();
        let approval = match builtin {
            Builtin::AskHuman => {
                let why = crate::builtin::ASK_HUMAN_ASKS_ITSELF;
                crate::declared::no_caller_approval(&b, approval, why, d).unwrap_or_default()
            }
            Builtin::Fetch => approval,
        };
        out.push((
            builtin,
            Policy {
                approval,
                effect: Effect::AtMostOnce,
                ..Policy::default()
            },
        ));
    }
    out
}
