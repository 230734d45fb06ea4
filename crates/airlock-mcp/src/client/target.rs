//! Where a call goes and what it carries: airlock's own vocabulary for an MCP upstream.
//!
//! Guarantees: a credential stays a [`SecretString`] until the request header is built (then the
//! header is marked sensitive); [`McpCredential::from_spec`] refuses a declared credential that
//! is missing, so no request is ever sent without the auth its declaration asks for.

use airlock_spec::{McpAuth, McpProtocol};
use http::HeaderName;
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;

use crate::downstream::Downstream;
use crate::error::{CallErrorKind, McpCallError};

/// How a request to the upstream is authenticated.
#[derive(Debug, Clone, Default)]
pub enum McpCredential {
    /// No credential.
    #[default]
    None,
    /// `Authorization: Bearer <token>`.
    Bearer(SecretString),
    /// `<name>: <value>`, and no `Authorization` header.
    Header {
        /// The header name as declared (`X-Api-Key`).
        name: String,
        /// The secret value.
        value: SecretString,
    },
}

impl McpCredential {
    /// Builds the credential a declaration asks for from the secret resolved at call time.
    ///
    /// # Errors
    /// [`CallErrorKind::Config`] when the declaration has auth but no secret was supplied.
    pub fn from_spec(auth: &McpAuth, secret: Option<SecretString>) -> Result<Self, McpCallError> {
        match (auth, secret) {
            (McpAuth::None, _) => Ok(Self::None),
            (McpAuth::Bearer, Some(token)) => Ok(Self::Bearer(token)),
            (McpAuth::Header(name), Some(value)) => Ok(Self::Header {
                name: name.clone(),
                value,
            }),
            (McpAuth::Bearer | McpAuth::Header(_), None) => Err(McpCallError::new(
                CallErrorKind::Config,
                "the connection declares auth but no credential was supplied",
            )),
        }
    }

    /// True when a request carries a secret (the guard refuses that over plain http).
    #[must_use]
    pub fn is_some(&self) -> bool {
        !matches!(self, Self::None)
    }

    /// The secret itself, if there is one (no relayed upstream message may contain it).
    pub(crate) fn secret(&self) -> Option<SecretString> {
        match self {
            Self::None => None,
            Self::Bearer(secret) | Self::Header { value: secret, .. } => Some(secret.clone()),
        }
    }

    /// The header this credential sends, marked sensitive.
    pub(crate) fn header(&self) -> Result<Option<(HeaderName, http::HeaderValue)>, McpCallError> {
        let (name, value) = match self {
            Self::None => return Ok(None),
            Self::Bearer(token) => (
                http::header::AUTHORIZATION,
                format!("Bearer {}", token.expose_secret()),
            ),
            Self::Header { name, value } => {
                let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                    McpCallError::new(
                        CallErrorKind::Config,
                        format!("{name:?} is not a valid header name"),
                    )
                })?;
                (name, value.expose_secret().to_owned())
            }
        };
        let mut value = http::HeaderValue::from_str(&value).map_err(|_| {
            McpCallError::new(
                CallErrorKind::Config,
                "the credential contains characters a header cannot carry",
            )
        })?;
        value.set_sensitive(true);
        Ok(Some((name, value)))
    }
}

/// One MCP upstream: its endpoint URL, its credential and the protocol revision it speaks.
#[derive(Debug, Clone)]
pub struct McpTarget {
    /// The MCP endpoint (a connection file's `url`, or `base_url + path` for an inline tool).
    pub url: String,
    /// How requests are authenticated.
    pub credential: McpCredential,
    /// The lifecycle to use (default `legacy`).
    pub protocol: McpProtocol,
    /// A session-era server that issued no session may be called without a new handshake
    /// once one succeeded (docs/rules.md MCP-28): set for connection files, whose server is
    /// airlock's own long-lived connection; never for a tenant's inline tool (MCP-17).
    pub keep_handshake: bool,
    /// What the client of the endpoint request this call serves can take back (none by
    /// default: a call for nobody's request relays nothing).
    pub(crate) downstream: Downstream,
}

impl McpTarget {
    /// A target with no credential, speaking the legacy lifecycle.
    #[must_use]
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            credential: McpCredential::None,
            protocol: McpProtocol::Legacy,
            keep_handshake: false,
            downstream: Downstream::default(),
        }
    }

    /// Calls to this target serve the endpoint request whose client can take `downstream`.
    #[must_use]
    pub fn with_downstream(mut self, downstream: Downstream) -> Self {
        self.downstream = downstream;
        self
    }

    /// Sets the credential.
    #[must_use]
    pub fn with_credential(mut self, credential: McpCredential) -> Self {
        self.credential = credential;
        self
    }

    /// Lets a session-less server's handshake be kept between calls (MCP-28).
    #[must_use]
    pub fn keeping_handshake(mut self) -> Self {
        self.keep_handshake = true;
        self
    }

    /// Sets the protocol revision.
    #[must_use]
    pub fn with_protocol(mut self, protocol: McpProtocol) -> Self {
        self.protocol = protocol;
        self
    }
}

/// One `tools/call`: the remote tool's original name and the model's arguments, as given.
#[derive(Debug, Clone)]
pub struct ToolCall {
    /// The tool's name on the server (not the airlock-visible name).
    pub remote_name: String,
    /// The arguments, sent unchanged (an object; anything else is refused before any request).
    pub arguments: Value,
    /// Sent as `_meta["airlock/idempotency_key"]` so an idempotent upstream can deduplicate a
    /// retried call.
    pub idempotency_key: Option<String>,
}

impl ToolCall {
    /// A call of `remote_name` with `arguments` and no idempotency key.
    #[must_use]
    pub fn new(remote_name: impl Into<String>, arguments: Value) -> Self {
        Self {
            remote_name: remote_name.into(),
            arguments,
            idempotency_key: None,
        }
    }

    /// Adds the idempotency key.
    #[must_use]
    pub fn with_idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }

    /// The arguments as the object MCP requires; a model that sent something else gets told
    /// so, and no request is made.
    pub(crate) fn arguments_object(&self) -> Result<&serde_json::Map<String, Value>, McpCallError> {
        match &self.arguments {
            Value::Object(map) => Ok(map),
            other => Err(McpCallError::new(
                CallErrorKind::Config,
                format!(
                    "tool arguments must be a JSON object, not {}",
                    json_type(other)
                ),
            )),
        }
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The meta key carrying the idempotency key in a `tools/call` request.
pub const IDEMPOTENCY_META_KEY: &str = "airlock/idempotency_key";

/// A successful tool result.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// What a model reads: text blocks joined with newlines; image, audio and resource blocks
    /// appear as placeholders such as `[image: image/png, 1234 bytes]` (a model is never handed
    /// the bytes).
    pub text: String,
    /// `structuredContent`, kept as sent.
    pub structured: Option<Value>,
    /// Every content block as the server returned it (text, image, audio, `resource_link`,
    /// embedded `resource`), in order: what an MCP client of airlock is served back unchanged.
    pub content: Vec<Value>,
    /// The upstream needs the client's input first (a relayed round, MCP-68):
    /// `{"inputRequests", "requestState"}` as it sent them; the other fields are then empty.
    pub input_required: Option<Value>,
}

/// One tool as a server lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteTool {
    /// The name on the server.
    pub name: String,
    /// Its description (empty when the server gives none).
    pub description: String,
    /// Its `inputSchema` (`{"type":"object"}` when the server gives none).
    pub input_schema: Value,
    /// `annotations.readOnlyHint` as the server gives it (`None` when absent). A hint, not a
    /// guarantee: only `Some(true)` lets `airlock discover` declare the tool a read.
    pub read_only_hint: Option<bool>,
    /// Its `outputSchema`, when the server declares one: the shape of its `structuredContent`.
    pub output_schema: Option<Value>,
    /// What is pinned of it (docs/rules.md LEDGER-49): `name`, `description`, `inputSchema`,
    /// `outputSchema` and `annotations` as the server sent them (absent ones left out).
    pub definition: Value,
}
