//! A webhook receiver on 127.0.0.1: records every request (headers and the exact body bytes)
//! and answers the statuses a test queued, then 200; a queued 3xx points `Location` where the
//! test said. It can be started on a port chosen in advance, so a test can send to a receiver
//! that is down and bring it up later.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The request headers.
    pub headers: HeaderMap,
    /// The body exactly as sent.
    pub body: Bytes,
    /// The status the receiver answered.
    pub status: u16,
}

impl Delivery {
    /// A header's value as text (empty when absent).
    #[must_use]
    pub fn header(&self, name: &str) -> String {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    }
}

#[derive(Clone, Default)]
struct Inbox {
    received: Arc<Mutex<Vec<Delivery>>>,
    statuses: Arc<Mutex<VecDeque<u16>>>,
    location: Arc<Mutex<String>>,
}

/// A running receiver; it lives until the test's runtime ends.
pub struct Receiver {
    /// The port it listens on.
    pub port: u16,
    inbox: Inbox,
}

impl Receiver {
    /// Starts a receiver on any free port.
    pub async fn start() -> Self {
        Self::start_on(0).await
    }

    /// Starts a receiver on `port` (0: any free port).
    ///
    /// # Panics
    /// When the port cannot be bound.
    pub async fn start_on(port: u16) -> Self {
        let inbox = Inbox::default();
        let app = Router::new().fallback(handle).with_state(inbox.clone());
        let port = crate::listen::serve(app, port).await;
        Self { port, inbox }
    }

    /// The receiver's URL (`http://127.0.0.1:PORT/hook`).
    #[must_use]
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    /// Answers the next requests with `statuses`, in order, then 200 again.
    pub fn answer(&self, statuses: &[u16]) {
        let mut queue = self
            .inbox
            .statuses
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        queue.extend(statuses);
    }

    /// Answers the next request with a `status` redirect to `location`.
    pub fn redirect(&self, status: u16, location: &str) {
        location.clone_into(
            &mut self
                .inbox
                .location
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        self.answer(&[status]);
    }

    /// Every request so far, in order.
    #[must_use]
    pub fn received(&self) -> Vec<Delivery> {
        self.inbox
            .received
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

async fn handle(State(inbox): State<Inbox>, headers: HeaderMap, body: Bytes) -> Response {
    let status = inbox
        .statuses
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .pop_front()
        .unwrap_or(200);
    inbox
        .received
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(Delivery {
            headers,
            body,
            status,
        });
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = status.into_response();
    let location = inbox
        .location
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let (true, Ok(value)) = (status.is_redirection(), HeaderValue::from_str(&location)) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}
