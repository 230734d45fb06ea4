//! The request as every step after admission sees it: the body parsed once, here, and shared.
//!
//! Guarantees: the body text is parsed exactly once per request ([`AdmittedRequest::parse`]).
//! A body declared `application/json` must also be a JSON-RPC message rmcp models, checked by
//! reading the parsed tree (neither a second parse of the text nor a copy of the tree): 400
//! with -32700 when it is not JSON, -32602 when it is a request we can route whose params do
//! not fit its method (a `tools/call` without a string `name` or with `arguments` that are not
//! an object included), -32600 otherwise. The steps after admission read only the parsed
//! message, the headers and who is calling; the body bytes are private to this module and
//! leave it only through [`AdmittedRequest::into_rmcp`], which ends the pipeline (rmcp's HTTP
//! service takes nothing but an HTTP body, so it parses those bytes itself).

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rmcp::model::ClientJsonRpcMessage;
use serde::Deserialize;
use serde::de::{MapAccess, Visitor};
use serde_json::{Map, Value, json};

use airlock_spec::ScopeId;

use super::convert::AWAIT_TOOL;
use crate::host::Caller;

/// The scope and caller of an admitted request, for the handler.
#[derive(Debug, Clone)]
pub(super) struct Admitted {
    pub(super) scope: ScopeId,
    pub(super) caller: Caller,
}

impl Admitted {
    /// This caller and what its request's client can take back, relaying `round` instead of
    /// the round it had (a retry's next round, an offer's read).
    pub(super) fn relaying(&self, round: Option<crate::rounds::Round>) -> Self {
        self.serving(self.caller.downstream.clone().with_round(round))
    }

    /// This caller, whose host calls serve a request whose client can take `downstream`.
    pub(super) fn serving(&self, downstream: crate::Downstream) -> Self {
        let mut caller = self.caller.clone();
        // The caller's own token goes with every call its request makes (CALL-14).
        let subject = self.caller.downstream.subject.clone();
        caller.downstream = downstream.signed_in_with(subject);
        Self {
            scope: self.scope.clone(),
            caller,
        }
    }
}

#[cfg(test)]
impl Admitted {
    /// alice on the gateway scope: the caller of the steps' unit tests.
    pub(super) fn alice() -> Self {
        Self {
            scope: ScopeId::Gateway,
            caller: Caller {
                principal: "alice".to_owned(),
                groups: Vec::new(),
                ..Default::default()
            },
        }
    }
}

/// A request that passed admission, with its body parsed.
pub(super) struct AdmittedRequest {
    parts: Parts,
    admitted: Admitted,
    /// The JSON-RPC message; `Null` when a body not declared JSON is not JSON either.
    message: Value,
    /// The message has the plain call's shape ([`plain_shape`]) and names each top-level
    /// member once (rmcp, which reads the bytes, refuses a member named twice).
    plain_shaped: bool,
    /// Only for rmcp, see [`Self::into_rmcp`].
    body: Bytes,
}

impl AdmittedRequest {
    /// Parses `body`, refusing a declared-JSON body that is not a JSON-RPC message.
    pub(super) fn parse(
        parts: Parts,
        admitted: Admitted,
        body: Bytes,
    ) -> Result<Self, Box<Response>> {
        let parsed = parse_body(&body);
        let parsed = parsed.map(|p| {
            let plain = !p.repeated && plain_shape(&p.message);
            (p.message, plain)
        });
        let (message, plain_shaped) = if declares_json(&parts.headers) {
            let parsed = parsed.map_err(|_| {
                rpc_error(&Value::Null, -32700, "Parse error: the body is not JSON")
            })?;
            check_json_rpc(&parsed.0, parsed.1)?;
            parsed
        } else {
            // rmcp refuses an undeclared body (415) once it gets there; until then the steps
            // read it as JSON if it is JSON.
            parsed.unwrap_or((Value::Null, false))
        };
        Ok(Self {
            parts,
            admitted,
            message,
            plain_shaped,
            body,
        })
    }

    pub(super) fn admitted(&self) -> &Admitted {
        &self.admitted
    }

    pub(super) fn headers(&self) -> &HeaderMap {
        &self.parts.headers
    }

    /// The revision the `MCP-Protocol-Version` header names, if it is sent.
    pub(super) fn protocol_version(&self) -> Option<&[u8]> {
        self.parts
            .headers
            .get("mcp-protocol-version")
            .map(|v| v.as_bytes())
    }

    /// The request's extensions (what the layers before admission put there).
    pub(super) fn extensions(&self) -> &axum::http::Extensions {
        &self.parts.extensions
    }

    /// Whether the message has the plain call's shape and names each top-level member once
    /// (read once, by admission).
    pub(super) fn is_plain_shaped(&self) -> bool {
        self.plain_shaped
    }

    /// The HTTP method (a session's GET stream and DELETE are admitted beside POST, MCP-98).
    pub(super) fn http_method(&self) -> &axum::http::Method {
        &self.parts.method
    }

    /// The message, when it is a JSON object.
    pub(super) fn message_object(&self) -> Option<&Map<String, Value>> {
        self.message.as_object()
    }

    /// The JSON-RPC method; empty when there is none.
    pub(super) fn method(&self) -> &str {
        self.message["method"].as_str().unwrap_or_default()
    }

    /// The JSON-RPC params; `Null` when there are none.
    pub(super) fn params(&self) -> &Value {
        &self.message["params"]
    }

    /// The JSON-RPC id; `Null` when there is none.
    pub(super) fn id(&self) -> &Value {
        &self.message["id"]
    }

    /// Who is calling and the parsed message, for a step that answers the request itself
    /// (`plain`); the body bytes are dropped.
    pub(super) fn into_message(self) -> (Admitted, Value) {
        (self.admitted, self.message)
    }

    /// The request for rmcp: the body as it came, and [`Admitted`] in its extensions, where
    /// the handler finds it.
    pub(super) fn into_rmcp(self) -> Request {
        let Self {
            mut parts,
            admitted,
            body,
            ..
        } = self;
        parts.extensions.insert(admitted);
        Request::from_parts(parts, Body::from(body))
    }
}

/// A parsed body, and whether its top-level object named a member twice.
struct Parsed {
    message: Value,
    repeated: bool,
}

/// The body as JSON, once. An object's top level is read member by member, so a repeated member
/// is seen (a tree keeps only the last one); anything else is read as a tree.
fn parse_body(body: &[u8]) -> serde_json::Result<Parsed> {
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        let message = serde_json::from_slice(body)?;
        return Ok(Parsed {
            message,
            repeated: false,
        });
    }
    let mut reader = serde_json::Deserializer::from_slice(body);
    let parsed = serde::Deserializer::deserialize_map(&mut reader, Members)?;
    reader.end()?;
    Ok(parsed)
}

/// Reads a top-level object into a tree, noting a member named twice.
struct Members;

impl<'de> Visitor<'de> for Members {
    type Value = Parsed;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Parsed, A::Error> {
        let mut members = Map::new();
        let mut repeated = false;
        while let Some(name) = map.next_key::<String>()? {
            let value = map.next_value::<Value>()?;
            repeated |= members.insert(name, value).is_some();
        }
        Ok(Parsed {
            message: Value::Object(members),
            repeated,
        })
    }
}

/// `plain`: the message is of the plain shape, named once (see [`AdmittedRequest::parse`]).
fn check_json_rpc(message: &Value, plain: bool) -> Result<(), Box<Response>> {
    if let Err(text) = check_call_params(message) {
        return Err(rpc_error(&message["id"], -32602, text));
    }
    // The plain call, the one a busy endpoint mostly sees, is known good without a typed copy.
    if plain || ClientJsonRpcMessage::deserialize(message).is_ok() {
        return Ok(());
    }
    let well_formed =
        message["jsonrpc"] == json!("2.0") && message.get("method").is_some_and(Value::is_string);
    // A request we can route whose params do not fit the method is invalid params; anything
    // else is not a JSON-RPC 2.0 message at all.
    let (code, text) = if well_formed {
        (-32602, "Invalid params for this method")
    } else {
        (-32600, "Invalid Request: not a JSON-RPC 2.0 message")
    };
    Err(rpc_error(&message["id"], code, text))
}

/// The params of a `tools/call`: a string `name`, and `arguments` absent or an object. rmcp's
/// model would take any other shape for a custom request and answer it "method not found";
/// the method is known, so its params are what is wrong (docs/rules.md MCP-8).
fn check_call_params(message: &Value) -> Result<(), &'static str> {
    if message["method"] != "tools/call" {
        return Ok(());
    }
    let params = &message["params"];
    if !params["name"].is_string() {
        return Err("Invalid params: tools/call needs `name`, the tool's name as a string");
    }
    match params.get("arguments") {
        None | Some(Value::Object(_)) => Ok(()),
        Some(_) => Err("Invalid params: tools/call `arguments` must be a JSON object"),
    }
}

/// Whether `message` is a `tools/call` of the plain shape: `jsonrpc` 2.0, a string or integer
/// `id`, no other members, and params that ask for nothing but the call. Such a message is a
/// JSON-RPC request rmcp models once its `name` and `arguments` are checked (admission checks
/// them), so admission need not read it into rmcp's types to know that.
fn plain_shape(message: &Value) -> bool {
    let Some(members) = message.as_object() else {
        return false;
    };
    let known = ["jsonrpc", "id", "method", "params"];
    let id = &message["id"];
    members.keys().all(|k| known.contains(&k.as_str()))
        && message["jsonrpc"] == "2.0"
        && message["method"] == "tools/call"
        && (id.is_string() || id.as_i64().is_some())
        && plain_params(&message["params"])
}

/// A string `name`, `arguments` absent or an object, and a `_meta` that asks for nothing to be relayed or negotiated,
/// and not the await tool.
fn plain_params(params: &Value) -> bool {
    let Some(params) = params.as_object() else {
        return false;
    };
    let known = ["name", "arguments", "_meta"];
    let named = params.get("name").and_then(Value::as_str);
    let arguments_fit = params.get("arguments").is_none_or(Value::is_object);
    if params.keys().any(|k| !known.contains(&k.as_str()))
        || named.is_none_or(|name| name == AWAIT_TOOL)
        || !arguments_fit
    {
        return false;
    }
    match params.get("_meta") {
        None => true,
        Some(Value::Object(meta)) => meta
            .keys()
            .all(|k| k != "progressToken" && !k.starts_with("io.modelcontextprotocol/")),
        Some(_) => false,
    }
}

fn rpc_error(id: &Value, code: i64, message: &str) -> Box<Response> {
    rpc_refusal(StatusCode::BAD_REQUEST, id, code, message)
}

/// The JSON-RPC error code of a 401: no usable bearer token (MCP-24).
pub(super) const UNAUTHORIZED: i64 = -32001;
/// The JSON-RPC error code of a 403: a host, origin or scope this request may not use (MCP-24).
pub(super) const FORBIDDEN: i64 = -32003;
/// The JSON-RPC error code of a 503: the body budget stayed spent too long (OPS-54).
pub(super) const BUSY: i64 = -32005;

/// A refusal as both HTTP status and JSON-RPC error body (`application/json`), so a client
/// that shows either tells its user why.
pub(super) fn rpc_refusal(
    status: StatusCode,
    id: &Value,
    code: i64,
    message: &str,
) -> Box<Response> {
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
    Box::new((status, axum::Json(body)).into_response())
}

pub(super) fn declares_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(content_type: &str, body: &'static str) -> Result<AdmittedRequest, Box<Response>> {
        let (parts, ()) = Request::builder()
            .header(header::CONTENT_TYPE, content_type)
            .body(())
            .unwrap()
            .into_parts();
        AdmittedRequest::parse(
            parts,
            Admitted::alice(),
            Bytes::from_static(body.as_bytes()),
        )
    }

    async fn error_code(refusal: Box<Response>) -> (StatusCode, Value) {
        let status = refusal.status();
        let body = axum::body::to_bytes(refusal.into_body(), usize::MAX)
            .await
            .unwrap();
        let body: Value = serde_json::from_slice(&body).unwrap();
        (status, body["error"]["code"].clone())
    }

    #[tokio::test]
    async fn the_steps_read_the_parsed_message_and_rmcp_gets_the_bytes_as_sent() {
        let body = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t"}}"#;
        let request = parse("application/json", body).ok().unwrap();
        assert_eq!(request.method(), "tools/call");
        assert_eq!(request.params()["name"], "t");
        assert_eq!(request.id(), &json!(7));
        let forwarded = request.into_rmcp();
        let principal = forwarded
            .extensions()
            .get::<Admitted>()
            .map(|a| a.caller.principal.clone());
        assert_eq!(principal.as_deref(), Some("alice"));
        let bytes = axum::body::to_bytes(forwarded.into_body(), usize::MAX)
            .await
            .unwrap();
        assert_eq!(bytes, body.as_bytes());
    }

    #[tokio::test]
    async fn a_declared_json_body_must_be_a_json_rpc_message() {
        let not_json = parse("application/json", "{").err().unwrap();
        assert_eq!(
            error_code(not_json).await,
            (StatusCode::BAD_REQUEST, json!(-32700))
        );
        let bad_params = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":7}"#;
        let bad_params = parse("application/json", bad_params).err().unwrap();
        assert_eq!(
            error_code(bad_params).await,
            (StatusCode::BAD_REQUEST, json!(-32602))
        );
        let not_rpc = parse("application/json", r#"{"id":1}"#).err().unwrap();
        assert_eq!(
            error_code(not_rpc).await,
            (StatusCode::BAD_REQUEST, json!(-32600))
        );
        let undeclared = parse("text/plain", "{").ok().unwrap();
        assert_eq!((undeclared.method(), undeclared.id()), ("", &Value::Null));
    }

    /// Admission trusts the plain shape instead of reading the message into rmcp's types: every
    /// message of that shape must be one rmcp reads as a `tools/call` request.
    #[test]
    fn every_plain_shaped_message_is_a_request_rmcp_models() {
        let shaped = [
            json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "echo"}}),
            json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "e", "arguments": {"a": [1, {"b": null}]}, "_meta": {}}}),
            json!({"jsonrpc": "2.0", "id": "x", "method": "tools/call",
                   "params": {"name": "e", "_meta": {"io.airlock/call_key": 5, "k": [1]}}}),
            json!({"jsonrpc": "2.0", "id": i64::MIN, "method": "tools/call", "params": {"name": ""}}),
        ];
        for message in shaped {
            assert!(plain_shape(&message), "{message}");
            let typed = rmcp::model::ClientJsonRpcMessage::deserialize(&message);
            assert!(
                matches!(&typed, Ok(rmcp::model::ClientJsonRpcMessage::Request(r))
                    if matches!(r.request, rmcp::model::ClientRequest::CallToolRequest(_))),
                "{message}: {typed:?}"
            );
        }
        let not_shaped = [
            json!({"jsonrpc": "2.0", "id": 1.5, "method": "tools/call", "params": {"name": "e"}}),
            json!({"jsonrpc": "2.0", "id": u64::MAX, "method": "tools/call", "params": {"name": "e"}}),
            json!({"jsonrpc": "2.0", "id": null, "method": "tools/call", "params": {"name": "e"}}),
            json!({"jsonrpc": "1.0", "id": 1, "method": "tools/call", "params": {"name": "e"}}),
            json!({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "e"}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": 1}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "e", "arguments": []}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "e", "_meta": 1}}),
        ];
        for message in not_shaped {
            assert!(!plain_shape(&message), "{message}");
        }
    }

    /// rmcp refuses a message whose top level names a member twice; admission notes it (and
    /// keeps the last, as a tree does) so that only rmcp answers such a message.
    #[test]
    fn a_top_level_member_named_twice_is_noted() {
        let parsed = parse_body(br#" {"a":1,"b":[],"a":2}"#).unwrap();
        assert!(parsed.repeated);
        assert_eq!(parsed.message, json!({"a": 2, "b": []}));
        let nested = parse_body(br#"{"a":{"b":1,"b":2}}"#).unwrap();
        assert!(!nested.repeated, "only the top level is rmcp's to refuse");
        assert_eq!(nested.message, json!({"a": {"b": 2}}));
        for other in [&b"[1,2]"[..], b"3", b"\"x\""] {
            let parsed = parse_body(other).unwrap();
            assert!(!parsed.repeated);
            assert_eq!(
                parsed.message,
                serde_json::from_slice::<Value>(other).unwrap()
            );
        }
        for bad in [&b"{\"a\":1} x"[..], b"{\"a\":", b""] {
            assert!(parse_body(bad).is_err());
        }
    }
}
