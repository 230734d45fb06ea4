//! OAuth discovery, answered with what to do instead: the endpoint takes a bearer token from
//! the configuration, never OAuth.
//!
//! Guarantees: a client that meets the 401 without a header and turns to OAuth — protected
//! resource metadata (RFC 9728), authorization server or OpenID metadata (RFC 8414), dynamic
//! client registration (RFC 7591) — gets a 404 on each of those paths, so it learns there is
//! no OAuth, with a JSON body naming the header to send instead (MCP-26). Clients such as
//! Claude Code show the registration refusal's body to their user, and nothing more. These
//! paths serve nothing else, and no request to them reads a body or touches a tool.

use axum::Router;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use serde_json::json;

use super::admit::SEND_BEARER;

/// The discovery documents a client may ask for, each also with the endpoint's path appended
/// (RFC 9728 and RFC 8414 put the resource's path after the well-known name).
const WELL_KNOWN: [&str; 3] = [
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-authorization-server",
    "/.well-known/openid-configuration",
];

/// The routes: each discovery document and `/register`, for every method.
pub(super) fn router() -> Router {
    WELL_KNOWN.iter().fold(
        Router::new().route("/register", any(no_oauth)),
        |router, path| {
            router
                .route(path, any(no_oauth))
                .route(&format!("{path}/{{*resource}}"), any(no_oauth))
        },
    )
}

async fn no_oauth() -> Response {
    let description = format!("airlock's MCP endpoint does not use OAuth: {SEND_BEARER}");
    let body = json!({"error": "oauth_not_supported", "error_description": description});
    (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
}
