//! The sealed `requestState` of an input request (docs/rules.md MCP-48, MCP-49).
//!
//! Guarantees: a state is encrypted and authenticated with XChaCha20-Poly1305 under the
//! server's [`RequestStateKey`], so a client can neither read nor change what it is bound to:
//! the principal, the endpoint scope, the tool, the SHA-256 of the canonical arguments, the
//! invocation and an expiry. Any change to the text — a flipped bit, another key, another
//! format — opens as [`Refusal::Tampered`]; a state past its expiry as [`Refusal::Expired`];
//! a state used by another principal, from another endpoint URL, for another tool or other
//! arguments each as its own refusal. The AEAD nonce is random per state and doubles as the
//! state's one-time id, which the ledger records when the state is used ([`Refusal::Replayed`]
//! for a second use). The key never appears in a log, an error or a `Debug` output.
//!
//! Rotation (docs/rules.md OPS-76): states are sealed under the current key only; the keys a
//! rotation retired ([`RequestStates::opening_also`]) still open the states sealed before it,
//! which expire as usual, and a state under any other key is [`Refusal::Tampered`].

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::{Aead, Generate, Payload};
use chacha20poly1305::{KeyInit, XChaCha20Poly1305, XNonce};
use rmcp::ErrorData;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use zeroize::Zeroizing;

/// The format's prefix; a state without it is not airlock's.
const PREFIX: &str = "al1.";
/// Bound as associated data, so a ciphertext made for anything else under the same key never
/// opens as a request state.
const PURPOSE: &[u8] = b"airlock MCP requestState v1";
/// Length of the XChaCha20-Poly1305 nonce.
const NONCE_LEN: usize = 24;

/// The server's 32-byte key for request states. Its `Debug` never shows it.
pub struct RequestStateKey(Zeroizing<[u8; 32]>);

impl RequestStateKey {
    /// A new random key.
    #[must_use]
    pub fn generate() -> Self {
        let key = chacha20poly1305::Key::generate();
        let mut bytes = Zeroizing::new([0u8; 32]);
        bytes.copy_from_slice(key.as_slice());
        Self(bytes)
    }

    /// The key from 64 hex characters (surrounding whitespace ignored).
    ///
    /// # Errors
    /// The text is not 64 hex characters; the message never repeats it.
    pub fn from_hex(text: &str) -> Result<Self, String> {
        let mut key = Zeroizing::new([0u8; 32]);
        hex::decode_to_slice(text.trim(), key.as_mut_slice())
            .map_err(|_| "expected 64 hex characters (32 bytes)".to_owned())?;
        Ok(Self(key))
    }

    /// The key as 64 hex characters, for writing its file.
    #[must_use]
    pub fn to_hex(&self) -> Zeroizing<String> {
        Zeroizing::new(hex::encode(self.0.as_slice()))
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new(&chacha20poly1305::Key::from(*self.0))
    }
}

impl fmt::Debug for RequestStateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RequestStateKey(<redacted>)")
    }
}

/// How the endpoint seals request states: its key, and how long a state may be used.
#[derive(Debug, Clone)]
pub struct RequestStates {
    key: Arc<RequestStateKey>,
    /// Retired keys: they open, never seal.
    previous: Arc<[RequestStateKey]>,
    ttl: Duration,
}

impl RequestStates {
    /// How long a state may be used when the configuration does not say: long enough for a
    /// person to read the request, short enough that a leaked state is soon worthless.
    pub const DEFAULT_TTL: Duration = Duration::from_secs(600);

    /// States sealed under `key`, each usable for `ttl` after it is issued.
    #[must_use]
    pub fn new(key: RequestStateKey, ttl: Duration) -> Self {
        Self {
            key: Arc::new(key),
            previous: Arc::new([]),
            ttl,
        }
    }

    /// These states, also opening states sealed under `previous` (keys a rotation retired).
    #[must_use]
    pub fn opening_also(self, previous: Vec<RequestStateKey>) -> Self {
        Self {
            previous: previous.into(),
            ..self
        }
    }

    /// Seals `binding`, usable until `now` + the ttl.
    pub(super) fn seal(&self, binding: Binding, now: SystemTime) -> String {
        let sealed = Sealed {
            binding,
            expires: unix_secs(now).saturating_add(self.ttl.as_secs()),
        };
        // Serializing a struct of strings and integers cannot fail.
        let plain = serde_json::to_vec(&sealed).unwrap_or_default();
        self.seal_bytes(PREFIX, PURPOSE, &plain)
    }

    /// `plain` encrypted and authenticated under the current key, bound to `purpose` (so it
    /// opens for nothing else), as `prefix` and URL-safe base64 of the nonce and ciphertext.
    pub(super) fn seal_bytes(&self, prefix: &str, purpose: &[u8], plain: &[u8]) -> String {
        let nonce = XNonce::generate();
        let payload = Payload {
            msg: plain,
            aad: purpose,
        };
        // Encryption fails only for messages of gigabytes; these are a few hundred bytes.
        let sealed = self
            .key
            .cipher()
            .encrypt(&nonce, payload)
            .unwrap_or_default();
        let mut blob = nonce.to_vec();
        blob.extend_from_slice(&sealed);
        format!("{prefix}{}", URL_SAFE_NO_PAD.encode(blob))
    }

    /// What [`Self::seal_bytes`] sealed as `text` with `prefix` and `purpose`, under the
    /// current key or a retired one, and its nonce; `None` for anything else.
    pub(super) fn open_bytes(
        &self,
        prefix: &str,
        purpose: &[u8],
        text: &str,
    ) -> Option<(Vec<u8>, XNonce)> {
        let blob = text
            .strip_prefix(prefix)
            .and_then(|b| URL_SAFE_NO_PAD.decode(b).ok())
            .filter(|b| b.len() > NONCE_LEN)?;
        let (nonce, sealed) = blob.split_at(NONCE_LEN);
        let nonce = XNonce::try_from(nonce).ok()?;
        // The current key first: after a rotation most texts are sealed under it.
        let plain = std::iter::once(&*self.key)
            .chain(self.previous.iter())
            .find_map(|key| {
                let payload = Payload {
                    msg: sealed,
                    aad: purpose,
                };
                key.cipher().decrypt(&nonce, payload).ok()
            })?;
        Some((plain, nonce))
    }

    /// Opens `state` as of `now`: what it is bound to, and its one-time id.
    pub(super) fn open(&self, state: &str, now: SystemTime) -> Result<Opened, Refusal> {
        let (plain, nonce) = self
            .open_bytes(PREFIX, PURPOSE, state)
            .ok_or(Refusal::Tampered)?;
        let sealed: Sealed = serde_json::from_slice(&plain).map_err(|_| Refusal::Tampered)?;
        if unix_secs(now) >= sealed.expires {
            return Err(Refusal::Expired);
        }
        Ok(Opened {
            id: hex::encode(nonce.as_slice()),
            binding: sealed.binding,
        })
    }
}

fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// What a state is bound to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Binding {
    pub(super) principal: String,
    pub(super) scope: String,
    pub(super) tool: String,
    /// SHA-256 of the canonical JSON of the arguments.
    pub(super) arguments: String,
    pub(super) invocation: String,
    pub(super) asked: Asked,
    /// A relayed round's upstream `requestState`, carried sealed (MCP-71).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) upstream: Option<String>,
    /// A relayed round's form-mode elicitations: the `requestedSchema` of each, by key, which
    /// the retry's answers must match (MCP-87).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub(super) schemas: Map<String, Value>,
}

impl Binding {
    /// `state` refused unless it is bound to what `retry` names, checked in this order.
    pub(super) fn check(&self, retry: &Binding) -> Result<(), Refusal> {
        if self.principal != retry.principal {
            return Err(Refusal::OtherPrincipal);
        }
        if self.scope != retry.scope {
            return Err(Refusal::OtherScope);
        }
        if self.tool != retry.tool {
            return Err(Refusal::OtherTool);
        }
        if self.arguments != retry.arguments {
            return Err(Refusal::OtherArguments);
        }
        Ok(())
    }
}

/// The digest a state binds `arguments` by.
pub(super) fn arguments_digest(arguments: &Value) -> String {
    airlock_spec::sha256_hex(airlock_spec::canonical_json(arguments).as_bytes())
}

/// What the person was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Asked {
    /// To confirm the exact call (`approval: caller`).
    Confirm,
    /// To answer a question (`ask_human`).
    Answer,
    /// The tool's upstream's own input requests, relayed (MCP-68); `invocation` is the round
    /// that asked them.
    Relay,
}

#[derive(Serialize, Deserialize)]
struct Sealed {
    #[serde(flatten)]
    binding: Binding,
    /// Unix seconds; the state is refused from this second on.
    expires: u64,
}

/// An opened state.
#[derive(Debug)]
pub(super) struct Opened {
    /// The one-time id the ledger records when the state is used.
    pub(super) id: String,
    pub(super) binding: Binding,
}

/// Why a state is refused; each reason is its own word on the wire (`error.data.reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    /// It does not open under the server's key: changed, forged, or not airlock's.
    Tampered,
    /// Its time ran out.
    Expired,
    /// It was issued to another principal.
    OtherPrincipal,
    /// It was issued on another endpoint URL.
    OtherScope,
    /// It was issued for a call of another tool.
    OtherTool,
    /// It was issued for other arguments.
    OtherArguments,
    /// It was used before.
    Replayed,
}

impl Refusal {
    /// The stable word of `error.data.reason`.
    pub(super) fn reason(self) -> &'static str {
        match self {
            Self::Tampered => "tampered",
            Self::Expired => "expired",
            Self::OtherPrincipal => "other_principal",
            Self::OtherScope => "other_scope",
            Self::OtherTool => "other_tool",
            Self::OtherArguments => "other_arguments",
            Self::Replayed => "replayed",
        }
    }

    /// What the client is told.
    pub(super) fn message(self) -> &'static str {
        match self {
            Self::Tampered => {
                "requestState refused: it was changed or not issued by this server; call the tool again without it"
            }
            Self::Expired => {
                "requestState refused: it expired; call the tool again without it to be asked again"
            }
            Self::OtherPrincipal => "requestState refused: it was issued to another principal",
            Self::OtherScope => "requestState refused: it was issued on another endpoint URL",
            Self::OtherTool => "requestState refused: it was issued for another tool",
            Self::OtherArguments => {
                "requestState refused: it was issued for other arguments; the confirmed call is the exact call asked about"
            }
            Self::Replayed => {
                "requestState refused: it was already used; the call it was issued for is decided"
            }
        }
    }
}

/// A refused state as the JSON-RPC error the client gets.
pub(super) fn refused(refusal: Refusal) -> ErrorData {
    ErrorData::invalid_params(
        refusal.message(),
        Some(json!({ "reason": refusal.reason() })),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding() -> Binding {
        Binding {
            principal: "claude".into(),
            scope: "gateway".into(),
            tool: "deploy".into(),
            arguments: arguments_digest(&serde_json::json!({"b": 1, "a": [1, 2]})),
            invocation: "inv-1".into(),
            asked: Asked::Confirm,
            upstream: None,
            schemas: Map::new(),
        }
    }

    fn states(ttl: u64) -> RequestStates {
        RequestStates::new(RequestStateKey::generate(), Duration::from_secs(ttl))
    }

    #[test]
    fn a_state_opens_to_its_binding_and_reveals_nothing() {
        let states = states(60);
        let now = SystemTime::now();
        let sealed = states.seal(binding(), now);
        assert!(
            !sealed.contains("claude") && !sealed.contains("deploy"),
            "{sealed}"
        );
        let opened = states.open(&sealed, now).unwrap();
        assert_eq!(opened.binding, binding());
        // Two seals of the same binding have different one-time ids.
        let again = states.open(&states.seal(binding(), now), now).unwrap();
        assert_ne!(opened.id, again.id);
    }

    #[test]
    fn a_changed_forged_or_foreign_state_is_tampered() {
        let states = states(60);
        let now = SystemTime::now();
        let sealed = states.seal(binding(), now);
        let mut bytes = sealed.clone().into_bytes();
        let last = bytes.len() - 5;
        bytes[last] = if bytes[last] == b'A' { b'B' } else { b'A' };
        let flipped = String::from_utf8(bytes).unwrap();
        assert_eq!(states.open(&flipped, now).unwrap_err(), Refusal::Tampered);
        let foreign = self::states(60).seal(binding(), now);
        assert_eq!(states.open(&foreign, now).unwrap_err(), Refusal::Tampered);
        for junk in ["", "al1.", "al1.!!", "hello", &sealed[4..]] {
            assert_eq!(
                states.open(junk, now).unwrap_err(),
                Refusal::Tampered,
                "{junk}"
            );
        }
    }

    #[test]
    fn a_state_expires_at_its_ttl() {
        let states = states(30);
        let now = SystemTime::now();
        let sealed = states.seal(binding(), now);
        assert!(states.open(&sealed, now + Duration::from_secs(29)).is_ok());
        let late = states.open(&sealed, now + Duration::from_secs(30));
        assert_eq!(late.unwrap_err(), Refusal::Expired);
    }

    /// OPS-76: after a rotation, states sealed under the retired key open until they expire;
    /// new states are sealed under the new key; a state under a key not listed is tampered.
    #[test]
    fn a_retired_key_opens_until_expiry_and_never_seals() {
        let old = RequestStateKey::from_hex(&"11".repeat(32)).unwrap();
        let before = RequestStates::new(old, Duration::from_secs(30));
        let now = SystemTime::now();
        let sealed_before = before.seal(binding(), now);
        let retired = RequestStateKey::from_hex(&"11".repeat(32)).unwrap();
        let rotated = states(30).opening_also(vec![retired]);
        assert_eq!(
            rotated.open(&sealed_before, now).unwrap().binding,
            binding()
        );
        let late = rotated.open(&sealed_before, now + Duration::from_secs(30));
        assert_eq!(late.unwrap_err(), Refusal::Expired);
        let sealed_after = rotated.seal(binding(), now);
        assert_eq!(
            before.open(&sealed_after, now).unwrap_err(),
            Refusal::Tampered,
            "sealed under the new key, not the retired one"
        );
        assert!(rotated.open(&sealed_after, now).is_ok());
        let unknown = states(30).seal(binding(), now);
        assert_eq!(rotated.open(&unknown, now).unwrap_err(), Refusal::Tampered);
    }

    #[test]
    fn each_mismatch_has_its_own_reason() {
        let bound = binding();
        assert_eq!(bound.check(&binding()), Ok(()));
        let mut other = binding();
        other.principal = "eve".into();
        assert_eq!(bound.check(&other), Err(Refusal::OtherPrincipal));
        let mut other = binding();
        other.scope = "agent:x".into();
        assert_eq!(bound.check(&other), Err(Refusal::OtherScope));
        let mut other = binding();
        other.tool = "delete".into();
        assert_eq!(bound.check(&other), Err(Refusal::OtherTool));
        let mut other = binding();
        other.arguments = arguments_digest(&serde_json::json!({"b": 2, "a": [1, 2]}));
        assert_eq!(bound.check(&other), Err(Refusal::OtherArguments));
        // Key order does not make other arguments.
        other.arguments = arguments_digest(&serde_json::json!({"a": [1, 2], "b": 1}));
        assert_eq!(bound.check(&other), Ok(()));
    }

    #[test]
    fn the_key_never_shows() {
        let key = RequestStateKey::from_hex(&"ab".repeat(32)).unwrap();
        assert_eq!(format!("{key:?}"), "RequestStateKey(<redacted>)");
        let states = RequestStates::new(key, Duration::from_secs(1));
        assert!(!format!("{states:?}").contains("abab"));
        assert!(
            RequestStateKey::from_hex("xyz")
                .unwrap_err()
                .contains("64 hex")
        );
    }
}
