//! Resource subscriptions of session-era clients: `resources/subscribe` and
//! `resources/unsubscribe` under the session id `initialize` gave, and the session's GET stream
//! that carries the updates (docs/rules.md MCP-98, MCP-99).
//!
//! Guarantees:
//! - Only a session-era request carrying a session id this endpoint sealed for the same caller
//!   and scope (`sessions`) subscribes; without one `resources/subscribe` is -32600 naming the
//!   header it needs. A subscription is acknowledged as asked (`{}`), as `subscriptions/listen`
//!   acknowledges its URIs (MCP-92): the updates come from the host's
//!   [`crate::OfferHost::watch_resources`], which hears only URIs the caller may read whose
//!   upstream tells of changes, in their served form.
//! - `GET` with the session id opens the session's stream: an event stream carrying one
//!   `notifications/resources/updated` per update of a URI the session subscribes to, for as
//!   long as the client holds it; a change of the session's URIs takes effect on the open
//!   stream. A session id that does not open for the caller is 404, as MCP says of an unknown
//!   session. `DELETE` is 405: a session is nothing kept that a client could end (its
//!   subscriptions end with the process, or are undone one by one).
//! - The subscriptions are this process's memory, bounded ([`MAX_SESSIONS`] sessions of at most
//!   [`MAX_URIS`] URIs; past the first bound the memory starts over, ending the streams it
//!   held): a subscription and its stream must reach the same replica, and a restart forgets
//!   them (MCP-99).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::json;
use tokio::sync::{mpsc, watch};

use super::handler::Endpoint;
use super::on_stream::event_stream;
use super::plain::session_era;
use super::request::{Admitted, AdmittedRequest, rpc_refusal};
use super::sessions;

/// Sessions whose subscriptions one process keeps at most.
pub(super) const MAX_SESSIONS: usize = 4096;
/// URIs one session subscribes to at most.
pub(super) const MAX_URIS: usize = 256;
/// How many updates may wait for a slow client; later ones are dropped.
const WAITING: usize = 64;

/// The URIs each session subscribes to, by session key, each behind a watch its stream follows.
#[derive(Clone, Default)]
pub(super) struct Subscribed(Arc<Mutex<HashMap<String, watch::Sender<BTreeSet<String>>>>>);

impl Subscribed {
    fn sessions(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, watch::Sender<BTreeSet<String>>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The watch of `session`, made when it has none.
    fn watch(&self, session: &str) -> watch::Sender<BTreeSet<String>> {
        let mut sessions = self.sessions();
        if sessions.len() >= MAX_SESSIONS && !sessions.contains_key(session) {
            sessions.clear();
        }
        let entry = sessions.entry(session.to_owned());
        entry
            .or_insert_with(|| watch::channel(BTreeSet::new()).0)
            .clone()
    }

    /// Adds `uri` to `session`'s subscriptions; `false` when it holds [`MAX_URIS`] already.
    fn subscribe(&self, session: &str, uri: &str) -> bool {
        self.watch(session)
            .send_if_modified(|uris| uris.len() < MAX_URIS && uris.insert(uri.to_owned()))
            || self.watch(session).borrow().contains(uri)
    }

    fn unsubscribe(&self, session: &str, uri: &str) {
        self.watch(session)
            .send_if_modified(|uris| uris.remove(uri));
    }
}

/// Answers `request` when it is a session's subscription, stream or DELETE; `None` otherwise.
pub(super) async fn step(
    endpoint: &Endpoint,
    subscribed: &Subscribed,
    request: &AdmittedRequest,
) -> Option<Response> {
    let method = request.http_method();
    let subscribes = matches!(
        request.method(),
        "resources/subscribe" | "resources/unsubscribe"
    ) && session_era(request.protocol_version());
    if *method == Method::POST && !subscribes {
        return None;
    }
    let session = endpoint
        .request_states()
        .and_then(|states| sessions::opened(states, request))
        .map(|session| session.key);
    let admitted = request.admitted();
    Some(match (method, session) {
        (&Method::POST, None) => rpc_refusal(
            StatusCode::BAD_REQUEST,
            request.id(),
            -32600,
            "Invalid Request: resource subscriptions need the Mcp-Session-Id this endpoint issued at initialize",
        )
        .into_response(),
        (&Method::POST, Some(session)) => subscription(subscribed, request, &session),
        // Nothing of a session is kept that a DELETE could end (MCP's 405 for that case).
        (&Method::DELETE, _) => {
            let mut refused = StatusCode::METHOD_NOT_ALLOWED.into_response();
            let allowed = header::HeaderValue::from_static("GET, POST");
            refused.headers_mut().insert(header::ALLOW, allowed);
            refused
        }
        (_, None) => StatusCode::NOT_FOUND.into_response(),
        (_, Some(_)) if !accepts_events(request) => StatusCode::NOT_ACCEPTABLE.into_response(),
        (_, Some(session)) => {
            let watching = subscribed.watch(&session).subscribe();
            stream(endpoint.clone(), admitted.clone(), watching)
        }
    })
}

/// `resources/subscribe` or `resources/unsubscribe` of `session`.
fn subscription(subscribed: &Subscribed, request: &AdmittedRequest, session: &str) -> Response {
    let id = request.id();
    let Some(uri) = request.params()["uri"].as_str() else {
        let refused = "Invalid params: `uri` must be a string";
        return rpc_refusal(StatusCode::OK, id, -32602, refused).into_response();
    };
    if request.method() == "resources/unsubscribe" {
        subscribed.unsubscribe(session, uri);
    } else if !subscribed.subscribe(session, uri) {
        let refused = format!("a session subscribes to at most {MAX_URIS} resources");
        return rpc_refusal(StatusCode::OK, id, -32602, &refused).into_response();
    }
    axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": {}})).into_response()
}

fn accepts_events(request: &AdmittedRequest) -> bool {
    request
        .headers()
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|essence| {
            let essence = essence.split(';').next().unwrap_or_default().trim();
            essence.eq_ignore_ascii_case("text/event-stream")
        })
}

/// The session's stream: its subscriptions' updates, followed through every change of them.
fn stream(
    endpoint: Endpoint,
    admitted: Admitted,
    watching: watch::Receiver<BTreeSet<String>>,
) -> Response {
    let (events, updates) = mpsc::channel::<String>(WAITING);
    tokio::spawn(relay(endpoint, admitted, watching, events));
    let messages = futures::stream::unfold(updates, |mut updates| async move {
        updates.recv().await.map(|update| (update, updates))
    });
    event_stream(messages)
}

/// Relays the updates of the URIs `watching` holds until the client goes or the session is
/// forgotten; a change of the URIs listens again.
async fn relay(
    endpoint: Endpoint,
    admitted: Admitted,
    mut watching: watch::Receiver<BTreeSet<String>>,
    events: mpsc::Sender<String>,
) {
    let host = endpoint.host();
    let tells = host.offers(&admitted.scope).subscribe;
    loop {
        let uris: Vec<String> = watching.borrow_and_update().iter().cloned().collect();
        let mut updates = if uris.is_empty() || !tells {
            futures::stream::empty().boxed()
        } else {
            host.watch_resources(&admitted.scope, &admitted.caller, uris)
        };
        loop {
            tokio::select! {
                changed = watching.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    break;
                }
                Some(uri) = updates.next() => {
                    let update = json!({"jsonrpc": "2.0",
                        "method": "notifications/resources/updated", "params": {"uri": uri}});
                    // A full queue drops the update: the upstreams never wait for this client.
                    if let Err(mpsc::error::TrySendError::Closed(_)) =
                        events.try_send(update.to_string())
                    {
                        return;
                    }
                }
                () = events.closed() => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MCP-99: a session's URIs are bounded, and the memory of sessions starts over past its
    /// bound.
    #[test]
    fn mcp_99_subscriptions_are_bounded_per_session_and_process() {
        let subscribed = Subscribed::default();
        let watching = subscribed.watch("s1").subscribe();
        for n in 0..MAX_URIS {
            assert!(subscribed.subscribe("s1", &format!("test://{n}")));
        }
        assert!(subscribed.subscribe("s1", "test://0"), "already held");
        assert!(!subscribed.subscribe("s1", "test://one-more"));
        subscribed.unsubscribe("s1", "test://0");
        assert_eq!(watching.borrow().len(), MAX_URIS - 1);
        for n in 0..MAX_SESSIONS {
            subscribed.watch(&format!("other{n}"));
        }
        assert!(subscribed.sessions().len() <= MAX_SESSIONS);
        assert!(!subscribed.sessions().contains_key("s1"));
    }
}
