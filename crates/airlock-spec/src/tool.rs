//! The validated tool model: what the model sees ([`ToolDefinition`]), how the tool runs
//! ([`ToolSource`]) and what airlock enforces around it ([`Policy`]).

use std::time::Duration;

use serde_json::Value;

use crate::names::ToolName;
use crate::policy::{Approval, Effect, Mode, SourceKind};

/// What the model and MCP clients see of a tool; the input of the definitions digest.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ToolDefinition {
    /// Final, model-visible name.
    pub name: ToolName,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the arguments (always `type: object`).
    pub input_schema: Value,
}

/// A tool of a scope: its definition, how it runs, and its policy.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// What the model sees.
    pub definition: ToolDefinition,
    /// Where and how it runs.
    pub source: ToolSource,
    /// Approval, effect, mode, rate limit.
    pub policy: Policy,
}

/// Per-tool policy enforced by the gateway and the ledger.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Policy {
    /// When a person must approve (default `never`).
    pub approval: Approval,
    /// Repeat semantics (default `at_most_once`).
    pub effect: Effect,
    /// `propose` for writes that are returned instead of executed.
    pub mode: Mode,
    /// Whether the tool writes (`writes: true`); reads never propose.
    pub writes: bool,
    /// Calls allowed per window, shared by every tool of the declaration and every principal
    /// (POLICY-16).
    pub rate_limit: Option<RateLimit>,
    /// Calls each principal may make per window, on top of `rate_limit`
    /// (`rate_limit.per_principal`, POLICY-16).
    pub per_principal_rate_limit: Option<RateLimit>,
    /// `limits:` — caps on what the declaration's calls add up to over a window
    /// (docs/rules.md POLICY-57).
    pub limits: Vec<crate::Limit>,
    /// How long a parked call waits for a person before it expires (`approval_ttl`); `None`:
    /// the server's default.
    pub approval_ttl: Option<Duration>,
    /// `approvers:` — how many people approve, who may decide, whether the caller may
    /// approve its own call (docs/rules.md POLICY-61).
    pub approvers: crate::Approvers,
    /// `confirm: true` of a catalog integration's action: an agent run does not run the call
    /// until the person consents in their next message (docs/rules.md POLICY-30).
    pub confirm: bool,
}

/// A rate limit: at most `requests` calls per `per`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Calls allowed per window (≥ 1).
    pub requests: u32,
    /// The window.
    pub per: Duration,
}

/// How a tool runs.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolSource {
    /// One operation of a tenant HTTP API (`type: api`, docs/rules.md DECL-18).
    Api(ApiOperation),
    /// One tool of a tenant MCP server described inline (`type: mcp`, docs/rules.md DECL-24).
    McpInline(McpInlineTool),
    /// One action of an operator-written catalog integration (`type: integration`, docs/rules.md
    /// DECL-44).
    Integration(IntegrationAction),
    /// One tool of a connection file's MCP server, known after discovery (docs/rules.md DECL-16).
    Connection(ConnectionTool),
    /// Another agent of the deployment, called as a tool.
    Agent(String),
    /// A tool built into airlock.
    Builtin(Builtin),
    /// A tool compiled into the embedding process (`airlock_runtime::LocalTool`).
    Local,
}

impl ToolSource {
    /// The source kind stored on ledger rows.
    #[must_use]
    pub fn kind(&self) -> SourceKind {
        match self {
            Self::Api(_) | Self::Integration(_) => SourceKind::Api,
            Self::McpInline(_) | Self::Connection(_) => SourceKind::Mcp,
            Self::Agent(_) => SourceKind::Agent,
            Self::Builtin(_) => SourceKind::Builtin,
            Self::Local => SourceKind::Local,
        }
    }

    /// The connection its calls go through, by the name an operator freezes it under: a
    /// connection file's namespace, a `[connections.<name>]` entry, or `catalog/<slug>` for an
    /// integration. None for tools that reach no connection.
    #[must_use]
    pub fn connection(&self) -> Option<&str> {
        match self {
            Self::Api(op) => Some(&op.connection),
            Self::McpInline(tool) => Some(&tool.connection),
            Self::Integration(action) => Some(&action.request.connection),
            Self::Connection(tool) => Some(&tool.namespace),
            Self::Agent(_) | Self::Builtin(_) | Self::Local => None,
        }
    }
}

/// The tools built into airlock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Builtin {
    /// Ask a person a question; the call parks until answered, declined or expired.
    AskHuman,
    /// GET a public URL through the egress guard (text only, capped).
    Fetch,
}

impl Builtin {
    /// Every builtin, by name.
    pub const ALL: [(&'static str, Builtin); 2] =
        [("ask_human", Self::AskHuman), ("fetch", Self::Fetch)];

    /// The tool name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::AskHuman => "ask_human",
            Self::Fetch => "fetch",
        }
    }

    /// Looks a builtin up by name.
    #[must_use]
    pub fn by_name(name: &str) -> Option<Self> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, b)| *b)
    }
}

/// Authentication of a tenant API (`auth.scheme`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiAuth {
    /// `Authorization: Bearer <credential>`.
    Bearer,
    /// `<header>: <credential>`.
    Header(String),
    /// HTTP basic; the credential is a mapping with `username` and `password`.
    Basic,
    /// The credential as query parameter `<param>`, overriding a declared one.
    Query(String),
    /// No credential (`scheme: none`, catalog integrations only).
    None,
}

/// HTTP method of an API operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// GET: no body.
    Get,
    /// POST: JSON body.
    Post,
    /// PUT: JSON body (catalog integrations only).
    Put,
    /// PATCH: JSON body (catalog integrations only).
    Patch,
    /// DELETE: no body (catalog integrations only).
    Delete,
}

impl Method {
    /// The method's name on the wire.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Post => "POST",
            Self::Put => "PUT",
            Self::Patch => "PATCH",
            Self::Delete => "DELETE",
        }
    }

    /// Whether a request of this method may carry a JSON body.
    #[must_use]
    pub fn has_body(self) -> bool {
        matches!(self, Self::Post | Self::Put | Self::Patch)
    }
}

/// One operation of a `type: api` declaration.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiOperation {
    /// The declaration's slug (`erp-cliente`).
    pub slug: String,
    /// The operation's name (`buscar_cliente`).
    pub operation: String,
    /// The connection supplying `base_url` and the credential.
    pub connection: String,
    /// How the credential is sent.
    pub auth: ApiAuth,
    /// GET or POST.
    pub method: Method,
    /// Path template, starting with `/`, with `{name}` placeholders.
    pub path: String,
    /// Query template, in declaration order.
    pub query: Vec<(String, String)>,
    /// JSON body template (POST).
    pub body: Option<Value>,
    /// Parameters whose value may contain `/` in the path.
    pub allow_slashes: Vec<String>,
    /// Dotted path selecting part of the JSON response.
    pub select: Option<String>,
}

/// One action of a catalog integration (`catalog/<slug>/integration.yaml`, docs/rules.md
/// DECL-44..DECL-49): the request in the api executor's shape, plus what only the catalog has.
#[derive(Debug, Clone, PartialEq)]
pub struct IntegrationAction {
    /// The request: `slug` is the integration's, `operation` the action's, `connection` is
    /// `catalog/<slug>` (named in errors), `select` is `response.select`.
    pub request: ApiOperation,
    /// `base_url`, written by the operator in the catalog file.
    pub base_url: String,
    /// `auth.credential`: the credential path (none for `scheme: none`).
    pub credential: Option<crate::CredentialPath>,
    /// Headers sent with every request (the integration's, then the action's), values
    /// templated from the arguments.
    pub headers: Vec<(String, String)>,
    /// How more pages are fetched, if the action pages.
    pub pagination: Option<Pagination>,
}

/// How a catalog action fetches its pages (DECL-47). Each page's `response.select` is a list;
/// the result is their concatenation, at most `max_pages` pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pagination {
    /// The next page is asked with query parameter `param` = the value at dotted path `next` of
    /// the page's body; a missing, `null` or empty value ends.
    Cursor {
        /// The query parameter carrying the cursor.
        param: String,
        /// Dotted path of the next cursor in a page.
        next: String,
        /// Most pages fetched.
        max_pages: u32,
    },
    /// Query parameter `param` counts pages from `start`; an empty page ends.
    Page {
        /// The query parameter carrying the page number.
        param: String,
        /// The first page's number.
        start: u64,
        /// Most pages fetched.
        max_pages: u32,
    },
}

/// Authentication of a tenant or connection MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpAuth {
    /// No credential.
    None,
    /// `Authorization: Bearer <credential>`.
    Bearer,
    /// `<header>: <credential>`.
    Header(String),
}

/// Which MCP protocol revision an upstream speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum McpProtocol {
    /// Session-era lifecycle (`initialize`), the default.
    #[default]
    Legacy,
    /// Probe `server/discover`, fall back to `initialize`.
    Auto,
    /// The 2026-07-28 revision.
    Rev20260728,
}

impl McpProtocol {
    /// Accepted spellings.
    pub const WORDS: [&'static str; 3] = ["legacy", "auto", "2026-07-28"];

    pub(crate) fn parse(word: &str) -> Option<Self> {
        match word {
            "legacy" => Some(Self::Legacy),
            "auto" => Some(Self::Auto),
            "2026-07-28" => Some(Self::Rev20260728),
            _ => None,
        }
    }

    /// The spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Legacy => "legacy",
            Self::Auto => "auto",
            Self::Rev20260728 => "2026-07-28",
        }
    }
}

/// One tool of an inline `type: mcp` declaration.
#[derive(Debug, Clone, PartialEq)]
pub struct McpInlineTool {
    /// The declaration's slug (`soporte`).
    pub slug: String,
    /// The tool's name on the server, as given (`buscar_ticket`).
    pub remote_name: String,
    /// The connection supplying `base_url` and the credential.
    pub connection: String,
    /// Path of the MCP endpoint on the connection's base URL.
    pub path: String,
    /// How the credential is sent.
    pub auth: McpAuth,
    /// Protocol revision spoken by the server.
    pub protocol: McpProtocol,
    /// `offers: true`: the server's resources, prompts and completions are served beside its
    /// tools (docs/rules.md DECL-77).
    pub offers: bool,
    /// The server runs this tool only as a task (`execution.taskSupport: "required"`): a
    /// client that does not follow tasks is refused before the call (docs/rules.md DECL-82,
    /// MCP-80).
    pub requires_tasks: bool,
}

/// One tool of a connection file's server.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionTool {
    /// The connection file's namespace (`crm`).
    pub namespace: String,
    /// The tool's name on the server.
    pub remote_name: String,
    /// The `outputSchema` the server declares for it, listed to MCP clients as discovered
    /// (docs/rules.md MCP-33).
    pub output_schema: Option<Value>,
}
