//! Sealed session ids for session-era clients that take requests (docs/rules.md MCP-95).
//!
//! Guarantees:
//! - A session-era `initialize` is answered with an `Mcp-Session-Id` that is what its client
//!   declared among `elicitation`, `sampling` and `roots`, sealed (XChaCha20-Poly1305, under the
//!   request-state key, bound to a purpose of its own so it never opens as a request state nor
//!   the reverse) with the principal and the endpoint scope, under a random nonce that names
//!   the session. The endpoint keeps nothing of it: any replica opens the id.
//! - A later request's id is read only when it opens under the current key or a retired one and
//!   names the same principal and scope; a POST carrying anything else — another caller's id,
//!   a tampered one, one sealed under a key since dropped — is 404 (but an `initialize`, which
//!   starts a new session), as MCP says of a session the server does not know.
//! - The id has no expiry: it holds nothing but what the client itself declared, and a key
//!   rotation ends it once the retired key is dropped.

use axum::http::HeaderValue;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::request::{Admitted, AdmittedRequest, rpc_refusal};
use super::request_state::RequestStates;
use crate::rounds;

/// The format's prefix; an id without it is not one of airlock's.
const PREFIX: &str = "als1.";
/// Bound as associated data: only a session id opens as one.
const PURPOSE: &[u8] = b"airlock MCP session id v1";
/// The header carrying it.
pub(super) const HEADER: &str = "mcp-session-id";

/// What a session id holds.
#[derive(Serialize, Deserialize)]
struct Sealed {
    principal: String,
    scope: String,
    /// The client's declared `elicitation`, `sampling` and `roots`.
    declared: Map<String, Value>,
}

/// The session id to answer `initialize` with, for `admitted` declaring `capabilities`.
pub(super) fn issue(
    states: &RequestStates,
    admitted: &Admitted,
    capabilities: &Value,
) -> Option<HeaderValue> {
    let none = Map::new();
    let sealed = Sealed {
        principal: admitted.caller.principal.clone(),
        scope: admitted.scope.to_string(),
        declared: trimmed(rounds::needed(capabilities.as_object().unwrap_or(&none))),
    };
    // A struct of strings and JSON objects always serializes.
    let plain = serde_json::to_vec(&sealed).ok()?;
    HeaderValue::from_str(&states.seal_bytes(PREFIX, PURPOSE, &plain)).ok()
}

/// The session `request` carries, opened once for every step after admission: `Ok(None)`
/// without an id (or without sealing, `states` `None`); `Err` — 404, as MCP says of a session
/// the server does not know, so the client starts a new one — for a POST other than
/// `initialize` (which starts one) whose id does not open for its caller. A GET's unknown id is
/// `session_watch`'s to answer.
pub(super) fn carried(
    states: Option<&RequestStates>,
    request: &AdmittedRequest,
) -> Result<Option<Session>, Box<axum::response::Response>> {
    let Some(states) = states else {
        return Ok(None);
    };
    if !request.headers().contains_key(HEADER) {
        return Ok(None);
    }
    let session = opened(states, request);
    let post = *request.http_method() == axum::http::Method::POST;
    if session.is_some() || !post || request.method() == "initialize" {
        return Ok(session);
    }
    let gone = "Not Found: this Mcp-Session-Id is not one this endpoint issued to this caller here; initialize again";
    Err(rpc_refusal(
        axum::http::StatusCode::NOT_FOUND,
        request.id(),
        -32001,
        gone,
    ))
}

/// What is kept of a declared capability: the sub-keys MCP defines for it, each an empty
/// object or a flag, so a client cannot make its session id large.
fn trimmed(declared: Map<String, Value>) -> Map<String, Value> {
    const KNOWN: [(&str, &[&str]); 3] = [
        ("elicitation", &["form", "url"]),
        ("sampling", &["tools", "context"]),
        ("roots", &["listChanged"]),
    ];
    declared
        .into_iter()
        .map(|(name, value)| {
            let keys = KNOWN
                .iter()
                .find(|(n, _)| *n == name)
                .map_or(&[][..], |k| k.1);
            let kept = keys
                .iter()
                .filter_map(|key| {
                    let small = match value.get(*key)? {
                        Value::Bool(flag) => Value::Bool(*flag),
                        _ => Value::Object(Map::new()),
                    };
                    Some(((*key).to_owned(), small))
                })
                .collect();
            (name, Value::Object(kept))
        })
        .collect()
}

/// A session id this endpoint sealed, opened.
pub(super) struct Session {
    /// The id's own nonce, in hex: what names the session in this process (MCP-98).
    pub(super) key: String,
    /// What the client declared at `initialize` among `elicitation`, `sampling` and `roots`.
    pub(super) declared: Map<String, Value>,
}

/// The session `request` carries, when its id is one this endpoint sealed for the same caller
/// and scope.
pub(super) fn opened(states: &RequestStates, request: &AdmittedRequest) -> Option<Session> {
    let id = request.headers().get(HEADER)?.to_str().ok()?;
    let (plain, nonce) = states.open_bytes(PREFIX, PURPOSE, id)?;
    let sealed: Sealed = serde_json::from_slice(&plain).ok()?;
    let admitted = request.admitted();
    let same =
        sealed.principal == admitted.caller.principal && sealed.scope == admitted.scope.to_string();
    same.then(|| Session {
        key: hex::encode(nonce.as_slice()),
        declared: sealed.declared,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::body::Bytes;
    use axum::extract::Request;
    use serde_json::json;

    use super::*;
    use crate::server::request_state::RequestStateKey;

    fn new_states() -> RequestStates {
        RequestStates::new(RequestStateKey::generate(), Duration::from_secs(60))
    }

    fn declared(states: &RequestStates, request: &AdmittedRequest) -> Option<Map<String, Value>> {
        opened(states, request).map(|session| session.declared)
    }

    fn carrying(id: Option<&HeaderValue>, admitted: Admitted) -> AdmittedRequest {
        let mut request = Request::builder().header("content-type", "application/json");
        if let Some(id) = id {
            request = request.header(HEADER, id);
        }
        let (parts, ()) = request.body(()).unwrap().into_parts();
        let body = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
        AdmittedRequest::parse(parts, admitted, body).ok().unwrap()
    }

    /// MCP-95: the id carries what the client declared, for its own caller and scope only.
    #[test]
    fn mcp_95_a_session_id_holds_the_declared_capabilities_for_its_caller() {
        let states = new_states();
        let alice = Admitted::alice();
        let caps = json!({"elicitation": {"form": {}}, "sampling": {}, "experimental": {}});
        let id = issue(&states, &alice, &caps).unwrap();
        let got = declared(&states, &carrying(Some(&id), alice.clone())).unwrap();
        assert_eq!(
            Value::Object(got),
            json!({"elicitation": {"form": {}}, "sampling": {}})
        );
        // Every client gets one; two are never the same session.
        let plain = issue(&states, &alice, &json!({"experimental": {}})).unwrap();
        let opened = |id| opened(&states, &carrying(Some(id), alice.clone())).unwrap();
        assert!(opened(&plain).declared.is_empty());
        assert_ne!(opened(&plain).key, opened(&id).key);
        let mut bob = alice.clone();
        bob.caller.principal = "bob".into();
        assert!(declared(&states, &carrying(Some(&id), bob)).is_none());
        let mut elsewhere = alice.clone();
        elsewhere.scope = airlock_spec::ScopeId::Agent("a".into());
        assert!(declared(&states, &carrying(Some(&id), elsewhere)).is_none());
        assert!(declared(&new_states(), &carrying(Some(&id), alice.clone())).is_none());
        let mut text = id.to_str().unwrap().as_bytes().to_vec();
        let middle = text.len() / 2;
        text[middle] = if text[middle] == b'A' { b'B' } else { b'A' };
        let text = String::from_utf8(text).unwrap();
        let tampered = HeaderValue::from_str(&text).unwrap();
        assert!(declared(&states, &carrying(Some(&tampered), alice.clone())).is_none());
        assert!(declared(&states, &carrying(None, alice.clone())).is_none());
        // What the client declared is kept small: MCP's sub-keys, emptied.
        let padded = json!({"elicitation": {"form": {"x": "y".repeat(4096)}, "extra": {}},
            "roots": {"listChanged": true, "more": 1}});
        let small = issue(&states, &alice, &padded).unwrap();
        assert!(small.len() < 400, "{}", small.len());
        let kept = declared(&states, &carrying(Some(&small), alice.clone())).unwrap();
        assert_eq!(
            Value::Object(kept),
            json!({"elicitation": {"form": {}}, "roots": {"listChanged": true}})
        );
        // A session id never opens as a request state.
        let refused = states.open(id.to_str().unwrap(), std::time::SystemTime::now());
        assert!(refused.is_err());
    }
}
