//! Responses read as they arrive (server-sent events from a model provider), under the same
//! rules as a buffered response (docs/rules.md EGRESS-31 to EGRESS-34).
//!
//! Guarantees: the head passed every rule of [`crate::body`] before a [`StreamingResponse`]
//! exists; each piece of body is counted against the call's body cap before it is handed on, and
//! passing the cap is an error, never a truncation; every read waits at most until the call's
//! deadline, so a provider that stalls mid-stream ends in `timeout`; a break while reading is
//! `connection_lost`.

use bytes::Bytes;
use http::{HeaderMap, StatusCode};

use crate::EgressError;
use crate::pin::Deadline;

/// A response whose head passed the guard's rules and whose body is read piece by piece.
#[derive(Debug)]
pub struct StreamingResponse {
    status: StatusCode,
    headers: HeaderMap,
    body: BodyStream,
}

impl StreamingResponse {
    pub(crate) fn new(
        response: reqwest::Response,
        cap: u64,
        deadline: Deadline,
        host: String,
    ) -> Self {
        Self {
            status: response.status(),
            headers: response.headers().clone(),
            body: BodyStream {
                response,
                read: 0,
                cap,
                deadline,
                host,
                done: false,
            },
        }
    }

    /// The status code (any non-3xx status).
    #[must_use]
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The response headers.
    #[must_use]
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The body, to read piece by piece.
    #[must_use]
    pub fn into_body(self) -> BodyStream {
        self.body
    }
}

/// The body of a [`StreamingResponse`].
#[derive(Debug)]
pub struct BodyStream {
    response: reqwest::Response,
    /// Bytes handed on so far.
    read: u64,
    cap: u64,
    deadline: Deadline,
    host: String,
    /// Set after the end or an error: nothing more is read.
    done: bool,
}

impl BodyStream {
    /// The next piece of the body; `None` at its end.
    ///
    /// # Errors
    /// `too_large` once the body passes the cap (EGRESS-33), `timeout` when the call's deadline
    /// passes first (EGRESS-34), `connection_lost` when the connection breaks. After an error
    /// the stream is over: every later read returns `None`.
    pub async fn next_chunk(&mut self) -> Result<Option<Bytes>, EgressError> {
        if self.done {
            return Ok(None);
        }
        let result = self.read_one().await;
        if !matches!(result, Ok(Some(_))) {
            self.done = true;
        }
        result
    }

    async fn read_one(&mut self) -> Result<Option<Bytes>, EgressError> {
        let chunk = tokio::time::timeout_at(self.deadline.at, self.response.chunk())
            .await
            .map_err(|_| self.deadline.error())?
            .map_err(|e| EgressError::ConnectionLost {
                host: self.host.clone(),
                source: Box::new(e.without_url()),
            })?;
        let Some(chunk) = chunk else {
            return Ok(None);
        };
        self.read = self
            .read
            .saturating_add(u64::try_from(chunk.len()).unwrap_or(u64::MAX));
        if self.read > self.cap {
            return Err(EgressError::TooLarge { limit: self.cap });
        }
        Ok(Some(chunk))
    }

    /// Reads the rest of the body (at most `limit` bytes of it, the rest is dropped): for an
    /// error reply whose text is wanted whole.
    ///
    /// # Errors
    /// As [`BodyStream::next_chunk`].
    pub async fn collect_up_to(mut self, limit: usize) -> Result<Bytes, EgressError> {
        let mut out = Vec::new();
        while let Some(chunk) = self.next_chunk().await? {
            let room = limit.saturating_sub(out.len());
            out.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if out.len() >= limit {
                break;
            }
        }
        Ok(Bytes::from(out))
    }
}
