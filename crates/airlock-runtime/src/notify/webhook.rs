//! Signed webhooks (docs/rules.md NOTIFY-2, NOTIFY-3): the event's JSON body and its Standard
//! Webhooks signature.
//!
//! Guarantees. The body is the notice's data and nothing else (no arguments); the signature is
//! `v1,` and the base64 HMAC-SHA256, under the receiver's secret, of `{id}.{timestamp}.{body}`
//! — the delivery id, the attempt's Unix time in seconds, and the exact bytes sent. The secret
//! never leaves this module but as that MAC.

use airlock_egress::Request;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use http::{HeaderName, HeaderValue};
use secrecy::{ExposeSecret as _, SecretBox};
use serde_json::{Value, json};
use sha2::Sha256;

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

/// The event's body: `{type, id, timestamp, data}`.
pub(crate) fn body(event: &str, id: &str, timestamp: &str, data: &Value) -> Vec<u8> {
    json!({ "type": event, "id": id, "timestamp": timestamp, "data": data })
        .to_string()
        .into_bytes()
}

/// The signed POST of `body` to `url`, at Unix time `now`.
pub(crate) fn request(url: &str, key: &WebhookKey, id: &str, now: i64, body: Vec<u8>) -> Request {
    let signature = key.sign(id, now, &body);
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

    #[test]
    fn a_broken_whsec_is_refused() {
        assert!(WebhookKey::parse("whsec_***").is_none());
        assert!(WebhookKey::parse("").is_none());
        assert!(WebhookKey::parse("plain text secret").is_some());
    }
}
