//! airlock declarations: the validated model of a deployment directory.
//!
//! This crate reads files and nothing else: no network, no database, no async runtime.
//! [`Deployment::load`] turns a directory into a validated model, or into every problem at once,
//! each with file, line:column, key path and reason. Declaration shapes stay private; only
//! validated types leave the crate.

mod access;
mod agent;
mod api_file;
mod approvers;
mod audit;
mod builtin;
mod canonical;
mod catalog;
mod config;
mod connection;
mod credentials;
mod declared;
mod deployment;
mod diag;
mod egress_settings;
mod fields;
mod limits;
mod model_script;
mod names;
mod notify;
mod oauth;
mod per_principal;
mod policy;
mod refs;
mod schema;
mod scope;
mod telemetry;
mod tool;
mod tool_api;
mod tool_auth;
mod tool_mcp;
mod tree;
mod urls;
mod values;
mod visible;

pub use access::{AccessPolicy, AccessRule, EVERYONE, Principal, Verdict, glob};
pub use agent::{API_VERSION, AgentSpec, ModelSpec, PROVIDERS};
pub use approvers::{Approvers, Escalation, Slot};
pub use audit::AuditExport;
pub use builtin::definition as builtin_definition;
pub use canonical::{canonical_json, canonical_sha256, json_sha256, sha256_hex};
pub use catalog::{INTEGRATION_FILE, MAX_PAGES};
pub use config::{
    ApiConnection, Config, CredentialsSettings, DEFAULT_APPROVAL_TTL, DEFAULT_HEADER_TIMEOUT,
    DEFAULT_LISTEN, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_MAX_IN_FLIGHT_PER_PRINCIPAL, EndpointAuth, PerRunConnection, ServerLimits, TokenSpec,
};
pub use connection::ConnectionSpec;
pub use credentials::{CredentialError, Credentials, ENV_PREFIX, MASTER_KEY_ENV, MasterKey};
pub use deployment::{Deployment, MAX_FILE_BYTES};
pub use diag::{SpecErrors, SpecIssue};
pub use egress_settings::{DEFAULT_BODY_CAP, DEFAULT_EGRESS_DEADLINE, EgressSettings};
pub use limits::{Limit, Measure};
pub use model_script::{ModelScript, ScriptedCall, ScriptedConversation, ScriptedTurn};
pub use names::{AWAIT_TOOL, CredentialPath, MAX_TOOL_NAME, ToolName};
pub use notify::{NotifySettings, SLACK_API, SlackSettings, WebhookSettings};
pub use oauth::{DEFAULT_OAUTH_ALGORITHMS, DEFAULT_OAUTH_LEEWAY, OAuthSpec};
pub use per_principal::{ConnectOAuth, ExchangeGrant, PerPrincipal, TokenExchange};
pub use policy::{
    Approval, Effect, LimitBy, LimitOver, Mode, NotifyEvent, SourceKind, UnknownWord,
};
pub use refs::{Reach, Reference, Referenced};
pub use schema::{MAX_SCHEMA_BYTES, MAX_SCHEMA_DEPTH, compile_input_schema};
pub use scope::{NameCollision, ParseScopeError, Scope, ScopeId, definitions_digest};
pub use telemetry::{DEFAULT_SERVICE_NAME, TelemetrySettings};
pub use tool::{
    ApiAuth, ApiOperation, Builtin, ConnectionTool, IntegrationAction, McpAuth, McpInlineTool,
    McpProtocol, Method, Pagination, Policy, RateLimit, ToolDefinition, ToolSource, ToolSpec,
};
pub use tool_mcp::{MAX_MCP_SLUG, MAX_REMOTE_TOOL_NAME};
pub use tree::Pos;
pub use values::parse_duration;
pub use visible::{disguises, visible_text};
