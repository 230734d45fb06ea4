//! The token endpoint: one form POST through the egress guard with the client's
//! authentication, and its answer read into [`Tokens`] or an [`OAuthError`].
//!
//! Guarantees: the request is marked as carrying a credential, so the guard never sends it
//! over plain `http` (but to an operator-allowed loopback address); the Basic header is marked
//! sensitive; the answer is read as a JSON value field by field, so no parser message can
//! repeat a token; the server's `error` and `error_description` are kept only cleaned: at most
//! [`MAX_ERROR_TEXT`] characters, no control characters, and every secret value the request
//! carried replaced by `[redacted]` (a server echoing a code back cannot leak it).

use std::time::Duration;

use airlock_egress::{GuardedClient, Request};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::HeaderValue;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use secrecy::{ExposeSecret as _, SecretString};
use serde_json::{Map, Value};
use url::Url;
use url::form_urlencoded::{Serializer, byte_serialize};

use super::{OAuthError, Tokens};

/// The longest `error` or `error_description` kept from a server, in characters.
pub(super) const MAX_ERROR_TEXT: usize = 300;

/// Form fields whose values are secrets: scrubbed from any text the server answers with.
const SECRET_FIELDS: &[&str] = &[
    "code",
    "code_verifier",
    "refresh_token",
    "subject_token",
    "actor_token",
    "assertion",
];

/// Who the client is, and its secret when it is a confidential client.
#[derive(Clone, Copy)]
pub(super) struct Client<'a> {
    pub(super) id: &'a str,
    pub(super) secret: Option<&'a SecretString>,
}

/// POSTs `form` to `endpoint` as the client and reads the token response.
pub(super) async fn post(
    guard: &GuardedClient,
    endpoint: &Url,
    client: Client<'_>,
    form: &[(&str, &str)],
) -> Result<Tokens, OAuthError> {
    let mut request = Request::post(endpoint.as_str())
        .header(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        )
        .header(ACCEPT, HeaderValue::from_static("application/json"));
    if let Some(secret) = client.secret {
        request = request.header(AUTHORIZATION, basic(client.id, secret));
    }
    let request = request.body(form_body(&client, form)).with_credential();
    let response = guard.send(request).await.map_err(OAuthError::Unreachable)?;
    let host = host(endpoint);
    if response.status().is_success() {
        return tokens(response.body(), &host);
    }
    let mut secrets: Vec<&str> = form
        .iter()
        .filter(|(name, _)| SECRET_FIELDS.contains(name))
        .map(|(_, value)| *value)
        .collect();
    if let Some(secret) = client.secret {
        secrets.push(secret.expose_secret());
    }
    Err(refusal(
        response.status().as_u16(),
        response.body(),
        host,
        &secrets,
    ))
}

/// The form, with the client's id when it is public (RFC 6749 §2.3.1 does not apply to it).
/// Built apart from the request's future: the serializer is not `Send`.
fn form_body(client: &Client<'_>, form: &[(&str, &str)]) -> String {
    let mut body = Serializer::new(String::new());
    body.extend_pairs(form.iter().copied());
    if client.secret.is_none() {
        body.append_pair("client_id", client.id);
    }
    body.finish()
}

/// `Basic base64(urlencode(id):urlencode(secret))`, marked sensitive so no `Debug` shows it.
fn basic(id: &str, secret: &SecretString) -> HeaderValue {
    let encode = |s: &str| byte_serialize(s.as_bytes()).collect::<String>();
    let pair = format!("{}:{}", encode(id), encode(secret.expose_secret()));
    let mut value = HeaderValue::from_str(&format!("Basic {}", STANDARD.encode(pair)))
        .expect("base64 is a valid header value");
    value.set_sensitive(true);
    value
}

/// The endpoint's host (and port when one is written), for messages: never the whole URL.
pub(super) fn host(url: &Url) -> String {
    let name = url.host_str().unwrap_or("?");
    url.port()
        .map_or_else(|| name.to_owned(), |port| format!("{name}:{port}"))
}

/// A successful answer read as RFC 6749 §5.1's token response.
fn tokens(body: &[u8], host: &str) -> Result<Tokens, OAuthError> {
    let malformed = |reason| OAuthError::Malformed {
        host: host.to_owned(),
        reason,
    };
    let value: Value = serde_json::from_slice(body).map_err(|_| malformed("not JSON"))?;
    let fields = value
        .as_object()
        .ok_or_else(|| malformed("not a JSON object"))?;
    let access = text(fields, "access_token")
        .filter(|t| !t.is_empty())
        .ok_or_else(|| malformed("no access_token"))?;
    // Only a bearer token can be sent as one; a DPoP or MAC token would be refused upstream.
    // An absent token_type is tolerated (some servers omit it), a different one is not.
    if fields.contains_key("token_type")
        && !text(fields, "token_type").is_some_and(|t| t.eq_ignore_ascii_case("bearer"))
    {
        return Err(malformed("token_type is not Bearer"));
    }
    let expires_in = match fields.get("expires_in") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => Some(n.as_u64().ok_or_else(|| malformed("bad expires_in"))?),
        // Some servers (older Entra endpoints) send the number as a string.
        Some(Value::String(s)) => Some(s.parse().map_err(|_| malformed("bad expires_in"))?),
        Some(_) => return Err(malformed("bad expires_in")),
    };
    Ok(Tokens {
        access: SecretString::from(access),
        refresh: text(fields, "refresh_token").map(SecretString::from),
        expires_in: expires_in.map(Duration::from_secs),
        scope: text(fields, "scope").map(str::to_owned),
        issued_token_type: text(fields, "issued_token_type").map(str::to_owned),
    })
}

fn text<'a>(fields: &'a Map<String, Value>, name: &str) -> Option<&'a str> {
    fields.get(name).and_then(Value::as_str)
}

/// A 4xx/5xx answer: an OAuth error when the body says one (RFC 6749 §5.2), else the status.
fn refusal(status: u16, body: &[u8], host: String, secrets: &[&str]) -> OAuthError {
    let value: Option<Value> = serde_json::from_slice(body).ok();
    let error = value.as_ref().and_then(|v| v.get("error")?.as_str());
    let Some(error) = error else {
        return OAuthError::Status { host, status };
    };
    let description = value
        .as_ref()
        .and_then(|v| v.get("error_description")?.as_str())
        .map(|d| clean(d, secrets))
        .filter(|d| !d.is_empty());
    OAuthError::Refused {
        host,
        status,
        error: clean(error, secrets),
        description,
    }
}

/// `text` without the secrets, without control characters, at most [`MAX_ERROR_TEXT`] long.
fn clean(text: &str, secrets: &[&str]) -> String {
    let mut text = text.to_owned();
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        text = text.replace(secret, "[redacted]");
    }
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_ERROR_TEXT)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_response_is_read_field_by_field() {
        let body = br#"{"access_token":"at","token_type":"bearer","expires_in":"60","refresh_token":"rt","scope":"a b"}"#;
        let read = tokens(body, "h").unwrap();
        assert_eq!(read.access.expose_secret(), "at");
        assert_eq!(read.refresh.unwrap().expose_secret(), "rt");
        assert_eq!(read.expires_in, Some(Duration::from_secs(60)));
        assert_eq!(read.scope.as_deref(), Some("a b"));
        for (body, reason) in [
            (&b"<html>"[..], "not JSON"),
            (br#"{"token_type":"Bearer"}"#, "no access_token"),
            (
                br#"{"access_token":"x","token_type":"DPoP"}"#,
                "token_type is not Bearer",
            ),
            (br#"{"access_token":"x","expires_in":-1}"#, "bad expires_in"),
        ] {
            let err = tokens(body, "h").unwrap_err();
            assert!(matches!(err, OAuthError::Malformed { reason: r, .. } if r == reason));
        }
    }

    #[test]
    fn a_refusal_keeps_the_servers_words_without_secrets() {
        let long = "x".repeat(1_000);
        let body = format!(
            r#"{{"error":"invalid_grant","error_description":"code c0de-s3cret\nis spent {long}"}}"#
        );
        let err = refusal(400, body.as_bytes(), "h".into(), &["c0de-s3cret"]);
        let OAuthError::Refused {
            error, description, ..
        } = &err
        else {
            panic!("{err:?}");
        };
        assert_eq!(error, "invalid_grant");
        let description = description.as_deref().unwrap();
        assert!(
            description.starts_with("code [redacted] is spent"),
            "{description}"
        );
        assert_eq!(description.chars().count(), MAX_ERROR_TEXT);
        assert!(!format!("{err} {err:?}").contains("c0de-s3cret"));
        let plain = refusal(502, b"bad gateway", "h".into(), &[]);
        assert!(matches!(plain, OAuthError::Status { status: 502, .. }));
    }
}
