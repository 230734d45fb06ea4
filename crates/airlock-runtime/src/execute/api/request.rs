//! Building the HTTP request of one api tool call.
//!
//! Guarantees:
//! - the credential is resolved first, by the connection's credential path; when it is missing
//!   no request is built, and the error names the connection and the path, never a value;
//! - the URL is the connection's base URL with the declared path joined structurally
//!   ([`super::path`]) and the query set through the URL type's query pair setter, so every
//!   value is encoded exactly once;
//! - the request is always marked as carrying a credential (every api tool has `auth`), so the
//!   egress guard refuses to send it over plain `http`;
//! - `Debug` of an [`ApiRequest`] shows no credential: secret headers print as `[redacted]`, and
//!   a query-auth parameter's value is redacted in the URL.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Map, Value};
use url::Url;

use airlock_spec::{ApiAuth, ApiConnection, ApiOperation, Credentials, Method};

use super::path::{join, parse_base, render_path};
use super::template::{argument, interpolate, lone_placeholder, substitute, to_text};
use crate::{ToolError, ToolErrorKind};

const REDACTED: &str = "[redacted]";

/// The header carrying the call's idempotency key, lowercase as every header here.
const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// `text` as an RFC 8941 `sf-string`: quoted, `"` and `\` escaped; `None` when it holds a
/// character outside printable ASCII, which an `sf-string` cannot hold.
fn sf_string(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        if !matches!(c, ' '..='~') {
            return None;
        }
        if matches!(c, '"' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    Some(out)
}

/// A header value: plain text, or a secret that `Debug` never shows.
#[derive(Clone)]
pub enum ApiHeaderValue {
    /// Not sensitive (`Content-Type`).
    Plain(String),
    /// Carries a credential (`Authorization`, a tenant's API key header).
    Secret(SecretString),
}

impl ApiHeaderValue {
    /// The value to put on the wire. Never log it.
    #[must_use]
    pub fn expose(&self) -> &str {
        match self {
            Self::Plain(v) => v,
            Self::Secret(v) => v.expose_secret(),
        }
    }

    /// Whether the value carries a credential (mark it sensitive when sending).
    #[must_use]
    pub fn is_secret(&self) -> bool {
        matches!(self, Self::Secret(_))
    }
}

impl std::fmt::Debug for ApiHeaderValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Plain(v) => v.fmt(f),
            Self::Secret(_) => f.write_str(REDACTED),
        }
    }
}

/// One request of an api tool, ready for the egress guard.
#[derive(Clone)]
pub struct ApiRequest {
    method: Method,
    url: Url,
    headers: Vec<(String, ApiHeaderValue)>,
    body: Option<Vec<u8>>,
    /// The query parameter holding the credential (query auth), redacted in `Debug`.
    secret_param: Option<String>,
    /// Whether a credential goes with the request (every auth scheme but `none`).
    credential: bool,
}

impl ApiRequest {
    /// GET or POST.
    #[must_use]
    pub fn method(&self) -> Method {
        self.method
    }

    /// The URL to send to. With query auth it contains the credential: never log it; use
    /// [`ApiRequest::redacted_url`].
    #[must_use]
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The URL with the credential's query value replaced by `[redacted]`, for logs and errors.
    #[must_use]
    pub fn redacted_url(&self) -> String {
        let Some(secret) = &self.secret_param else {
            return self.url.to_string();
        };
        let pairs: Vec<(String, String)> = self
            .url
            .query_pairs()
            .map(|(k, v)| {
                let v = if k == secret.as_str() {
                    REDACTED.into()
                } else {
                    v
                };
                (k.into_owned(), v.into_owned())
            })
            .collect();
        let mut url = self.url.clone();
        url.query_pairs_mut().clear().extend_pairs(pairs);
        url.to_string()
    }

    /// Headers in order: lowercase names, values marked secret where they carry a credential.
    #[must_use]
    pub fn headers(&self) -> &[(String, ApiHeaderValue)] {
        &self.headers
    }

    /// The JSON body (POST), if any.
    #[must_use]
    pub fn body(&self) -> Option<&[u8]> {
        self.body.as_deref()
    }

    /// Adds `Idempotency-Key: "<key>"`, the key as a structured-field string (RFC 8941
    /// `sf-string`, as the IETF httpapi draft defines the field), so the upstream can tell a
    /// retry of this invocation from a new call (LEDGER-17).
    ///
    /// # Errors
    /// `bad_declaration` when the key has a character an `sf-string` cannot hold, or the
    /// request already has the header (an auth header of that name; DECL-32 refuses it at load).
    pub fn with_idempotency_key(mut self, key: &str) -> Result<Self, ToolError> {
        if self.headers.iter().any(|(name, _)| name == IDEMPOTENCY_KEY) {
            return Err(ToolError::bad_declaration(
                "the `Idempotency-Key` header is airlock's: it cannot carry a credential",
            ));
        }
        let value = sf_string(key).ok_or_else(|| {
            ToolError::bad_declaration("the idempotency key has characters a header cannot carry")
        })?;
        self.headers
            .push((IDEMPOTENCY_KEY.to_owned(), ApiHeaderValue::Plain(value)));
        Ok(self)
    }

    /// Whether the request carries a credential (always, for api tools; not with a catalog
    /// integration's `scheme: none`): the egress guard must then refuse plain `http`.
    #[must_use]
    pub fn carries_credential(&self) -> bool {
        self.credential
    }

    /// Adds header `name` (lowercased) with a plain value: a catalog action's declared header.
    ///
    /// # Errors
    /// `bad_declaration` when the request already has a header of that name (its `auth`).
    pub(crate) fn with_header(mut self, name: &str, value: String) -> Result<Self, ToolError> {
        let name = name.to_ascii_lowercase();
        if self.headers.iter().any(|(n, _)| *n == name) {
            return Err(ToolError::bad_declaration(format!(
                "header `{name}` is set twice (by `auth` and by `headers`)"
            )));
        }
        self.headers.push((name, ApiHeaderValue::Plain(value)));
        Ok(self)
    }

    /// Sets query parameter `name` to `value` (replacing it), encoded once: a page cursor.
    pub(crate) fn with_query_pair(mut self, name: &str, value: &str) -> Self {
        let pairs: Vec<(String, String)> = self
            .url
            .query_pairs()
            .into_owned()
            .filter(|(k, _)| k != name)
            .collect();
        self.url
            .query_pairs_mut()
            .clear()
            .extend_pairs(pairs)
            .append_pair(name, value);
        self
    }
}

impl std::fmt::Debug for ApiRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiRequest")
            .field("method", &self.method)
            .field("url", &self.redacted_url())
            .field("headers", &self.headers)
            .field("body_bytes", &self.body.as_ref().map(Vec::len))
            .field("carries_credential", &self.carries_credential())
            .finish()
    }
}

/// The resolved credential of a call.
enum Secret<'a> {
    /// `scheme: none` (catalog integrations only).
    Nothing,
    Single(&'a SecretString),
    Basic(&'a SecretString, &'a SecretString),
}

/// Builds the request of one call of `op` on `connection`, with `arguments` already checked and
/// completed by [`crate::arguments::ArgumentCheck`].
///
/// # Errors
/// `credential_missing` when the connection has no credential or it is absent or misshapen (no
/// request is built); `bad_arguments` for a refused or missing path value; `bad_declaration`
/// when the operation or the base URL cannot be executed safely.
pub fn build_request(
    op: &ApiOperation,
    connection: &ApiConnection,
    credentials: &Credentials,
    arguments: &Map<String, Value>,
) -> Result<ApiRequest, ToolError> {
    let secret = resolve_credential(op, connection, credentials)?;
    let base = parse_base(&connection.base_url, &op.connection)?;
    let path = render_path(&op.path, arguments, &op.allow_slashes)?;
    let mut url = join(&base, &path)?;
    let secret_param = match (&op.auth, &secret) {
        (ApiAuth::Query(param), Secret::Single(value)) => Some((param.as_str(), *value)),
        _ => None,
    };
    set_query(&mut url, &op.query, arguments, secret_param);
    let mut headers = auth_headers(&op.auth, &secret)?;
    let body = request_body(op, arguments)?;
    if body.is_some() {
        headers.push((
            "content-type".into(),
            ApiHeaderValue::Plain("application/json".into()),
        ));
    }
    Ok(ApiRequest {
        method: op.method,
        url,
        headers,
        body,
        secret_param: secret_param.map(|(p, _)| p.to_owned()),
        credential: !matches!(secret, Secret::Nothing),
    })
}

fn resolve_credential<'c>(
    op: &ApiOperation,
    connection: &ApiConnection,
    credentials: &'c Credentials,
) -> Result<Secret<'c>, ToolError> {
    let missing = |why: String| {
        ToolError::new(
            ToolErrorKind::CredentialMissing,
            format!("connection `{}`: {why}", op.connection),
        )
    };
    if op.auth == ApiAuth::None {
        return Ok(Secret::Nothing);
    }
    let Some(path) = &connection.credential else {
        return Err(missing(
            "no `credential` is configured, and the API's auth needs one".into(),
        ));
    };
    // CredentialError's messages name the path, never the value.
    match op.auth {
        ApiAuth::Basic => credentials
            .basic(path)
            .map(|(user, password)| Secret::Basic(user, password)),
        ApiAuth::Bearer | ApiAuth::Header(_) | ApiAuth::Query(_) => {
            credentials.get(path).map(Secret::Single)
        }
        ApiAuth::None => Ok(Secret::Nothing),
    }
    .map_err(|e| missing(e.to_string()))
}

/// Sets the query: the base URL's own pairs, then the declared ones, then the credential for
/// query auth, which replaces any pair of the same name.
fn set_query(
    url: &mut Url,
    declared: &[(String, String)],
    args: &Map<String, Value>,
    secret: Option<(&str, &SecretString)>,
) {
    let mut pairs: Vec<(String, String)> = url.query_pairs().into_owned().collect();
    for (key, template) in declared {
        let value = match lone_placeholder(template) {
            Some(name) => argument(args, name).map(to_text),
            // Embedded placeholders substitute text; an absent one drops the key, like a lone one.
            None => substitute(template, args),
        };
        if let Some(value) = value {
            pairs.push((key.clone(), value));
        }
    }
    if let Some((param, _)) = secret {
        pairs.retain(|(k, _)| k != param);
    }
    url.set_query(None);
    if pairs.is_empty() && secret.is_none() {
        return;
    }
    // The pair setter encodes each value exactly once: a value `%20` goes out as `%2520`, and
    // nothing is pre-encoded here, so nothing is encoded twice.
    let mut query = url.query_pairs_mut();
    query.extend_pairs(&pairs);
    if let Some((param, value)) = secret {
        query.append_pair(param, value.expose_secret());
    }
}

fn auth_headers(
    auth: &ApiAuth,
    secret: &Secret<'_>,
) -> Result<Vec<(String, ApiHeaderValue)>, ToolError> {
    let bad = |why: &str| {
        ToolError::new(
            ToolErrorKind::CredentialMissing,
            format!("the credential {why}"),
        )
    };
    let (name, value) = match (auth, secret) {
        (ApiAuth::Bearer, Secret::Single(token)) => (
            "authorization".to_owned(),
            SecretString::from(format!("Bearer {}", token.expose_secret())),
        ),
        (ApiAuth::Header(name), Secret::Single(token)) => {
            if name.is_empty() || !name.bytes().all(is_token_byte) {
                return Err(ToolError::bad_declaration(format!(
                    "`{name}` is not a valid header name"
                )));
            }
            (name.to_ascii_lowercase(), (*token).clone())
        }
        (ApiAuth::Basic, Secret::Basic(user, password)) => {
            if user.expose_secret().contains(':') {
                return Err(bad("username contains `:`, which basic auth cannot carry"));
            }
            // Zeroized on drop, like the parts it is made of.
            let pair = SecretString::from(format!(
                "{}:{}",
                user.expose_secret(),
                password.expose_secret()
            ));
            (
                "authorization".to_owned(),
                SecretString::from(format!("Basic {}", STANDARD.encode(pair.expose_secret()))),
            )
        }
        (ApiAuth::Query(_) | ApiAuth::None, _) => return Ok(Vec::new()),
        (ApiAuth::Bearer | ApiAuth::Header(_) | ApiAuth::Basic, _) => {
            return Err(bad("has the wrong shape for the API's auth scheme"));
        }
    };
    // A CR or LF would let a stored credential inject headers; refuse rather than send.
    if value
        .expose_secret()
        .bytes()
        .any(|b| (b < 0x20 && b != b'\t') || b == 0x7f)
    {
        return Err(bad(
            "contains control characters, which an HTTP header cannot carry",
        ));
    }
    Ok(vec![(name, ApiHeaderValue::Secret(value))])
}

/// RFC 9110 `tchar`.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn request_body(
    op: &ApiOperation,
    args: &Map<String, Value>,
) -> Result<Option<Vec<u8>>, ToolError> {
    let Some(template) = &op.body else {
        return Ok(None);
    };
    if !op.method.has_body() {
        return Err(ToolError::bad_declaration(format!(
            "a {} operation has a body; the spec refuses this",
            op.method.as_str()
        )));
    }
    // A body that is one absent placeholder means no body at all.
    let Some(body) = interpolate(template, args) else {
        return Ok(None);
    };
    serde_json::to_vec(&body)
        .map(Some)
        .map_err(|e| ToolError::bad_arguments(format!("the body cannot be serialized: {e}")))
}
