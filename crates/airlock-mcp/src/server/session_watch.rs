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
//! - The subscriptions are this process's memory, bounded: [`MAX_SESSIONS`] sessions, of which
//!   [`MAX_PER_PRINCIPAL`] of one caller, each of at most [`MAX_URIS`] URIs of at most
//!   [`MAX_URI_BYTES`] bytes and [`MAX_STREAMS`] open streams. A session with nothing
//!   subscribed and no stream is dropped to make room; past the bounds a subscribe is -32602
//!   and a stream 429, and one caller's sessions never push out another's. A subscription and
//!   its stream must reach the same replica, and a restart forgets them (MCP-99).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Bytes;
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::json;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::handler::Endpoint;
use super::on_stream::{data_event, event_stream};
use super::plain::session_era;
use super::request::{Admitted, AdmittedRequest, rpc_refusal};

/// Sessions whose subscriptions one process keeps at most.
pub(super) const MAX_SESSIONS: usize = 4096;
/// Of those, the sessions of one principal at most.
pub(super) const MAX_PER_PRINCIPAL: usize = 64;
/// URIs one session subscribes to at most.
pub(super) const MAX_URIS: usize = 256;
/// The longest URI subscribed to, in bytes.
pub(super) const MAX_URI_BYTES: usize = 2048;
/// Streams one session holds open at once at most.
pub(super) const MAX_STREAMS: usize = 4;
/// How many updates may wait for a slow client; later ones are dropped.
const WAITING: usize = 64;

/// How often a session's stream sends a comment, so a peer that went away is noticed.
const KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(30);

/// One session's subscriptions, behind the watch its streams follow.
struct Watched {
    principal: String,
    uris: watch::Sender<BTreeSet<String>>,
    /// When it was last subscribed to or streamed.
    used: Instant,
}

impl Watched {
    /// Followed by no stream: its subscriptions deliver nothing until one opens.
    fn unwatched(&self) -> bool {
        self.uris.receiver_count() == 0
    }
}

/// The URIs each session subscribes to, by session key.
#[derive(Clone, Default)]
pub(super) struct Subscribed(Arc<Mutex<HashMap<String, Watched>>>);

impl Subscribed {
    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, Watched>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `with` on the watch of `session` of `principal`, made when it has none, under the
    /// lock (so nothing drops it in between); `None` when the process or the principal holds as
    /// many sessions as it may and none of them can make room. Room is made by dropping the
    /// least recently used session followed by no stream: of the principal's own at its bound,
    /// of anyone's at the process's, so one caller's sessions never push out another's streams.
    fn with_watch<T>(
        &self,
        (session, principal): (&str, &str),
        with: impl FnOnce(&watch::Sender<BTreeSet<String>>) -> T,
    ) -> Option<T> {
        let mut sessions = self.sessions();
        if !sessions.contains_key(session) {
            let theirs = sessions
                .values()
                .filter(|w| w.principal == principal)
                .count();
            if theirs >= MAX_PER_PRINCIPAL {
                drop_oldest_unwatched(&mut sessions, Some(principal))?;
            } else if sessions.len() >= MAX_SESSIONS {
                drop_oldest_unwatched(&mut sessions, None)?;
            }
            let watched = Watched {
                principal: principal.to_owned(),
                uris: watch::channel(BTreeSet::new()).0,
                used: Instant::now(),
            };
            sessions.insert(session.to_owned(), watched);
        }
        let watched = sessions.get_mut(session)?;
        watched.used = Instant::now();
        Some(with(&watched.uris))
    }

    /// Adds `uri` to `session`'s subscriptions, or says why not.
    fn subscribe(&self, session: &str, principal: &str, uri: &str) -> Result<(), String> {
        if uri.len() > MAX_URI_BYTES {
            return Err(format!("a subscribed URI is at most {MAX_URI_BYTES} bytes"));
        }
        let added = self.with_watch((session, principal), |uris| {
            let mut full = false;
            uris.send_if_modified(|uris| {
                full = uris.len() >= MAX_URIS && !uris.contains(uri);
                !full && uris.insert(uri.to_owned())
            });
            !full
        });
        match added {
            Some(true) => Ok(()),
            Some(false) => Err(format!(
                "a session subscribes to at most {MAX_URIS} resources"
            )),
            None => Err(format!(
                "this server keeps subscriptions for at most {MAX_PER_PRINCIPAL} sessions of one caller and {MAX_SESSIONS} in all, each followed by a stream"
            )),
        }
    }

    /// A new stream of `session`'s subscriptions; `None` past [`MAX_STREAMS`] or the bounds.
    fn follow(&self, session: &str, principal: &str) -> Option<watch::Receiver<BTreeSet<String>>> {
        let follow = |uris: &watch::Sender<BTreeSet<String>>| {
            (uris.receiver_count() < MAX_STREAMS).then(|| uris.subscribe())
        };
        self.with_watch((session, principal), follow).flatten()
    }

    /// Takes `uri` out of `session`'s subscriptions; a session left with nothing subscribed and
    /// no stream is forgotten.
    fn unsubscribe(&self, session: &str, uri: &str) {
        let mut sessions = self.sessions();
        let Some(watched) = sessions.get(session) else {
            return;
        };
        watched.uris.send_if_modified(|uris| uris.remove(uri));
        if watched.unwatched() && watched.uris.borrow().is_empty() {
            sessions.remove(session);
        }
    }
}

/// Drops the least recently used session followed by no stream (of `principal`, when named);
/// `None` when there is none.
fn drop_oldest_unwatched(
    sessions: &mut HashMap<String, Watched>,
    principal: Option<&str>,
) -> Option<()> {
    let oldest = sessions
        .iter()
        .filter(|(_, w)| w.unwatched() && principal.is_none_or(|p| w.principal == p))
        .min_by_key(|(_, w)| w.used)
        .map(|(key, _)| key.clone())?;
    sessions.remove(&oldest);
    Some(())
}

/// Answers `request` when it is a session's subscription, stream or DELETE; `None` otherwise.
/// `session` is the key of the session it carries, as `sessions::carried` opened it.
pub(super) async fn step(
    endpoint: &Endpoint,
    (subscribed, session): (&Subscribed, Option<&str>),
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
    let session = session.map(str::to_owned);
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
        (_, Some(session)) => match subscribed.follow(&session, &admitted.caller.principal) {
            Some(watching) => stream(endpoint.clone(), admitted.clone(), watching),
            // A session's streams, or the sessions kept, are as many as they may be.
            None => StatusCode::TOO_MANY_REQUESTS.into_response(),
        },
    })
}

/// `resources/subscribe` or `resources/unsubscribe` of `session`.
fn subscription(subscribed: &Subscribed, request: &AdmittedRequest, session: &str) -> Response {
    let id = request.id();
    let Some(uri) = request.params()["uri"].as_str() else {
        let refused = "Invalid params: `uri` must be a string";
        return rpc_refusal(StatusCode::OK, id, -32602, refused).into_response();
    };
    let principal = &request.admitted().caller.principal;
    if request.method() == "resources/unsubscribe" {
        subscribed.unsubscribe(session, uri);
    } else if let Err(refused) = subscribed.subscribe(session, principal, uri) {
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
    let (events, updates) = mpsc::channel::<Bytes>(WAITING);
    tokio::spawn(relay(endpoint, admitted, watching, events));
    let events = futures::stream::unfold(updates, |mut updates| async move {
        updates.recv().await.map(|update| (update, updates))
    });
    event_stream(events)
}

/// Relays the updates of the URIs `watching` holds until the client goes or the session is
/// forgotten; a change of the URIs listens again.
async fn relay(
    endpoint: Endpoint,
    admitted: Admitted,
    mut watching: watch::Receiver<BTreeSet<String>>,
    events: mpsc::Sender<Bytes>,
) {
    let host = endpoint.host();
    let tells = host.offers(&admitted.scope).subscribe;
    let mut alive = tokio::time::interval_at(Instant::now() + KEEP_ALIVE, KEEP_ALIVE);
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
                        events.try_send(data_event(&update.to_string()))
                    {
                        return;
                    }
                }
                // Writing something now and then is how a peer gone without a word is noticed.
                _ = alive.tick() => {
                    let comment = Bytes::from_static(b": keep-alive\n\n");
                    if let Err(mpsc::error::TrySendError::Closed(_)) = events.try_send(comment) {
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

    /// MCP-99: a session's URIs, their length, a principal's sessions and the process's are
    /// bounded; a session followed by no stream makes room (the least recently used first),
    /// one followed by a stream never does, and one caller cannot push out another's.
    #[test]
    fn mcp_99_subscriptions_are_bounded_per_session_principal_and_process() {
        let subscribed = Subscribed::default();
        let watching = subscribed.follow("s1", "ann").unwrap();
        for n in 0..MAX_URIS {
            subscribed
                .subscribe("s1", "ann", &format!("test://{n}"))
                .unwrap();
        }
        subscribed.subscribe("s1", "ann", "test://0").unwrap();
        assert!(
            subscribed
                .subscribe("s1", "ann", "test://one-more")
                .is_err()
        );
        subscribed.unsubscribe("s1", "test://0");
        assert_eq!(watching.borrow().len(), MAX_URIS - 1);
        let long = format!("test://{}", "x".repeat(MAX_URI_BYTES));
        assert!(subscribed.subscribe("s2", "ann", &long).is_err());
        let streams: Vec<_> = (1..MAX_STREAMS)
            .map(|_| subscribed.follow("s1", "ann"))
            .collect();
        assert!(streams.iter().all(Option::is_some));
        assert!(
            subscribed.follow("s1", "ann").is_none(),
            "at most {MAX_STREAMS} streams"
        );
        // Bob fills his share with sessions followed by a stream: none can make room.
        let held: Vec<_> = (0..MAX_PER_PRINCIPAL)
            .map(|n| subscribed.follow(&format!("b{n}"), "bob").unwrap())
            .collect();
        assert!(subscribed.subscribe("b-more", "bob", "test://b").is_err());
        assert!(subscribed.sessions().contains_key("s1"), "Ann's stay");
        // Once one has no stream, the least recently used such session makes room.
        drop(held);
        subscribed.subscribe("b-more", "bob", "test://b").unwrap();
        let bobs = |sessions: &HashMap<String, Watched>| {
            sessions.values().filter(|w| w.principal == "bob").count()
        };
        assert_eq!(
            bobs(&subscribed.sessions()),
            MAX_PER_PRINCIPAL,
            "one made room"
        );
        assert!(subscribed.sessions().len() <= MAX_SESSIONS);
    }
}
