//! A bare HTTP/1.1 upstream on 127.0.0.1 that misbehaves on cue: it reads a request whole and
//! then hangs up without answering, holds it until the test releases it, or answers an error
//! status. Every other request gets a plain success (an MCP `initialize` result, a `tools/call`
//! result, `202` for a notification, `{"done": true}` for anything that is not JSON-RPC), so
//! one server stands in for a tenant API and for an MCP server alike.

use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{Notify, Semaphore};

/// What the server does with a request its cue applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cue {
    /// Read the request whole, then close the connection without a byte of answer.
    Hangup,
    /// Read the request whole and answer only once [`RawServer::release`] is called.
    Hold,
    /// Answer this status with a small JSON body.
    Status(u16),
}

/// The cue and what the server saw.
struct Shared {
    /// The JSON-RPC method the cue applies to; `None`: every request.
    on: Option<&'static str>,
    cue: Cue,
    /// The method of every request (the path for one that is not JSON-RPC), in order.
    seen: Mutex<Vec<String>>,
    held: Notify,
    release: Semaphore,
}

/// A running misbehaving upstream; it lives until the test's runtime ends.
pub struct RawServer {
    /// The port it listens on.
    pub port: u16,
    shared: Arc<Shared>,
}

impl RawServer {
    /// Starts a server applying `cue` to requests of JSON-RPC method `on` (`None`: to every
    /// request).
    ///
    /// # Panics
    /// When no port on 127.0.0.1 can be bound.
    pub async fn start(on: Option<&'static str>, cue: Cue) -> Self {
        let (listener, port) = crate::listen::loopback(0).await;
        let shared = Arc::new(Shared {
            on,
            cue,
            seen: Mutex::new(Vec::new()),
            held: Notify::new(),
            release: Semaphore::new(0),
        });
        let serving = Arc::clone(&shared);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, Arc::clone(&serving)));
            }
        });
        Self { port, shared }
    }

    /// A port nothing listens on (bound, then closed): connecting to it is refused.
    ///
    /// # Panics
    /// When no port on 127.0.0.1 can be bound.
    pub async fn refusing_port() -> u16 {
        crate::listen::free_port()
    }

    /// What each request was, in order: its JSON-RPC method, or its path.
    #[must_use]
    pub fn seen(&self) -> Vec<String> {
        lock(&self.shared.seen).clone()
    }

    /// Returns once a request is being held ([`Cue::Hold`]); one return per held request.
    pub async fn held(&self) {
        self.shared.held.notified().await;
    }

    /// Lets one held request (now or later) be answered with success.
    pub fn release(&self) {
        self.shared.release.add_permits(1);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Serves one connection, request after request (keep-alive), until either side closes it.
async fn serve(mut stream: TcpStream, shared: Arc<Shared>) {
    let mut buf = Vec::new();
    while let Some((path, body)) = read_request(&mut stream, &mut buf).await {
        let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let method = message["method"].as_str().map(str::to_owned);
        lock(&shared.seen).push(method.clone().unwrap_or(path));
        let cued = shared.on.is_none_or(|on| method.as_deref() == Some(on));
        let reply = match (cued, shared.cue) {
            (true, Cue::Hangup) => return,
            (true, Cue::Status(status)) => response(status, &json!({"error": "nope"})),
            (true, Cue::Hold) => {
                shared.held.notify_one();
                let Ok(permit) = shared.release.acquire().await else {
                    return;
                };
                permit.forget();
                success(&message)
            }
            (false, _) => success(&message),
        };
        if stream.write_all(&reply).await.is_err() {
            return;
        }
    }
}

/// The next request's path and body (by `Content-Length`), or `None` once the peer closed.
async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(String, Vec<u8>)> {
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        fill(stream, buf).await?;
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let path = head.split(' ').nth(1).unwrap_or_default().to_owned();
    let length: usize = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        fill(stream, buf).await?;
    }
    let body = buf[head_end..head_end + length].to_vec();
    buf.drain(..head_end + length);
    Some((path, body))
}

async fn fill(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<()> {
    let mut chunk = [0u8; 4096];
    match stream.read(&mut chunk).await {
        Ok(0) | Err(_) => None,
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            Some(())
        }
    }
}

/// The plain success for `message`: an MCP answer for JSON-RPC, `{"done": true}` otherwise.
fn success(message: &Value) -> Vec<u8> {
    let Some(method) = message["method"].as_str() else {
        return response(200, &json!({"done": true}));
    };
    let Some(id) = message.get("id") else {
        return b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_vec();
    };
    let result = match method {
        "initialize" => json!({
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw-upstream", "version": "1"}
        }),
        _ => json!({"content": [{"type": "text", "text": "done"}]}),
    };
    response(200, &json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

fn response(status: u16, body: &Value) -> Vec<u8> {
    let body = body.to_string();
    format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}
