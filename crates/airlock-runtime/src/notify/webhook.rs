//! Signed webhooks (docs/rules.md NOTIFY-2 … NOTIFY-4, NOTIFY-10, NOTIFY-13): the event's JSON
//! body and its Standard Webhooks signatures.
//!
//! Guarantees. The body is the notice's data and nothing else (no arguments), and never more
//! than [`MAX_BODY`] bytes: a larger one is not sent at all. Each signature is `v1,` and the
//! base64 HMAC-SHA256, under one of the receiver's secrets, of `{id}.{timestamp}.{body}` — the
//! delivery id, the attempt's Unix time in seconds, and the exact bytes sent; with secrets in
//! rotation there is one per secret, the current one first, so a receiver holding either
//! verifies. A secret never leaves this module but as that MAC.

use airlock_egress::Request;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use http::{HeaderName, HeaderValue};
use secrecy::{ExposeSecret as _, SecretBox};
use serde_json::{Value, json};
use sha2::Sha256;

use super::Undelivered;

/// The largest body sent (256 KiB, what receivers of the MCP Events extension's webhooks are
/// promised): an event is small, so a larger one is a fault, and no retry would shrink it.
pub(crate) const MAX_BODY: usize = 256 * 1024;

/// The secret of one receiver: the key bytes of a `whsec_<base64>` secret, or of the text as
/// written when it has no such prefix.
pub(crate) struct WebhookKey(SecretBox<Vec<u8>>);

impl WebhookKey {
    /// The key a configured secret stands for; `None` when it says `whsec_` but its base64
    /// does not decode (a secret copied wrong is an error at boot, not a silent other key).
    pub(crate) fn parse(secret: &str) -> Option<Self> {
        let bytes = match secret.strip_prefix("whsec_") {
            Some(encoded) => STANDARD.decode(encoded).ok()?,
            None => secret.as_bytes().to_vec(),
        };
        (!bytes.is_empty()).then(|| Self(SecretBox::new(Box::new(bytes))))
    }

    /// `v1,<base64 MAC>` of `id.timestamp.body`.
    pub(crate) fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(self.0.expose_secret())
            .expect("HMAC takes a key of any length");
        mac.update(format!("{id}.{timestamp}.").as_bytes());
        mac.update(body);
        format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
    }
}

/// The event's body: `{type, id, timestamp, data}`; given up when over [`MAX_BODY`].
pub(crate) fn body(
    event: &str,
    id: &str,
    timestamp: &str,
    data: &Value,
) -> Result<Vec<u8>, Undelivered> {
    let body = json!({ "type": event, "id": id, "timestamp": timestamp, "data": data })
        .to_string()
        .into_bytes();
    if body.len() > MAX_BODY {
        return Err(Undelivered::give_up(format!(
            "the event is {} bytes, over the {MAX_BODY} a webhook is sent",
            body.len()
        )));
    }
    Ok(body)
}

/// The `webhook-signature` value: one signature per key, in order, space-separated.
fn signatures(keys: &[WebhookKey], id: &str, now: i64, body: &[u8]) -> String {
    let each: Vec<String> = keys.iter().map(|key| key.sign(id, now, body)).collect();
    each.join(" ")
}

/// The POST of `body` to `url` at Unix time `now`, signed with each of `keys` in order.
pub(crate) fn request(
    url: &str,
    keys: &[WebhookKey],
    id: &str,
    now: i64,
    body: Vec<u8>,
) -> Request {
    let signature = signatures(keys, id, now, &body);
    let header = |name: &'static str, value: &str| {
        (
            HeaderName::from_static(name),
            HeaderValue::from_str(value).unwrap_or(HeaderValue::from_static("")),
        )
    };
    let headers = [
        header("content-type", "application/json"),
        header("webhook-id", id),
        header("webhook-timestamp", &now.to_string()),
        header("webhook-signature", &signature),
    ];
    headers
        .into_iter()
        .fold(Request::post(url), |r, (name, value)| r.header(name, value))
        .body(body)
        .with_credential()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Standard Webhooks reference vector (the spec's own example secret and message).
    #[test]
    fn the_reference_signature() {
        let key = WebhookKey::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            key.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    /// NOTIFY-10: one signature per secret, space-separated, the current one first.
    #[test]
    fn secrets_in_rotation_each_sign() {
        let current = WebhookKey::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let previous = WebhookKey::parse("an older secret").unwrap();
        let (id, at, body) = ("msg_1", 1_700_000_000, b"{}");
        let expected = [current.sign(id, at, body), previous.sign(id, at, body)].join(" ");
        assert_eq!(signatures(&[current, previous], id, at, body), expected);
    }

    /// NOTIFY-13: a body over the cap is given up, never sent; one at the cap goes.
    #[test]
    fn a_body_over_the_cap_is_given_up() {
        let envelope = body("invocation.parked", "id", "t", &json!(""))
            .unwrap()
            .len();
        let fits = json!("x".repeat(MAX_BODY - envelope));
        assert_eq!(
            body("invocation.parked", "id", "t", &fits).unwrap().len(),
            MAX_BODY
        );
        let over = json!("x".repeat(MAX_BODY - envelope + 1));
        let refused = body("invocation.parked", "id", "t", &over).unwrap_err();
        assert!(refused.give_up, "{refused:?}");
    }

    #[test]
    fn a_broken_whsec_is_refused() {
        assert!(WebhookKey::parse("whsec_***").is_none());
        assert!(WebhookKey::parse("").is_none());
        assert!(WebhookKey::parse("plain text secret").is_some());
    }
}
