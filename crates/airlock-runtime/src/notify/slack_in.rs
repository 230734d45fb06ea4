//! Slack's interactive endpoint, minus HTTP (docs/rules.md NOTIFY-6): is a button click really
//! from Slack, fresh, seen once, and from a person allowed to decide?
//!
//! Guarantees. Nothing of the body is trusted before its v0 signature (HMAC-SHA256 under the
//! app's signing secret over `v0:{timestamp}:{raw body}`) matches, compared in constant time;
//! a timestamp more than five minutes from now is refused, and so is a signature already
//! seen (a replay inside the window). Only then is the payload read, and only a user id on
//! the allow-list may decide.

use std::collections::HashMap;
use std::sync::Mutex;

use airlock_ledger::InvocationId;
use hmac::{Hmac, Mac};
use secrecy::{ExposeSecret as _, SecretString};
use serde_json::Value;
use sha2::Sha256;
use subtle::ConstantTimeEq as _;

use super::slack::{APPROVE, DENY};

/// How far a request's timestamp may be from now, in seconds.
pub const WINDOW_SECS: i64 = 300;

/// A verified click.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Click {
    /// The Slack user id that clicked (on the allow-list).
    pub user: String,
    /// Approve (`true`) or deny.
    pub approve: bool,
    /// The call the card is about.
    pub invocation: InvocationId,
}

/// Why a request decides nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClickRefusal {
    /// No or unreadable `X-Slack-Request-Timestamp` / `X-Slack-Signature`.
    #[error("the request is not signed by Slack")]
    Unsigned,
    /// The signature does not match.
    #[error("the Slack signature does not match")]
    BadSignature,
    /// The timestamp is outside the five-minute window.
    #[error("the Slack request is too old (or from the future)")]
    Stale,
    /// This exact signed request was seen before.
    #[error("the Slack request was already received")]
    Replayed,
    /// The user may not decide in Slack.
    #[error("Slack user {0} may not decide approvals")]
    NotADecider(String),
    /// Signed, but not a button click airlock knows.
    #[error("not an airlock button click: {0}")]
    Malformed(&'static str),
}

/// The verifier: the signing secret, the allow-list and the signatures seen in the window.
pub struct SlackInteractions {
    secret: SecretString,
    deciders: Vec<String>,
    seen: Mutex<HashMap<String, i64>>,
}

impl std::fmt::Debug for SlackInteractions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackInteractions")
            .field("deciders", &self.deciders)
            .finish_non_exhaustive()
    }
}

impl SlackInteractions {
    /// A verifier for the app with `secret`, letting `deciders` (Slack user ids) decide.
    #[must_use]
    pub fn new(secret: SecretString, deciders: Vec<String>) -> Self {
        Self {
            secret,
            deciders,
            seen: Mutex::default(),
        }
    }

    /// Verifies a request received at Unix time `now` and reads its click.
    ///
    /// # Errors
    /// Every [`ClickRefusal`], checked in the order of the module's guarantees.
    pub fn verify(
        &self,
        timestamp: Option<&str>,
        signature: Option<&str>,
        body: &[u8],
        now: i64,
    ) -> Result<Click, ClickRefusal> {
        let (Some(timestamp), Some(signature)) = (timestamp, signature) else {
            return Err(ClickRefusal::Unsigned);
        };
        let at: i64 = timestamp.parse().map_err(|_| ClickRefusal::Unsigned)?;
        if (now - at).abs() > WINDOW_SECS {
            return Err(ClickRefusal::Stale);
        }
        let expected = self.signature(timestamp, body);
        if !bool::from(expected.as_bytes().ct_eq(signature.as_bytes())) {
            return Err(ClickRefusal::BadSignature);
        }
        self.first_sight(signature, at, now)?;
        let click = read_click(body)?;
        if !self.deciders.iter().any(|d| d == &click.user) {
            return Err(ClickRefusal::NotADecider(click.user));
        }
        Ok(click)
    }

    /// `v0=<hex HMAC-SHA256 of v0:{timestamp}:{body}>`.
    fn signature(&self, timestamp: &str, body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(self.secret.expose_secret().as_bytes())
            .expect("HMAC takes a key of any length");
        mac.update(format!("v0:{timestamp}:").as_bytes());
        mac.update(body);
        format!("v0={}", hex::encode(mac.finalize().into_bytes()))
    }

    /// Records `signature`; refuses one seen before. Entries leave once outside the window,
    /// when a replay of them would be refused as stale anyway.
    fn first_sight(&self, signature: &str, at: i64, now: i64) -> Result<(), ClickRefusal> {
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        seen.retain(|_, t| (now - *t).abs() <= WINDOW_SECS);
        if seen.insert(signature.to_owned(), at).is_some() {
            return Err(ClickRefusal::Replayed);
        }
        Ok(())
    }
}

/// The click in a `block_actions` payload (`payload=<JSON>`, form-encoded).
fn read_click(body: &[u8]) -> Result<Click, ClickRefusal> {
    let payload = url::form_urlencoded::parse(body)
        .find(|(k, _)| k == "payload")
        .map(|(_, v)| v.into_owned())
        .ok_or(ClickRefusal::Malformed("no payload field"))?;
    let payload: Value = serde_json::from_str(&payload)
        .map_err(|_| ClickRefusal::Malformed("payload is not JSON"))?;
    let user = payload
        .pointer("/user/id")
        .and_then(Value::as_str)
        .ok_or(ClickRefusal::Malformed("no user id"))?;
    let action = payload
        .pointer("/actions/0")
        .ok_or(ClickRefusal::Malformed("no action"))?;
    let approve = match action.get("action_id").and_then(Value::as_str) {
        Some(APPROVE) => true,
        Some(DENY) => false,
        _ => return Err(ClickRefusal::Malformed("an unknown action")),
    };
    let invocation = action
        .get("value")
        .and_then(Value::as_str)
        .and_then(|v| v.parse().ok())
        .ok_or(ClickRefusal::Malformed("no invocation id"))?;
    Ok(Click {
        user: user.to_owned(),
        approve,
        invocation,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slack's documented example: secret, timestamp, body and signature.
    #[test]
    fn slacks_example_signature() {
        let v = SlackInteractions::new(
            SecretString::from("8f742231b10e8888abcd99yyyzzz85a5".to_owned()),
            Vec::new(),
        );
        let body = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        assert_eq!(
            v.signature("1531420618", body.as_bytes()),
            "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
        );
    }
}
