//! The accept loop (OPS-12): every connection must send its request headers within
//! `[server] header_timeout`, and may stay idle between requests no longer than that; at most
//! `max_connections` are served at once. A connection arriving at the cap takes the place of the
//! oldest one with no request in progress (a client that never sends a byte cannot crowd out
//! one that does), once that one has had [`EVICTABLE_AFTER`] to send its request; when there is
//! none it is answered `503` with `Retry-After` and closed. Accept errors (file descriptors
//! exhausted) back off instead of spinning, and are logged once per episode. Shutdown stops
//! accepting, and returns once each connection has finished the request it is serving and each
//! refusal has been written (OPS-9). Accepted sockets send without Nagle's delay (OPS-22).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use airlock_spec::ServerLimits;
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use super::in_flight::BUSY_BODY;

/// How long a new connection keeps its place whatever arrives: time for a client that
/// connected just before a flood to send its request.
const EVICTABLE_AFTER: Duration = Duration::from_millis(100);
/// How long an evicted connection may take to finish writing a response before it is dropped.
const EVICT_GRACE: Duration = Duration::from_secs(1);
/// Refusals written at once; beyond it a connection over the cap is closed without an answer.
const REFUSERS: usize = 64;
/// How long a refusal may take to be written and its request read: long enough for a client
/// that sent one, short enough that clients that send nothing do not hold every refuser.
const REFUSE_WITHIN: Duration = Duration::from_millis(250);
/// The longest pause after a failed `accept`.
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Serves `app` on `listener` within `limits` until `stop` is cancelled, then stops accepting
/// and returns once every connection has finished the request it is serving.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ServerLimits,
    stop: CancellationToken,
) -> std::io::Result<()> {
    let table = Arc::new(Table::new(limits.max_connections));
    let refusers = Arc::new(Semaphore::new(REFUSERS));
    // Not `stop` itself: connections start closing only once the listener is closed, so none
    // closes while this stopping server may still admit a new one.
    let draining = CancellationToken::new();
    let mut connections = JoinSet::new();
    let mut backoff = Backoff::default();
    loop {
        let stream = tokio::select! {
            () = stop.cancelled() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    backoff.reset();
                    without_delay(stream)
                }
                Err(error) => {
                    backoff.pause(&error).await;
                    continue;
                }
            },
        };
        match table.admit() {
            Some(slot) => {
                let connection = Connection {
                    app: app.clone(),
                    header_timeout: limits.header_timeout,
                    slot,
                    draining: draining.clone(),
                };
                connections.spawn(connection.run(stream));
            }
            None => refuse(stream, &refusers, &mut connections),
        }
    }
    drop(listener);
    draining.cancel();
    while connections.join_next().await.is_some() {}
    Ok(())
}

/// Turns Nagle's algorithm off on an accepted socket (OPS-22): a response written in pieces
/// (an SSE event, then the chunked body's end) would otherwise hold its last piece until the
/// client acknowledges the first — up to the client's delayed-ACK timer, ~40 ms on Linux.
/// Failing to set it costs latency, never the connection.
fn without_delay(stream: TcpStream) -> TcpStream {
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%error, "TCP_NODELAY not set on an accepted connection");
    }
    stream
}

/// The open connections, oldest first, each with its count of requests in progress.
struct Table {
    max: usize,
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    next: u64,
    by_age: BTreeMap<u64, Arc<SlotState>>,
}

struct SlotState {
    opened: Instant,
    requests: AtomicUsize,
    evict: Notify,
}

impl SlotState {
    fn evictable(&self) -> bool {
        self.requests.load(Ordering::Acquire) == 0 && self.opened.elapsed() >= EVICTABLE_AFTER
    }
}

/// A connection's place in the [`Table`], given back when the connection ends.
struct Slot {
    id: u64,
    state: Arc<SlotState>,
    table: Arc<Table>,
}

impl Table {
    fn new(max: u64) -> Self {
        Self {
            max: usize::try_from(max).unwrap_or(usize::MAX),
            open: Mutex::default(),
        }
    }

    /// A slot for a new connection: a free one, or the oldest idle connection's (evicted);
    /// `None` when every open connection is serving a request.
    fn admit(self: &Arc<Self>) -> Option<Slot> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if open.by_age.len() >= self.max {
            let idle = open
                .by_age
                .iter()
                .find(|(_, s)| s.evictable())
                .map(|(id, _)| *id)?;
            if let Some(evicted) = open.by_age.remove(&idle) {
                evicted.evict.notify_one();
            }
        }
        let id = open.next;
        open.next += 1;
        let state = Arc::new(SlotState {
            opened: Instant::now(),
            requests: AtomicUsize::new(0),
            evict: Notify::new(),
        });
        open.by_age.insert(id, state.clone());
        Some(Slot {
            id,
            state,
            table: self.clone(),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self
            .table
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        open.by_age.remove(&self.id);
    }
}

/// Counts a request in progress on its connection while alive.
struct InProgress(Arc<SlotState>);

impl InProgress {
    fn new(state: &Arc<SlotState>) -> Self {
        state.requests.fetch_add(1, Ordering::AcqRel);
        Self(state.clone())
    }
}

impl Drop for InProgress {
    fn drop(&mut self) {
        self.0.requests.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One accepted connection and what ends it: its client, the header timeout, eviction, or
/// shutdown.
struct Connection {
    app: Router,
    header_timeout: Duration,
    slot: Slot,
    draining: CancellationToken,
}

impl Connection {
    async fn run(self, stream: TcpStream) {
        let state = self.slot.state.clone();
        let app = self.app.clone();
        let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            let in_progress = InProgress::new(&state);
            let app = app.clone();
            async move {
                let response = app.oneshot(request).await;
                drop(in_progress);
                response
            }
        });
        let mut builder = http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(self.header_timeout);
        // Upgrades for the run WebSocket (AGENT-50): once upgraded, the socket belongs to its
        // handler's task and no longer holds a place in the connection table.
        let connection = builder
            .serve_connection(TokioIo::new(stream), service)
            .with_upgrades();
        tokio::pin!(connection);
        let evicted = tokio::select! {
            served = connection.as_mut() => return log_end(served),
            () = self.slot.state.evict.notified() => true,
            () = self.draining.cancelled() => false,
        };
        connection.as_mut().graceful_shutdown();
        if !evicted {
            // Shutdown: the request in progress runs to its end; `serve`'s caller bounds the
            // wait with the grace period (OPS-9).
            return log_end(connection.await);
        }
        if let Ok(served) = tokio::time::timeout(EVICT_GRACE, connection).await {
            log_end(served);
        }
    }
}

/// A connection's end is the client's business (a reset, a timeout), never an operator's.
fn log_end(served: hyper::Result<()>) {
    if let Err(error) = served {
        tracing::debug!(%error, "connection ended");
    }
}

/// Answers a connection over the cap `503` with `Retry-After` and closes it, in the background
/// among `connections` (so shutdown waits for it too) and bounded: at most [`REFUSERS`] at once,
/// each within [`REFUSE_WITHIN`].
fn refuse(stream: TcpStream, refusers: &Arc<Semaphore>, connections: &mut JoinSet<()>) {
    let Ok(permit) = refusers.clone().try_acquire_owned() else {
        return;
    };
    connections.spawn(async move {
        let _permit = permit;
        let _ = tokio::time::timeout(REFUSE_WITHIN, answer_busy(stream)).await;
    });
}

async fn answer_busy(mut stream: TcpStream) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        BUSY_BODY.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(BUSY_BODY.as_bytes()).await?;
    stream.shutdown().await?;
    // Closing with unread bytes resets the connection, which can destroy the answer before
    // the client reads it: read what it sent first.
    let mut sink = [0_u8; 1024];
    while stream.read(&mut sink).await? > 0 {}
    Ok(())
}

/// Pauses after failed accepts, doubling up to [`BACKOFF_MAX`], and logs once per episode.
#[derive(Default)]
struct Backoff {
    pause: Option<Duration>,
}

impl Backoff {
    async fn pause(&mut self, error: &std::io::Error) {
        let pause = match self.pause {
            None => {
                tracing::warn!(%error, "accepting connections failed; retrying with back-off until it works again");
                Duration::from_millis(10)
            }
            Some(pause) => (pause * 2).min(BACKOFF_MAX),
        };
        self.pause = Some(pause);
        tokio::time::sleep(pause).await;
    }

    fn reset(&mut self) {
        if self.pause.take().is_some() {
            tracing::info!("accepting connections again");
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::net::{TcpListener, TcpStream};

    use super::without_delay;

    /// OPS-22: an accepted socket (which starts with Nagle's algorithm on) leaves the accept
    /// loop with it off.
    #[tokio::test]
    async fn an_accepted_socket_sends_without_nagle_delay() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let _client = TcpStream::connect(addr).await.unwrap();
        let (accepted, _) = listener.accept().await.unwrap();
        assert!(!accepted.nodelay().unwrap(), "the kernel's default changed");
        assert!(without_delay(accepted).nodelay().unwrap());
    }
}
