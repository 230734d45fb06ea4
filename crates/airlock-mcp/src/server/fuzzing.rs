//! Fuzzing entry point (cargo feature `fuzzing`; hidden, not an API): admission's one parse of
//! the body and its JSON-RPC checks ([`AdmittedRequest::parse`]) on arbitrary bytes, answered
//! as what the steps after admission or the client would read.

use axum::body::Bytes;
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use serde_json::Value;

use airlock_spec::ScopeId;

use super::request::{Admitted, AdmittedRequest};
use crate::host::Caller;

/// What admission made of a body.
#[derive(Debug)]
pub enum Answer {
    /// Handed on: the JSON-RPC method, id and params the later steps read.
    Admitted {
        /// Empty when there is none.
        method: String,
        /// `Null` when there is none.
        id: Value,
        /// `Null` when there are none.
        params: Value,
    },
    /// Refused before anything else ran.
    Refused {
        /// The HTTP status.
        status: u16,
        /// The `Content-Type` of the answer.
        content_type: Option<Vec<u8>>,
        /// The answer's body.
        body: Bytes,
    },
}

/// Parses `body` sent with `content_type` (left out when it is not a valid header value, as
/// no client could send it).
pub fn parse_request(content_type: &[u8], body: &[u8]) -> Answer {
    let (mut parts, ()) = Request::new(()).into_parts();
    if let Ok(value) = HeaderValue::from_bytes(content_type) {
        parts.headers.insert(header::CONTENT_TYPE, value);
    }
    let admitted = Admitted {
        scope: ScopeId::Gateway,
        caller: Caller {
            principal: "fuzz".to_owned(),
            groups: Vec::new(),
            ..Default::default()
        },
    };
    match AdmittedRequest::parse(parts, admitted, Bytes::copy_from_slice(body)) {
        Ok(request) => Answer::Admitted {
            method: request.method().to_owned(),
            id: request.id().clone(),
            params: request.params().clone(),
        },
        Err(refusal) => {
            let content_type = refusal
                .headers()
                .get(header::CONTENT_TYPE)
                .map(|v| v.as_bytes().to_vec());
            let status = refusal.status().as_u16();
            let body =
                futures::executor::block_on(axum::body::to_bytes(refusal.into_body(), usize::MAX))
                    .unwrap_or_default();
            Answer::Refused {
                status,
                content_type,
                body,
            }
        }
    }
}
