//! Admission: what every request passes before the MCP layer sees it.
//!
//! Guarantees, in this order: only POST (405 otherwise, with `Allow: POST`); the `Host` and any
//! `Origin` name an allowed host (403); a bearer token matches a configured one, compared in
//! constant time over digests so neither length nor content leaks through timing (401 with
//! `WWW-Authenticate: Bearer`); the token may call this scope (403 otherwise); a JSON body is JSON and a JSON-RPC message (400 with a JSON-RPC
//! error otherwise). An admitted request carries [`Admitted`] (scope and caller) in its
//! extensions, where the handler finds it; nothing else reaches the handler.

use std::sync::Arc;

use axum::body::{Body, to_bytes};
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::ClientJsonRpcMessage;
use secrecy::ExposeSecret;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::EndpointConfig;
use airlock_spec::ScopeId;

use crate::host::Caller;

/// The largest request body read; bigger is a 413. Tool arguments are small, and this caps the
/// memory one request can pin before it is authenticated.
pub(super) const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// The hosts allowed when the configuration names none: loopback only.
const LOOPBACK: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// The scope and caller of an admitted request, for the handler.
#[derive(Debug, Clone)]
pub(super) struct Admitted {
    pub(super) scope: ScopeId,
    pub(super) caller: Caller,
}

/// The admission rules, built once from the [`EndpointConfig`].
pub(super) struct Gate {
    /// SHA-256 of each token, with its principal and scopes. Comparing digests keeps every
    /// comparison the same length, whatever the presented token's length.
    tokens: Vec<Token>,
    /// Lower-case host names, or `host:port` authorities.
    allowed_hosts: Vec<String>,
}

struct Token {
    digest: [u8; 32],
    principal: String,
    /// `None`: every scope.
    scopes: Option<Vec<ScopeId>>,
}

impl Token {
    fn may_call(&self, scope: &ScopeId) -> bool {
        self.scopes.as_ref().is_none_or(|s| s.contains(scope))
    }
}

impl Gate {
    pub(super) fn new(config: EndpointConfig) -> Self {
        let tokens = config
            .tokens
            .into_iter()
            .map(|t| Token {
                digest: digest(t.token.expose_secret()),
                principal: t.principal,
                scopes: t.scopes,
            })
            .collect();
        let allowed_hosts = if config.allowed_hosts.is_empty() {
            LOOPBACK.iter().map(|h| (*h).to_owned()).collect()
        } else {
            config
                .allowed_hosts
                .iter()
                .map(|h| normalize(h.trim()))
                .collect()
        };
        Self {
            tokens,
            allowed_hosts,
        }
    }

    /// The presented bearer token, checking every configured token so the time taken does
    /// not say which one matched.
    fn token(&self, headers: &HeaderMap) -> Option<&Token> {
        let presented = bearer(headers)?;
        let presented = digest(presented);
        let mut found = None;
        for token in &self.tokens {
            if bool::from(token.digest.ct_eq(&presented)) {
                found = Some(token);
            }
        }
        found
    }

    /// Whether `authority` (`host` or `host:port`) is allowed.
    fn allows(&self, host: &str, port: Option<u16>) -> bool {
        let host = normalize(host);
        self.allowed_hosts.iter().any(|allowed| {
            allowed == &host || port.is_some_and(|p| allowed == &format!("{host}:{p}"))
        })
    }
}

/// The admission middleware of `POST /mcp`.
pub(super) async fn gateway(
    State(gate): State<Arc<Gate>>,
    request: Request,
    next: Next,
) -> Response {
    admit(&gate, ScopeId::Gateway, request, next).await
}

/// The admission middleware of `POST /agents/{name}/mcp`.
pub(super) async fn agent(
    State(gate): State<Arc<Gate>>,
    Path(name): Path<String>,
    request: Request,
    next: Next,
) -> Response {
    admit(&gate, ScopeId::Agent(name), request, next).await
}

async fn admit(gate: &Gate, scope: ScopeId, request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        let mut response = (StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed").into_response();
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
        return response;
    }
    if let Err(reason) = check_host_and_origin(gate, &request) {
        tracing::warn!(reason, "MCP request refused (possible DNS rebinding)");
        return (StatusCode::FORBIDDEN, format!("Forbidden: {reason}")).into_response();
    }
    let Some(token) = gate.token(request.headers()) else {
        return unauthorized(request.headers());
    };
    if !token.may_call(&scope) {
        tracing::warn!(principal = %token.principal, %scope, "MCP request refused: scope not granted to the token");
        return (StatusCode::FORBIDDEN, forbidden_scope(&scope)).into_response();
    }
    let caller = Caller {
        principal: token.principal.clone(),
    };
    let (mut parts, body) = request.into_parts();
    let Ok(bytes) = to_bytes(body, MAX_BODY_BYTES).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "Payload Too Large").into_response();
    };
    if is_json(&parts.headers)
        && let Err(response) = check_json_rpc(&bytes)
    {
        return *response;
    }
    parts.extensions.insert(Admitted { scope, caller });
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// Names the endpoint and the `scopes` entry that would grant it.
fn forbidden_scope(scope: &ScopeId) -> String {
    let path = match scope {
        ScopeId::Gateway => "/mcp".to_owned(),
        ScopeId::Agent(name) => format!("/agents/{name}/mcp"),
    };
    format!("Forbidden: this token may not call POST {path} (its scopes lack \"{scope}\")")
}

/// The 401, with a challenge saying whether a token was presented at all (RFC 6750).
fn unauthorized(headers: &HeaderMap) -> Response {
    let challenge = if headers.contains_key(header::AUTHORIZATION) {
        r#"Bearer realm="airlock", error="invalid_token""#
    } else {
        r#"Bearer realm="airlock""#
    };
    let mut response = (StatusCode::UNAUTHORIZED, "Unauthorized").into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(challenge),
    );
    response
}

fn check_host_and_origin(gate: &Gate, request: &Request) -> Result<(), &'static str> {
    // HTTP/2 carries the host in `:authority`, which hyper leaves in the URI.
    let host = match request.headers().get(header::HOST) {
        Some(value) => value.to_str().ok().map(str::to_owned),
        None => request.uri().authority().map(|a| a.as_str().to_owned()),
    };
    let host = host.ok_or("missing Host header")?;
    let authority: http::uri::Authority = host.parse().map_err(|_| "malformed Host header")?;
    if !gate.allows(authority.host(), authority.port_u16()) {
        return Err("Host header is not allowed");
    }
    let Some(origin) = request.headers().get(header::ORIGIN) else {
        // Not a browser (or a same-origin GET, which we do not serve): nothing to check.
        return Ok(());
    };
    let origin = origin.to_str().map_err(|_| "malformed Origin header")?;
    let url = url::Url::parse(origin).map_err(|_| "Origin header is not allowed")?;
    let allowed = matches!(url.scheme(), "http" | "https")
        && url
            .host_str()
            .is_some_and(|host| gate.allows(host, url.port_or_known_default()));
    if allowed {
        Ok(())
    } else {
        Err("Origin header is not allowed")
    }
}

fn check_json_rpc(bytes: &[u8]) -> Result<(), Box<Response>> {
    let value: Value = serde_json::from_slice(bytes).map_err(|_| {
        Box::new(rpc_error(
            &Value::Null,
            -32700,
            "Parse error: the body is not JSON",
        ))
    })?;
    if serde_json::from_value::<ClientJsonRpcMessage>(value.clone()).is_ok() {
        return Ok(());
    }
    let id = value.get("id").cloned().unwrap_or(Value::Null);
    let well_formed = value.get("jsonrpc") == Some(&json!("2.0"))
        && value.get("method").is_some_and(Value::is_string);
    // A request we can route whose params do not fit the method is invalid params; anything
    // else is not a JSON-RPC 2.0 message at all.
    let (code, message) = if well_formed {
        (-32602, "Invalid params for this method")
    } else {
        (-32600, "Invalid Request: not a JSON-RPC 2.0 message")
    };
    Err(Box::new(rpc_error(&id, code, message)))
}

fn rpc_error(id: &Value, code: i64, message: &str) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
    (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Lower case, without the brackets of an IPv6 literal, so `[::1]` and `::1` match.
fn normalize(host: &str) -> String {
    host.trim_start_matches('[')
        .replace(']', "")
        .to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::SecretString;

    fn gate(hosts: &[&str]) -> Gate {
        Gate::new(EndpointConfig {
            tokens: vec![crate::EndpointToken {
                token: SecretString::from("s3cret"),
                principal: "alice".to_owned(),
                scopes: None,
            }],
            allowed_hosts: hosts.iter().map(|h| (*h).to_owned()).collect(),
        })
    }

    #[test]
    fn hosts_match_by_name_or_exact_authority() {
        let g = gate(&["Example.com", "api.example.com:8443"]);
        assert!(g.allows("example.com", Some(1234)));
        assert!(g.allows("api.example.com", Some(8443)));
        assert!(!g.allows("api.example.com", Some(443)));
        assert!(!g.allows("evil.com", None));
        let loopback = gate(&[]);
        assert!(loopback.allows("[::1]", Some(80)));
        assert!(loopback.allows("localhost", None));
        assert!(!loopback.allows("example.com", None));
    }

    #[test]
    fn bearer_tokens_map_to_principals() {
        let g = gate(&[]);
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("bearer s3cret"),
        );
        assert_eq!(
            g.token(&headers).map(|t| t.principal.as_str()),
            Some("alice")
        );
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer s3cre"),
        );
        assert_eq!(g.token(&headers).map(|t| t.principal.as_str()), None);
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Basic s3cret"),
        );
        assert_eq!(g.token(&headers).map(|t| t.principal.as_str()), None);
    }
}
