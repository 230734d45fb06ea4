//! What a caller asks a run to do: the body of `POST /v1/agents/{name}/run` and the first frame
//! of the WebSocket, `{input, session_id?, context?, connections?}`, parsed once here
//! (docs/rules.md AGENT-41).
//!
//! Guarantees: a body is refused with a precise client error, never a panic — 415 a body that
//! is not declared JSON, 400 one that is not a run request (naming the field, never echoing a
//! value); a connection's credential goes straight into a [`SecretString`] and appears in no
//! error, log or `Debug` output (AGENT-42).

use std::collections::BTreeMap;
use std::fmt;

use airlock_ledger::SessionId;
use axum::http::{HeaderMap, StatusCode, header};
use secrecy::SecretString;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use airlock_runtime::agent::RunCredential;

use crate::http::error::ApiError;

/// The largest run request read: the input, the context and the connections are small; this
/// bounds what one request can pin before it is parsed.
pub(crate) const MAX_BODY_BYTES: usize = 1024 * 1024;

/// A parsed run request.
pub(crate) struct RunBody {
    /// What the person (or the calling system) asks the agent.
    pub(crate) input: String,
    /// Continue this session; `None`: a new one.
    pub(crate) session_id: Option<SessionId>,
    /// Caller-supplied facts for the run, as an object.
    pub(crate) context: Option<Map<String, Value>>,
    /// Tenant connections for this run only, by name.
    pub(crate) connections: BTreeMap<String, Connection>,
}

/// A tenant connection supplied for one run: where it lives and its credential.
pub(crate) struct Connection {
    /// The connection's base URL.
    pub(crate) base_url: url::Url,
    /// Its credential, held in memory for the run only.
    pub(crate) credential: RunCredential,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("base_url", &self.base_url.as_str())
            .field("credential", &"[redacted]")
            .finish()
    }
}

/// The wire form; [`RunBody`] is what the rest of the server sees.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunRequestBody {
    input: String,
    session_id: Option<String>,
    context: Option<Value>,
    #[serde(default)]
    connections: BTreeMap<String, ConnectionBody>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConnectionBody {
    base_url: String,
    /// Absent for an API without auth; a string, or `{username, password}` for `basic`: the
    /// shapes `airlock.toml`'s credentials take (docs/rules.md AGENT-65).
    #[serde(default)]
    credential: Option<CredentialBody>,
}

/// A credential in a request: a string, or a mapping with `username` and `password`.
#[derive(Deserialize)]
#[serde(untagged)]
pub(crate) enum CredentialBody {
    Token(#[serde(deserialize_with = "secret")] SecretString),
    Basic(BasicBody),
}

/// A `basic` credential's two parts.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BasicBody {
    #[serde(deserialize_with = "secret")]
    username: SecretString,
    #[serde(deserialize_with = "secret")]
    password: SecretString,
}

fn secret<'de, D: Deserializer<'de>>(deserializer: D) -> Result<SecretString, D::Error> {
    String::deserialize(deserializer).map(SecretString::from)
}

/// A `POST …/run` body: declared JSON (415 otherwise), then [`parse_json`].
pub(crate) fn parse_http(headers: &HeaderMap, bytes: &[u8]) -> Result<RunBody, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let essence = content_type.split(';').next().unwrap_or("").trim();
    if !essence.eq_ignore_ascii_case("application/json") {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "a run request is JSON: send `Content-Type: application/json`",
        ));
    }
    parse_json(bytes)
}

/// A run request as JSON text, checked field by field (400 naming what is wrong).
pub(crate) fn parse_json(bytes: &[u8]) -> Result<RunBody, ApiError> {
    let body: RunRequestBody = serde_json::from_slice(bytes).map_err(|e| bad(&describe(&e)))?;
    if body.input.trim().is_empty() {
        return Err(bad("`input` is empty: say what the agent should do"));
    }
    let session_id = body
        .session_id
        .map(|id| {
            id.parse::<SessionId>()
                .map_err(|_| bad("`session_id` is not a session id (a UUID a run response gave)"))
        })
        .transpose()?;
    let context = match body.context {
        None | Some(Value::Null) => None,
        Some(Value::Object(map)) => Some(map),
        Some(_) => return Err(bad("`context` must be a JSON object")),
    };
    let connections = body
        .connections
        .into_iter()
        .map(|(name, c)| connection(&name, c).map(|c| (name, c)))
        .collect::<Result<_, _>>()?;
    Ok(RunBody {
        input: body.input,
        session_id,
        context,
        connections,
    })
}

fn connection(name: &str, body: ConnectionBody) -> Result<Connection, ApiError> {
    let base_url = url::Url::parse(&body.base_url).map_err(|e| {
        bad(&format!(
            "`connections.{name}.base_url` is not a URL ({e}); write it as https://host/path"
        ))
    })?;
    if !matches!(base_url.scheme(), "http" | "https") {
        return Err(bad(&format!(
            "`connections.{name}.base_url` must be an http or https URL"
        )));
    }
    let credential = run_credential(body.credential, &format!("connections.{name}.credential"))?;
    Ok(Connection {
        base_url,
        credential,
    })
}

/// A credential as a request gives it (a string, or `{username, password}`), refused when
/// empty; `field` names it in the error (never its value).
pub(crate) fn run_credential(
    body: Option<CredentialBody>,
    field: &str,
) -> Result<RunCredential, ApiError> {
    let empty = |secret: &SecretString| secrecy::ExposeSecret::expose_secret(secret).is_empty();
    Ok(match body {
        None => RunCredential::None,
        Some(CredentialBody::Token(token)) if empty(&token) => {
            return Err(bad(&format!("`{field}` is empty")));
        }
        Some(CredentialBody::Token(token)) => RunCredential::Token(token),
        Some(CredentialBody::Basic(basic)) if empty(&basic.username) || empty(&basic.password) => {
            return Err(bad(&format!(
                "`{field}` needs a non-empty `username` and `password`"
            )));
        }
        Some(CredentialBody::Basic(basic)) => RunCredential::Basic {
            username: basic.username,
            password: basic.password,
        },
    })
}

fn bad(message: &str) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "bad_body", message)
}

/// What is wrong with the body, without the offending value: serde's "invalid type: string
/// \"…\", expected …" would repeat whatever the caller put there — a credential, perhaps —
/// into an error (AGENT-42).
fn describe(error: &serde_json::Error) -> String {
    let at = format!("line {} column {}", error.line(), error.column());
    let text = error.to_string();
    let what = match error.classify() {
        serde_json::error::Category::Data if text.contains("enum CredentialBody") => format!(
            "invalid type at {at}: a credential is a string, or a mapping with `username` and `password`"
        ),
        serde_json::error::Category::Data => match text.rsplit_once(", expected ") {
            Some((kind, expected)) => {
                let kind = kind.split(':').next().unwrap_or(kind);
                let expected = expected
                    .rsplit_once(" at line ")
                    .map_or(expected, |(e, _)| e);
                format!("{kind} at {at}: expected {expected}")
            }
            // "missing field `input`", "unknown field `x`, expected one of …" name no value.
            None => text,
        },
        serde_json::error::Category::Syntax
        | serde_json::error::Category::Eof
        | serde_json::error::Category::Io => format!("not valid JSON ({text})"),
    };
    format!(
        "the body is not a run request ({{input, session_id?, context?, connections?}}): {what}"
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parsed(body: &Value) -> Result<RunBody, ApiError> {
        parse_json(body.to_string().as_bytes())
    }

    fn message(error: &ApiError) -> String {
        format!("{error:?}")
    }

    /// AGENT-65: a supplied credential takes `airlock.toml`'s shapes — none, one value, or a
    /// `basic` mapping — and an incomplete mapping is refused without repeating it.
    #[test]
    fn a_supplied_credential_takes_every_shape_of_the_toml() {
        let shape = |credential: Value| {
            let mut connection = json!({"base_url": "https://crm.example.com"});
            if !credential.is_null() {
                connection["credential"] = credential;
            }
            parsed(&json!({"input": "x", "connections": {"crm": connection}}))
                .map(|mut b| b.connections.remove("crm").unwrap().credential)
        };
        assert!(matches!(shape(Value::Null), Ok(RunCredential::None)));
        assert!(matches!(shape(json!("t0k")), Ok(RunCredential::Token(_))));
        let basic = shape(json!({"username": "ada", "password": "s3cret-pw"}));
        assert!(matches!(basic, Ok(RunCredential::Basic { .. })));
        let half = shape(json!({"username": "ada", "password": ""}))
            .err()
            .unwrap();
        assert!(
            message(&half).contains("`username` and `password`"),
            "{half:?}"
        );
        let odd = shape(json!({"user": "ada", "pass": "s3cret-pw"}))
            .err()
            .unwrap();
        assert!(!message(&odd).contains("s3cret-pw"), "{odd:?}");
    }

    #[test]
    fn a_full_body_parses() {
        let session = SessionId::new();
        let body = parsed(&json!({
            "input": "hello",
            "session_id": session.to_string(),
            "context": {"customer": "30-1"},
            "connections": {"erp_main": {"base_url": "https://erp.example.com/api", "credential": "t0k"}},
        }))
        .unwrap();
        assert_eq!(body.input, "hello");
        assert_eq!(body.session_id, Some(session));
        assert_eq!(body.context.unwrap()["customer"], "30-1");
        let erp = &body.connections["erp_main"];
        assert_eq!(erp.base_url.as_str(), "https://erp.example.com/api");
        assert!(!format!("{erp:?}").contains("t0k"));
    }

    #[test]
    fn bad_bodies_name_the_field() {
        let cases = [
            (json!({}), "missing field `input`"),
            (json!({"input": ""}), "`input` is empty"),
            (json!({"input": "x", "extra": 1}), "unknown field `extra`"),
            (json!({"input": "x", "session_id": "s1"}), "`session_id`"),
            (json!({"input": "x", "context": [1]}), "`context` must be"),
            (
                json!({"input": "x", "connections": {"c": {"base_url": "nope", "credential": "k"}}}),
                "`connections.c.base_url` is not a URL",
            ),
            (
                json!({"input": "x", "connections": {"c": {"base_url": "ftp://h/", "credential": "k"}}}),
                "http or https",
            ),
            (
                json!({"input": "x", "connections": {"c": {"base_url": "https://h/", "credential": ""}}}),
                "`connections.c.credential` is empty",
            ),
        ];
        for (body, expected) in cases {
            let error = parsed(&body).err().unwrap();
            assert!(message(&error).contains(expected), "{body}: {error:?}");
            assert!(message(&error).contains("400"), "{error:?}");
        }
        let error = parse_json(b"{\"input\": ").err().unwrap();
        assert!(message(&error).contains("not valid JSON"), "{error:?}");
    }

    #[test]
    fn no_error_repeats_a_credential() {
        // A credential in the wrong place, or of the wrong type: serde would quote it.
        let bodies = [
            json!({"input": "x", "connections": {"c": "s3cr3t-value"}}),
            json!({"input": "x", "connections": {"c": {"base_url": "https://h/", "credential": 987654321}}}),
            json!({"input": "s3cr3t-value", "session_id": 987654321}),
        ];
        for body in bodies {
            let error = parsed(&body).err().unwrap();
            let text = message(&error);
            assert!(
                !text.contains("s3cr3t") && !text.contains("987654321"),
                "{text}"
            );
            assert!(text.contains("invalid type at line 1"), "{text}");
        }
    }

    #[test]
    fn only_json_is_accepted_over_http() {
        let mut headers = HeaderMap::new();
        let body = br#"{"input": "hi"}"#;
        let error = parse_http(&headers, body).err().unwrap();
        assert!(message(&error).contains("415"), "{error:?}");
        headers.insert(header::CONTENT_TYPE, "text/plain".parse().unwrap());
        assert!(parse_http(&headers, body).is_err());
        headers.insert(
            header::CONTENT_TYPE,
            "application/json; charset=utf-8".parse().unwrap(),
        );
        assert_eq!(parse_http(&headers, body).unwrap().input, "hi");
    }
}
