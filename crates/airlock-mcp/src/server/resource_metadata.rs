//! RFC 9728 protected resource metadata, served when `[mcp.oauth]` is configured
//! (docs/rules.md AUTH-2).
//!
//! Guarantees: `GET /.well-known/oauth-protected-resource` describes the whole server (its
//! base resource URL), `…/mcp` the gateway endpoint and `…/agents/{name}/mcp` a deployed
//! agent's endpoint (404 for an agent that is not deployed, or any other path): the resource
//! URL, the configured issuer as the one authorization server, the token scopes that grant the
//! endpoint, and header-only bearer tokens. The resource URL comes from the configuration,
//! never from the request's `Host`. The documents are public, so any origin may read them.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::host::{Caller, ToolHost};
use crate::oauth::ResourceServer;
use airlock_spec::ScopeId;

const PREFIX: &str = "/.well-known/oauth-protected-resource";

type Shared = Arc<(ResourceServer, Arc<dyn ToolHost>)>;

/// The metadata routes.
pub(super) fn router(oauth: ResourceServer, host: Arc<dyn ToolHost>) -> Router {
    Router::new()
        .route(PREFIX, get(server))
        .route(&format!("{PREFIX}/mcp"), get(gateway))
        .route(&format!("{PREFIX}/agents/{{name}}/mcp"), get(agent))
        .with_state(Arc::new((oauth, host)))
}

async fn server(State(shared): State<Shared>) -> Response {
    document(&shared.0, None)
}

async fn gateway(State(shared): State<Shared>) -> Response {
    document(&shared.0, Some(&ScopeId::Gateway))
}

async fn agent(State(shared): State<Shared>, Path(name): Path<String>) -> Response {
    let scope = ScopeId::Agent(name);
    // Only an unknown scope is an error; which tools a caller sees does not matter here.
    let anyone = Caller {
        principal: String::new(),
        groups: Vec::new(),
        ..Default::default()
    };
    if shared.1.list_tools(&scope, &anyone).is_err() {
        return StatusCode::NOT_FOUND.into_response();
    }
    document(&shared.0, Some(&scope))
}

fn document(oauth: &ResourceServer, scope: Option<&ScopeId>) -> Response {
    let mut response = axum::Json(oauth.metadata(scope)).into_response();
    response.headers_mut().insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    response
}
