//! Admission: what every request passes before any step reads its body.
//!
//! Guarantees, in this order: only POST, and GET or DELETE carrying an `Mcp-Session-Id` (a
//! session's stream, `session_watch`; 405 otherwise, with `Allow: POST`); the `Host` and any
//! `Origin` name an allowed host (403); a bearer token matches a configured one, compared in
//! constant time over digests so neither length nor content leaks through timing, or, with
//! `[mcp.oauth]`, is an access token the [`ResourceServer`] accepts (`oauth_admit`; 401 with
//! `WWW-Authenticate: Bearer` otherwise); the token may call this scope (403 otherwise); the body is at
//! most [`MAX_BODY_BYTES`] (413); a JSON body is a JSON-RPC message (400 with a JSON-RPC
//! error otherwise, see [`AdmittedRequest::parse`]). What passes is an [`AdmittedRequest`]:
//! scope, caller and the parsed body, the only form in which the later steps get a request.
//!
//! A 401 or 403 also carries a JSON-RPC error body ([`UNAUTHORIZED`], [`FORBIDDEN`]) naming the
//! header, the token setting or the scope that is missing, because many clients show their
//! user the body and nothing else (MCP-24). It never repeats the presented token.

use axum::body::{Body, to_bytes};
use axum::extract::Request;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use secrecy::ExposeSecret;
use serde_json::Value;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::EndpointConfig;
use super::budget::{BODY_BUDGET_BYTES, BodyBudget, BodyShare, MAX_BODY_BYTES, MAX_WAIT};
use super::oauth_admit;
use super::request::{Admitted, AdmittedRequest, BUSY, FORBIDDEN, UNAUTHORIZED, rpc_refusal};
use airlock_spec::ScopeId;

use crate::host::Caller;
use crate::oauth::ResourceServer;

/// The hosts allowed when the configuration names none: loopback only.
const LOOPBACK: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// What a request without a usable token is told to do.
pub(super) const SEND_BEARER: &str =
    "send the header `Authorization: Bearer <token>` (a token from [[mcp.tokens]] in airlock.toml)";

/// The admission rules, built once from the [`EndpointConfig`].
pub(super) struct Gate {
    /// SHA-256 of each token, with its principal and scopes. Comparing digests keeps every
    /// comparison the same length, whatever the presented token's length.
    tokens: Vec<Token>,
    /// Lower-case host names, or `host:port` authorities.
    allowed_hosts: Vec<String>,
    /// Accepts OAuth access tokens beside the configured ones, when set.
    oauth: Option<ResourceServer>,
    /// What authorized requests' bodies may take at once (`budget`).
    bodies: BodyBudget,
}

struct Token {
    digest: [u8; 32],
    principal: String,
    groups: Vec<String>,
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
                groups: t.groups,
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
            oauth: config.oauth,
            bodies: BodyBudget::new(BODY_BUDGET_BYTES, MAX_WAIT),
        }
    }

    /// The presented bearer token, checking every configured token so the time taken does
    /// not say which one matched.
    fn token(&self, presented: &str) -> Option<&Token> {
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

/// Admits `request` to `scope`, or answers it with the refusal. The request's share of the
/// body budget is taken once it is authorized, before its body is read; the caller holds it
/// until the answer is built.
pub(super) async fn admit(
    gate: &Gate,
    scope: ScopeId,
    request: Request,
) -> Result<(AdmittedRequest, BodyShare), Box<Response>> {
    let (parts, body) = request.into_parts();
    let caller = authorize(gate, &scope, &parts).await?;
    let Some(share) = gate.bodies.share_within(&parts.headers).await else {
        return Err(busy(body).await);
    };
    let Ok(bytes) = to_bytes(body, MAX_BODY_BYTES).await else {
        return Err(refuse((StatusCode::PAYLOAD_TOO_LARGE, "Payload Too Large")));
    };
    let admitted = AdmittedRequest::parse(parts, Admitted { scope, caller }, bytes)?;
    Ok((admitted, share))
}

/// The answer to a request that found the body budget spent for too long (OPS-54): its body is
/// read to the end, a frame at a time and kept nowhere, because a connection closed with unread
/// bytes is reset and the client would see no answer at all; then `503` with `Retry-After`.
async fn busy(body: Body) -> Box<Response> {
    let mut frames = body.into_data_stream();
    let mut read = 0_usize;
    while let Some(Ok(frame)) = frames.next().await {
        read = read.saturating_add(frame.len());
        if read > MAX_BODY_BYTES {
            break;
        }
    }
    let mut response = rpc_refusal(
        StatusCode::SERVICE_UNAVAILABLE,
        &Value::Null,
        BUSY,
        "Busy: the server is processing as many large requests as it allows; retry after 1 s",
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// Who is calling, if the request may call `scope` at all; nothing of the body is read.
async fn authorize(gate: &Gate, scope: &ScopeId, request: &Parts) -> Result<Caller, Box<Response>> {
    let headers = check_request(gate, request)?;
    let Some(presented) = bearer(headers) else {
        return Err(unauthorized(gate, scope, headers));
    };
    let Some(token) = gate.token(presented) else {
        return match &gate.oauth {
            // Not one of the configured tokens: an OAuth access token, or nothing (AUTH-1).
            Some(oauth) => oauth_admit::admit(oauth, presented, scope).await,
            None => Err(unauthorized(gate, scope, headers)),
        };
    };
    if !token.may_call(scope) {
        tracing::warn!(principal = %token.principal, %scope, "MCP request refused: scope not granted to the token");
        return Err(forbidden(&forbidden_scope(scope)));
    }
    Ok(Caller {
        principal: token.principal.clone(),
        groups: token.groups.clone(),
        ..Default::default()
    })
}

/// The method and the `Host`/`Origin` checks; the request's headers when they pass.
fn check_request<'r>(gate: &Gate, request: &'r Parts) -> Result<&'r HeaderMap, Box<Response>> {
    // A session's GET stream and its end (MCP-98) are the only requests but a POST served.
    let of_session = matches!(request.method, Method::GET | Method::DELETE)
        && request.headers.contains_key(super::sessions::HEADER);
    if request.method != Method::POST && !of_session {
        let mut response = (StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed").into_response();
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
        return Err(Box::new(response));
    }
    if let Err(reason) = check_host_and_origin(gate, request) {
        tracing::warn!(reason, "MCP request refused (possible DNS rebinding)");
        return Err(forbidden(&format!(
            "Forbidden: {reason} (see [mcp] allowed_hosts in airlock.toml)"
        )));
    }
    Ok(&request.headers)
}

fn refuse(response: impl IntoResponse) -> Box<Response> {
    Box::new(response.into_response())
}

/// Names the endpoint and the `scopes` entry that would grant it.
fn forbidden_scope(scope: &ScopeId) -> String {
    let path = crate::oauth::endpoint_path(scope);
    format!(
        "Forbidden: this token may not call POST {path} (its scopes lack \"{scope}\"; \
         add \"{scope}\" to the token's scopes in [[mcp.tokens]] in airlock.toml)"
    )
}

fn forbidden(message: &str) -> Box<Response> {
    rpc_refusal(StatusCode::FORBIDDEN, &Value::Null, FORBIDDEN, message)
}

/// The 401: a challenge with `invalid_token` only when a bearer token was presented (RFC 6750
/// gives an unsupported scheme no error code), and a body saying which header is expected and
/// where its tokens come from. With OAuth, the challenge is `oauth_admit`'s (AUTH-2).
fn unauthorized(gate: &Gate, scope: &ScopeId, headers: &HeaderMap) -> Box<Response> {
    if let Some(oauth) = &gate.oauth {
        let error = headers
            .get(header::AUTHORIZATION)
            .is_some()
            .then_some("the Authorization header must be `Bearer <token>` with an access token");
        return oauth_admit::unauthorized(oauth, scope, error);
    }
    let (challenge, message) = match headers.get(header::AUTHORIZATION) {
        None => (
            r#"Bearer realm="airlock""#,
            format!("Unauthorized: {SEND_BEARER}"),
        ),
        Some(_) if bearer(headers).is_none() => (
            r#"Bearer realm="airlock""#,
            "Unauthorized: the Authorization header must be `Bearer <token>` \
             (a token from [[mcp.tokens]] in airlock.toml)"
                .to_owned(),
        ),
        Some(_) => (
            r#"Bearer realm="airlock", error="invalid_token""#,
            "Unauthorized: the bearer token is not one of [[mcp.tokens]] in airlock.toml; \
             send `Authorization: Bearer <token>` with a configured token"
                .to_owned(),
        ),
    };
    let mut response = rpc_refusal(
        StatusCode::UNAUTHORIZED,
        &Value::Null,
        UNAUTHORIZED,
        &message,
    );
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(challenge),
    );
    response
}

fn check_host_and_origin(gate: &Gate, request: &Parts) -> Result<(), &'static str> {
    // HTTP/2 carries the host in `:authority`, which hyper leaves in the URI.
    let host = match request.headers.get(header::HOST) {
        Some(value) => value.to_str().ok().map(str::to_owned),
        None => request.uri.authority().map(|a| a.as_str().to_owned()),
    };
    let host = host.ok_or("missing Host header")?;
    let authority: http::uri::Authority = host.parse().map_err(|_| "malformed Host header")?;
    if !gate.allows(authority.host(), authority.port_u16()) {
        return Err("Host header is not allowed");
    }
    let Some(origin) = request.headers.get(header::ORIGIN) else {
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
                groups: Vec::new(),
                scopes: None,
            }],
            allowed_hosts: hosts.iter().map(|h| (*h).to_owned()).collect(),
            tracer: None,
            request_states: None,
            oauth: None,
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
            bearer(&headers)
                .and_then(|t| g.token(t))
                .map(|t| t.principal.as_str()),
            Some("alice")
        );
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer s3cre"),
        );
        assert_eq!(
            bearer(&headers)
                .and_then(|t| g.token(t))
                .map(|t| t.principal.as_str()),
            None
        );
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Basic s3cret"),
        );
        assert_eq!(
            bearer(&headers)
                .and_then(|t| g.token(t))
                .map(|t| t.principal.as_str()),
            None
        );
    }
}
