//! OAuth discovery paths airlock does not serve, answered with what to do instead.
//!
//! Guarantees: without `[mcp.oauth]`, a client that meets the 401 without a header and turns to
//! OAuth — protected resource metadata (RFC 9728), authorization server or OpenID metadata
//! (RFC 8414), dynamic client registration (RFC 7591) — gets a 404 on each of those paths, so
//! it learns there is no OAuth, with a JSON body naming the header to send instead (MCP-26).
//! Clients such as Claude Code show the registration refusal's body to their user, and nothing
//! more. With `[mcp.oauth]`, the protected resource metadata is served (`resource_metadata`)
//! and the other paths still answer 404, naming the authorization server to use (AUTH-15):
//! airlock is a resource server, never an authorization server. These paths serve nothing
//! else, and no request to them reads a body or touches a tool.

use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use serde_json::{Value, json};

use super::admit::SEND_BEARER;

/// The discovery documents a client may ask for, each also with the endpoint's path appended
/// (RFC 9728 and RFC 8414 put the resource's path after the well-known name). The first is
/// served by `resource_metadata` when OAuth is configured.
const WELL_KNOWN: [&str; 3] = [
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-authorization-server",
    "/.well-known/openid-configuration",
];

/// The routes: each discovery document not served and `/register`, for every method.
/// `issuer`: the authorization server of `[mcp.oauth]`, if configured.
pub(super) fn router(issuer: Option<&str>) -> Router {
    let (paths, body) = match issuer {
        None => (
            &WELL_KNOWN[..],
            json!({"error": "oauth_not_supported",
                "error_description": format!("airlock's MCP endpoint does not use OAuth: {SEND_BEARER}")}),
        ),
        Some(issuer) => (
            &WELL_KNOWN[1..],
            json!({"error": "not_an_authorization_server",
                "error_description": format!("airlock is an OAuth resource server, not an \
                    authorization server: sign in with {issuer} (see \
                    /.well-known/oauth-protected-resource)")}),
        ),
    };
    let body = Arc::new(body);
    let answer = move || {
        let body = body.clone();
        async move { not_here(&body) }
    };
    paths.iter().fold(
        Router::new().route("/register", any(answer.clone())),
        |router, path| {
            router
                .route(path, any(answer.clone()))
                .route(&format!("{path}/{{*resource}}"), any(answer.clone()))
        },
    )
}

fn not_here(body: &Value) -> Response {
    (StatusCode::NOT_FOUND, axum::Json(body.clone())).into_response()
}
