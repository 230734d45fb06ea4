//! A fake of Slack's Web API on 127.0.0.1: `chat.postMessage` and `chat.update`, answered as
//! Slack answers them (`{"ok": true, "channel", "ts"}`) when the bearer token is the one the
//! test gave, `{"ok": false, "error": "invalid_auth"}` otherwise. Every call is recorded.

use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::routing::post;
use serde_json::{Value, json};

/// One call the fake received.
#[derive(Debug, Clone)]
pub struct SlackCall {
    /// The Web API method (`chat.postMessage`, `chat.update`).
    pub method: String,
    /// The JSON body.
    pub body: Value,
    /// Whether the bearer token was the expected one.
    pub authorized: bool,
}

#[derive(Clone)]
struct Fake {
    token: String,
    calls: Arc<Mutex<Vec<SlackCall>>>,
}

/// A running fake; it lives until the test's runtime ends.
pub struct FakeSlack {
    /// The port it listens on.
    pub port: u16,
    calls: Arc<Mutex<Vec<SlackCall>>>,
}

impl FakeSlack {
    /// Starts a fake that accepts the bot token `token`.
    ///
    /// # Panics
    /// When no port on 127.0.0.1 can be bound.
    pub async fn start(token: &str) -> Self {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let fake = Fake {
            token: token.to_owned(),
            calls: Arc::clone(&calls),
        };
        let app = Router::new()
            .route("/api/{method}", post(handle))
            .with_state(fake);
        let port = crate::listen::serve(app, 0).await;
        Self { port, calls }
    }

    /// The `api_base` to configure: `http://127.0.0.1:PORT/api`.
    #[must_use]
    pub fn api_base(&self) -> String {
        format!("http://127.0.0.1:{}/api", self.port)
    }

    /// Every call so far, in order.
    #[must_use]
    pub fn calls(&self) -> Vec<SlackCall> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The calls of `method`, in order.
    #[must_use]
    pub fn calls_of(&self, method: &str) -> Vec<SlackCall> {
        self.calls()
            .into_iter()
            .filter(|c| c.method == method)
            .collect()
    }
}

async fn handle(
    State(fake): State<Fake>,
    Path(method): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> axum::Json<Value> {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let expected = format!("Bearer {}", fake.token);
    let authorized = headers
        .get("authorization")
        .is_some_and(|v| v.as_bytes() == expected.as_bytes());
    let mut calls = fake.calls.lock().unwrap_or_else(PoisonError::into_inner);
    calls.push(SlackCall {
        method: method.clone(),
        body: body.clone(),
        authorized,
    });
    if !authorized {
        return axum::Json(json!({"ok": false, "error": "invalid_auth"}));
    }
    let channel = body["channel"].clone();
    let reply = match method.as_str() {
        "chat.postMessage" => {
            let ts = format!("1700000000.{:06}", calls.len());
            json!({"ok": true, "channel": channel, "ts": ts})
        }
        "chat.update" => json!({"ok": true, "channel": channel, "ts": body["ts"]}),
        _ => json!({"ok": false, "error": "unknown_method"}),
    };
    axum::Json(reply)
}
