//! What a caller sends and gets back through the guard.
//!
//! Guarantees: a caller cannot set `Host` (the pinned connection would be unaffected, but virtual
//! hosting would route on it), framing or hop-by-hop headers, or `Accept-Encoding` (the guard
//! sends `identity`), and cannot use `CONNECT` or `TRACE`. A request carrying an
//! `Authorization`, `Proxy-Authorization` or `Cookie` header counts as carrying a credential
//! even if the caller forgot to say so.

use std::borrow::Cow;

use bytes::Bytes;
use http::header::{AUTHORIZATION, COOKIE, PROXY_AUTHORIZATION};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};

use crate::EgressError;

/// Headers the guard owns; a caller setting one is refused.
const RESERVED_HEADERS: &[&str] = &[
    "host",
    "connection",
    "content-length",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "keep-alive",
    "proxy-connection",
    "accept-encoding",
];

/// One outbound HTTP request.
#[derive(Debug, Clone)]
pub struct Request {
    pub(crate) method: Method,
    pub(crate) url: String,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Option<Bytes>,
    pub(crate) credential: bool,
}

impl Request {
    /// A request with `method` to `url` (checked when sent, not here).
    #[must_use]
    pub fn new(method: Method, url: impl Into<String>) -> Self {
        Self {
            method,
            url: url.into(),
            headers: HeaderMap::new(),
            body: None,
            credential: false,
        }
    }

    /// A `GET` request.
    #[must_use]
    pub fn get(url: impl Into<String>) -> Self {
        Self::new(Method::GET, url)
    }

    /// A `POST` request.
    #[must_use]
    pub fn post(url: impl Into<String>) -> Self {
        Self::new(Method::POST, url)
    }

    /// Adds a header (appending to any earlier value of the same name).
    #[must_use]
    pub fn header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.append(name, value);
        self
    }

    /// Sets the body.
    #[must_use]
    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = Some(body.into());
        self
    }

    /// Marks the request as carrying a credential somewhere the guard cannot see (a query key,
    /// a custom header): it will not be sent over plain `http` except to an operator-allowed
    /// loopback address.
    #[must_use]
    pub fn with_credential(mut self) -> Self {
        self.credential = true;
        self
    }

    /// True when the request carries a credential, declared or in a well-known header.
    #[must_use]
    pub fn carries_credential(&self) -> bool {
        self.credential
            || [AUTHORIZATION, PROXY_AUTHORIZATION, COOKIE]
                .iter()
                .any(|h| self.headers.contains_key(h))
    }

    /// Refuses methods and headers the guard does not let a caller choose.
    pub(crate) fn check(&self) -> Result<(), EgressError> {
        if self.method == Method::CONNECT || self.method == Method::TRACE {
            return Err(EgressError::request(format!(
                "method {} is not allowed",
                self.method
            )));
        }
        if let Some(name) = self.headers.keys().find(|k| {
            RESERVED_HEADERS.contains(&k.as_str())
                || k.as_str().starts_with("proxy-") && *k != PROXY_AUTHORIZATION
        }) {
            return Err(EgressError::request(format!(
                "header {name} is set by the guard, not the caller"
            )));
        }
        Ok(())
    }
}

/// A response that passed every rule: not a redirect, identity-encoded, text, within the cap.
#[derive(Debug, Clone)]
pub struct Response {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

impl Response {
    /// The status code (any non-3xx status; see [`Response::error_for_status`]).
    #[must_use]
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The response headers.
    #[must_use]
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The whole body (at most the policy's cap).
    #[must_use]
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// The body as text (invalid UTF-8 replaced; a body without a content type is always UTF-8).
    #[must_use]
    pub fn text(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.body)
    }

    /// Turns a 4xx or 5xx status into [`EgressError::HttpStatus`] ("the server answered 401").
    ///
    /// # Errors
    /// [`EgressError::HttpStatus`] for a client or server error status.
    pub fn error_for_status(self) -> Result<Self, EgressError> {
        if self.status.is_client_error() || self.status.is_server_error() {
            Err(EgressError::HttpStatus {
                status: self.status.as_u16(),
            })
        } else {
            Ok(self)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_host_connect_and_framing() {
        let host = Request::get("https://a.com/").header(
            http::header::HOST,
            HeaderValue::from_static("169.254.169.254"),
        );
        assert_eq!(host.check().unwrap_err().kind(), "blocked_request");
        assert!(
            Request::new(Method::CONNECT, "https://a.com/")
                .check()
                .is_err()
        );
        let te = Request::get("https://a.com/").header(
            http::header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        assert!(te.check().is_err());
        let ok = Request::get("https://a.com/")
            .header(AUTHORIZATION, HeaderValue::from_static("Bearer x"));
        assert!(ok.check().is_ok() && ok.carries_credential());
    }
}
