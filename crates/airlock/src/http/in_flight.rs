//! Requests in progress, bounded (OPS-13): at most `[server] max_in_flight` at once over the
//! MCP endpoint and the decisions API, and at most `max_in_flight_per_principal` for the
//! principal a bearer token names (an MCP or an admin token). A request over either bound is
//! answered at once `503` with `Retry-After: 1` and a JSON body — never queued, so a client
//! holding many long polls slows nobody else down. Health checks and metrics are not counted:
//! a busy process is still alive.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use airlock_spec::ServerLimits;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use secrecy::ExposeSecret as _;
use sha2::{Digest as _, Sha256};
use tokio::sync::Semaphore;

use super::AppState;

/// The body of every "too busy" answer, from this layer or the accept loop.
pub(super) const BUSY_BODY: &str = r#"{"error":"busy","message":"the server is handling as many requests as it allows; retry after 1 s"}"#;

/// The bounds and who holds them.
#[derive(Clone)]
pub(super) struct InFlight(Arc<Shared>);

struct Shared {
    overall: Arc<Semaphore>,
    per_principal: usize,
    /// SHA-256 of each configured token → its principal.
    principals: HashMap<[u8; 32], String>,
    held: Mutex<HashMap<String, usize>>,
}

impl InFlight {
    pub(super) fn new(state: &AppState, limits: &ServerLimits) -> Self {
        let mcp = state.mcp.tokens.iter().map(|t| (&t.token, &t.principal));
        let admin = state
            .admin
            .0
            .iter()
            .map(|(token, principal)| (token, principal));
        let principals = mcp
            .chain(admin)
            .map(|(token, principal)| (digest(token.expose_secret()), principal.clone()))
            .collect();
        let overall = usize::try_from(limits.max_in_flight)
            .unwrap_or(usize::MAX)
            .min(Semaphore::MAX_PERMITS);
        Self(Arc::new(Shared {
            overall: Arc::new(Semaphore::new(overall)),
            per_principal: usize::try_from(limits.max_in_flight_per_principal)
                .unwrap_or(usize::MAX),
            principals,
            held: Mutex::default(),
        }))
    }

    /// The principal of the request's bearer token, if it is a configured one. Only a
    /// digest is looked up, so the lookup's timing says nothing useful about the token.
    fn principal(&self, request: &Request) -> Option<String> {
        let token = request
            .headers()
            .get(header::AUTHORIZATION)?
            .to_str()
            .ok()?
            .strip_prefix("Bearer ")?
            .trim();
        self.0.principals.get(&digest(token)).cloned()
    }

    /// A place for one more request of `principal`, or `None` when it holds its share.
    fn take(&self, principal: String) -> Option<PrincipalSlot> {
        let mut held = self.0.held.lock().unwrap_or_else(PoisonError::into_inner);
        let count = held.entry(principal.clone()).or_default();
        if *count >= self.0.per_principal {
            return None;
        }
        *count += 1;
        Some(PrincipalSlot {
            shared: self.0.clone(),
            principal,
        })
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// One request of a principal in progress; its place is given back when dropped.
struct PrincipalSlot {
    shared: Arc<Shared>,
    principal: String,
}

impl Drop for PrincipalSlot {
    fn drop(&mut self) {
        let mut held = self
            .shared
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = held.get_mut(&self.principal) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.principal);
            }
        }
    }
}

/// Admits the request within both bounds, or answers it 503 at once.
pub(super) async fn limit(
    State(in_flight): State<InFlight>,
    request: Request,
    next: Next,
) -> Response {
    let Ok(_overall) = in_flight.0.overall.clone().try_acquire_owned() else {
        return busy();
    };
    let _principal = match in_flight.principal(&request) {
        Some(principal) => match in_flight.take(principal) {
            Some(slot) => Some(slot),
            None => return busy(),
        },
        None => None,
    };
    let _counted = Counted::new();
    next.run(request).await
}

/// `airlock_requests_in_flight` (OPS-60): one more while a request is admitted, one less when
/// its answer is sent or it is dropped — a long poll shows here while it waits.
struct Counted;

impl Counted {
    fn new() -> Self {
        metrics::gauge!("airlock_requests_in_flight").increment(1.0);
        Self
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        metrics::gauge!("airlock_requests_in_flight").decrement(1.0);
        crate::memory::answered();
    }
}

/// `503` with `Retry-After: 1` and [`BUSY_BODY`].
fn busy() -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [
            (header::RETRY_AFTER, HeaderValue::from_static("1")),
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
        ],
        BUSY_BODY,
    )
        .into_response()
}
