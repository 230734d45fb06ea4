//! Credentials: secrets found by dotted path (`crm.mcp_token`), never written in declarations.
//!
//! Sources, first match wins: the environment (`AIRLOCK_CREDENTIALS__CRM__MCP_TOKEN`), a plain
//! YAML file (development only), and an encrypted file (`credentials.yml.enc`, XChaCha20-Poly1305,
//! key from `AIRLOCK_MASTER_KEY` or a `master.key` file that is never committed).
//! Values are [`SecretString`]s: `Debug` redacts them, nothing here prints or serializes them,
//! and errors name the path, never the value.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chacha20poly1305::aead::{Aead, Generate, Payload};
use chacha20poly1305::{KeyInit, XChaCha20Poly1305, XNonce};
use secrecy::{ExposeSecret, SecretString};
use zeroize::Zeroizing;

use crate::config::CredentialsSettings;
use crate::names::CredentialPath;
use crate::tree::{Node, NodeValue, parse_yaml};

/// Prefix of credential environment variables.
pub const ENV_PREFIX: &str = "AIRLOCK_CREDENTIALS__";
/// Environment variable holding the master key (64 hex characters).
pub const MASTER_KEY_ENV: &str = "AIRLOCK_MASTER_KEY";
const ENCRYPTED_HEADER: &str = "airlock-credentials-v1:";

/// Why a credential or a credentials file could not be had. Never contains a secret.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    /// No source has the path.
    #[error("credential `{0}` is missing: set it with `airlock credentials set {0}` or AIRLOCK_CREDENTIALS__{env}", env = env_name(.0))]
    Missing(String),
    /// The path holds a mapping where a value was expected, or the reverse.
    #[error("credential `{path}` {reason}")]
    Shape {
        /// The path.
        path: String,
        /// What is wrong with its shape.
        reason: &'static str,
    },
    /// A credentials file cannot be read or parsed.
    #[error("credentials file {}: {reason}", .file.display())]
    File {
        /// The file.
        file: PathBuf,
        /// Why.
        reason: String,
    },
    /// The master key is missing or malformed, or does not open the file.
    #[error("master key: {0}")]
    MasterKey(String),
}

/// The environment variable name of a credential path.
fn env_name(path: &str) -> String {
    path.split('.')
        .map(str::to_ascii_uppercase)
        .collect::<Vec<_>>()
        .join("__")
}

/// Every credential available to the process, by dotted path.
#[derive(Default)]
pub struct Credentials {
    values: BTreeMap<String, SecretString>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("paths", &self.values.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Credentials {
    /// Loads every configured source. `env` is the process environment (passed in so tests
    /// need not change it).
    pub fn load(
        root: &Path,
        settings: &CredentialsSettings,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, CredentialError> {
        let env: Vec<(String, String)> = env.into_iter().collect();
        let mut creds = Self::default();
        let encrypted = root.join(&settings.encrypted);
        if encrypted.exists() {
            let key = MasterKey::find(root, settings, &env)?;
            creds.merge_yaml(&encrypted, &key.decrypt_file(&encrypted)?)?;
        }
        if let Some(file) = &settings.file {
            let path = root.join(file);
            let text = std::fs::read_to_string(&path).map_err(|e| CredentialError::File {
                file: path.clone(),
                reason: e.to_string(),
            })?;
            creds.merge_yaml(&path, &text)?;
        }
        for (name, value) in env {
            if let Some(rest) = name.strip_prefix(ENV_PREFIX) {
                let path = rest
                    .split("__")
                    .map(str::to_ascii_lowercase)
                    .collect::<Vec<_>>()
                    .join(".");
                creds.values.insert(path, SecretString::from(value));
            }
        }
        Ok(creds)
    }

    /// Credentials from (path, value) pairs: per-run bundles and tests.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, String)>) -> Self {
        Self {
            values: pairs
                .into_iter()
                .map(|(k, v)| (k, SecretString::from(v)))
                .collect(),
        }
    }

    /// Reads a credentials YAML document (nested mappings) into dotted paths.
    pub fn from_yaml(file: &Path, text: &str) -> Result<Self, CredentialError> {
        let mut creds = Self::default();
        creds.merge_yaml(file, text)?;
        Ok(creds)
    }

    fn merge_yaml(&mut self, file: &Path, text: &str) -> Result<(), CredentialError> {
        let parse_error = |reason: String| CredentialError::File {
            file: file.to_path_buf(),
            reason,
        };
        // A syntax error message could quote the document; report its position only.
        let root = parse_yaml(text)
            .map_err(|e| parse_error(format!("invalid YAML at line {}", e.at.line)))?;
        if let Some(root) = root {
            flatten(&root, "", &mut self.values).map_err(parse_error)?;
        }
        Ok(())
    }

    /// The secret at `path`.
    pub fn get(&self, path: &CredentialPath) -> Result<&SecretString, CredentialError> {
        if let Some(value) = self.values.get(path.as_str()) {
            return Ok(value);
        }
        let prefix = format!("{}.", path.as_str());
        if self.values.keys().any(|k| k.starts_with(&prefix)) {
            return Err(CredentialError::Shape {
                path: path.to_string(),
                reason: "is a mapping; a single value was expected",
            });
        }
        Err(CredentialError::Missing(path.to_string()))
    }

    /// A basic-auth credential: a mapping with `username` and `password`.
    pub fn basic(
        &self,
        path: &CredentialPath,
    ) -> Result<(&SecretString, &SecretString), CredentialError> {
        let part = |key: &str| self.values.get(&format!("{}.{key}", path.as_str()));
        match (part("username"), part("password")) {
            (Some(user), Some(password)) => Ok((user, password)),
            _ if self.values.contains_key(path.as_str()) => Err(CredentialError::Shape {
                path: path.to_string(),
                reason: "is a single value; basic auth needs a mapping with `username` and `password`",
            }),
            _ => Err(CredentialError::Missing(format!(
                "{}.{{username,password}}",
                path.as_str()
            ))),
        }
    }

    /// Every path present (never the values).
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.values.keys().map(String::as_str)
    }

    /// Whether any value equals `candidate` (used by tests that prove a secret never leaks).
    #[must_use]
    pub fn contains_value(&self, candidate: &str) -> bool {
        self.values.values().any(|v| v.expose_secret() == candidate)
    }
}

fn flatten(
    node: &Node,
    prefix: &str,
    out: &mut BTreeMap<String, SecretString>,
) -> Result<(), String> {
    match &node.value {
        NodeValue::Map(entries) => {
            for entry in entries {
                let path = if prefix.is_empty() {
                    entry.key.clone()
                } else {
                    format!("{prefix}.{}", entry.key)
                };
                flatten(&entry.value, &path, out)?;
            }
            Ok(())
        }
        NodeValue::Str(s) => {
            out.insert(prefix.to_owned(), SecretString::from(s.clone()));
            Ok(())
        }
        NodeValue::Int(_) | NodeValue::Float(_) | NodeValue::Bool(_) => {
            out.insert(
                prefix.to_owned(),
                SecretString::from(node.to_json().to_string()),
            );
            Ok(())
        }
        NodeValue::Null | NodeValue::Seq(_) => Err(format!(
            "`{prefix}` must be a value or a mapping (line {})",
            node.at.line
        )),
    }
}

/// The 32-byte key of the encrypted credentials file.
pub struct MasterKey(Zeroizing<[u8; 32]>);

impl MasterKey {
    /// Finds the key: `AIRLOCK_MASTER_KEY` first, then the key file.
    pub fn find(
        root: &Path,
        settings: &CredentialsSettings,
        env: &[(String, String)],
    ) -> Result<Self, CredentialError> {
        if let Some((_, hex)) = env.iter().find(|(k, _)| k == MASTER_KEY_ENV) {
            return Self::from_hex(hex);
        }
        let path = root.join(&settings.master_key_file);
        let text = Zeroizing::new(std::fs::read_to_string(&path).map_err(|_| {
            CredentialError::MasterKey(format!(
                "set {MASTER_KEY_ENV} or create {} (64 hex characters)",
                path.display()
            ))
        })?);
        Self::from_hex(text.trim())
    }

    /// Parses 64 hex characters.
    pub fn from_hex(text: &str) -> Result<Self, CredentialError> {
        let mut key = Zeroizing::new([0u8; 32]);
        hex::decode_to_slice(text.trim(), key.as_mut_slice()).map_err(|_| {
            CredentialError::MasterKey("expected 64 hex characters (32 bytes)".into())
        })?;
        Ok(Self(key))
    }

    /// A new random key.
    #[must_use]
    pub fn generate() -> Self {
        let key = chacha20poly1305::Key::generate();
        let mut bytes = Zeroizing::new([0u8; 32]);
        bytes.copy_from_slice(key.as_slice());
        Self(bytes)
    }

    /// The key as hex, for writing the key file.
    #[must_use]
    pub fn to_hex(&self) -> Zeroizing<String> {
        Zeroizing::new(hex::encode(self.0.as_slice()))
    }

    fn cipher(&self) -> Result<XChaCha20Poly1305, CredentialError> {
        XChaCha20Poly1305::new_from_slice(self.0.as_slice())
            .map_err(|_| CredentialError::MasterKey("invalid key length".into()))
    }

    /// Encrypts a credentials document into the file format.
    pub fn encrypt(&self, plaintext: &str) -> Result<String, CredentialError> {
        let nonce = XNonce::generate();
        let sealed = self
            .cipher()?
            .encrypt(&nonce, plaintext.as_bytes())
            .map_err(|_| CredentialError::MasterKey("encryption failed".into()))?;
        let mut blob = nonce.to_vec();
        blob.extend_from_slice(&sealed);
        Ok(format!("{ENCRYPTED_HEADER}{}\n", STANDARD.encode(blob)))
    }

    /// Decrypts the file format.
    pub fn decrypt(&self, text: &str) -> Result<Zeroizing<String>, String> {
        let body = text
            .trim()
            .strip_prefix(ENCRYPTED_HEADER)
            .ok_or("not an airlock encrypted credentials file")?;
        let blob = STANDARD
            .decode(body)
            .map_err(|_| "the file is damaged (not base64)")?;
        if blob.len() < 24 {
            return Err("the file is damaged (too short)".into());
        }
        let (nonce, sealed) = blob.split_at(24);
        let nonce = XNonce::try_from(nonce).map_err(|_| "the file is damaged")?;
        let cipher = self.cipher().map_err(|e| e.to_string())?;
        let plain = cipher.decrypt(&nonce, sealed).map_err(
            |_| "the master key does not open this file (wrong key, or the file was changed)",
        )?;
        String::from_utf8(plain)
            .map(Zeroizing::new)
            .map_err(|_| "the decrypted file is not UTF-8".into())
    }

    /// A short public name of the key (the first 8 hex digits of its SHA-256): what a sealed
    /// value names so the right key opens it.
    #[must_use]
    pub fn id(&self) -> String {
        crate::sha256_hex(self.0.as_slice())[..8].to_owned()
    }

    /// A keyed digest of `secret` (HMAC-SHA-256 under this key, 16 hex digits): what an audit
    /// row may hold to tell two secrets apart, and which cannot be tested against guesses
    /// without the key.
    #[must_use]
    pub fn digest(&self, secret: &[u8]) -> String {
        use hmac::Mac as _;
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(self.0.as_slice())
            .expect("HMAC takes a key of any length");
        mac.update(secret);
        hex::encode(&mac.finalize().into_bytes()[..8])
    }

    /// Seals `plaintext` bound to `context` (e.g. a connection and a principal): it opens only
    /// with this key and that context, so a sealed value moved to another row does not open.
    /// The result names the key (`v1.<key id>.<base64>`).
    ///
    /// # Errors
    /// Only if the cipher refuses the key (never for a 32-byte key).
    pub fn seal(&self, context: &[u8], plaintext: &[u8]) -> Result<String, CredentialError> {
        let nonce = XNonce::generate();
        let payload = Payload {
            msg: plaintext,
            aad: context,
        };
        let sealed = self
            .cipher()?
            .encrypt(&nonce, payload)
            .map_err(|_| CredentialError::MasterKey("encryption failed".into()))?;
        let mut blob = nonce.to_vec();
        blob.extend_from_slice(&sealed);
        Ok(format!("v1.{}.{}", self.id(), STANDARD.encode(blob)))
    }

    /// Opens what [`MasterKey::seal`] made with this key and `context`.
    ///
    /// # Errors
    /// A value this key did not seal, sealed for another context, or damaged.
    pub fn open(&self, context: &[u8], sealed: &str) -> Result<Zeroizing<Vec<u8>>, String> {
        let mut parts = sealed.splitn(3, '.');
        let (Some("v1"), Some(id), Some(body)) = (parts.next(), parts.next(), parts.next()) else {
            return Err("not a sealed value".into());
        };
        if id != self.id() {
            return Err(format!("sealed with key {id}, not this one"));
        }
        let blob = STANDARD.decode(body).map_err(|_| "damaged (not base64)")?;
        if blob.len() < 24 {
            return Err("damaged (too short)".into());
        }
        let (nonce, ciphertext) = blob.split_at(24);
        let nonce = XNonce::try_from(nonce).map_err(|_| "damaged")?;
        let payload = Payload {
            msg: ciphertext,
            aad: context,
        };
        self.cipher()
            .map_err(|e| e.to_string())?
            .decrypt(&nonce, payload)
            .map(Zeroizing::new)
            .map_err(|_| {
                "does not open: changed, or sealed for another principal or connection".into()
            })
    }

    fn decrypt_file(&self, file: &Path) -> Result<Zeroizing<String>, CredentialError> {
        let text = std::fs::read_to_string(file).map_err(|e| CredentialError::File {
            file: file.to_path_buf(),
            reason: e.to_string(),
        })?;
        self.decrypt(&text).map_err(|reason| CredentialError::File {
            file: file.to_path_buf(),
            reason,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(p: &str) -> CredentialPath {
        CredentialPath::try_from(p).unwrap()
    }

    #[test]
    fn yaml_paths_are_dotted() {
        let creds = Credentials::from_yaml(
            Path::new("c.yml"),
            "crm:\n  mcp_token: s3cret\nerp:\n  basic: {username: u, password: p}\n",
        )
        .unwrap();
        assert_eq!(
            creds.get(&path("crm.mcp_token")).unwrap().expose_secret(),
            "s3cret"
        );
        let (u, p) = creds.basic(&path("erp.basic")).unwrap();
        assert_eq!((u.expose_secret(), p.expose_secret()), ("u", "p"));
        assert!(matches!(
            creds.get(&path("erp.basic")),
            Err(CredentialError::Shape { .. })
        ));
        assert!(matches!(
            creds.basic(&path("crm.mcp_token")),
            Err(CredentialError::Shape { .. })
        ));
    }

    #[test]
    fn missing_names_the_path_and_the_env_var() {
        let err = Credentials::default()
            .get(&path("crm.mcp_token"))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "credential `crm.mcp_token` is missing: set it with `airlock credentials set crm.mcp_token` or AIRLOCK_CREDENTIALS__CRM__MCP_TOKEN"
        );
    }

    #[test]
    fn env_wins_and_maps_names() {
        let dir = tempfile::tempdir().unwrap();
        let settings = CredentialsSettings {
            file: None,
            encrypted: "none.enc".into(),
            master_key_file: "master.key".into(),
            vault_key: None,
            vault_previous_keys: Vec::new(),
        };
        let creds = Credentials::load(
            dir.path(),
            &settings,
            [(
                "AIRLOCK_CREDENTIALS__CRM__MCP_TOKEN".to_owned(),
                "from-env".to_owned(),
            )],
        )
        .unwrap();
        assert_eq!(
            creds.get(&path("crm.mcp_token")).unwrap().expose_secret(),
            "from-env"
        );
    }

    #[test]
    fn encrypted_file_round_trips_and_detects_tampering() {
        let key = MasterKey::generate();
        let sealed = key.encrypt("crm:\n  mcp_token: s3cret\n").unwrap();
        assert!(!sealed.contains("s3cret"));
        assert_eq!(
            key.decrypt(&sealed).unwrap().as_str(),
            "crm:\n  mcp_token: s3cret\n"
        );
        let other = MasterKey::generate();
        assert!(
            other
                .decrypt(&sealed)
                .unwrap_err()
                .contains("does not open")
        );
        let mut tampered = sealed.trim().to_owned();
        let last = tampered.pop().unwrap();
        tampered.push(if last == 'A' { 'B' } else { 'A' });
        assert!(key.decrypt(&tampered).is_err());
    }

    #[test]
    fn a_sealed_value_opens_only_with_its_key_and_context() {
        let key = MasterKey::generate();
        let sealed = key.seal(b"crm\0alice", b"alice-token").unwrap();
        assert!(sealed.starts_with(&format!("v1.{}.", key.id())));
        assert!(!sealed.contains("alice-token"));
        assert_eq!(
            key.open(b"crm\0alice", &sealed).unwrap().as_slice(),
            b"alice-token"
        );
        assert!(key.open(b"crm\0bob", &sealed).is_err());
        assert!(MasterKey::generate().open(b"crm\0alice", &sealed).is_err());
        let mut damaged = sealed.clone();
        damaged.pop();
        damaged.push(if sealed.ends_with('A') { 'B' } else { 'A' });
        assert!(key.open(b"crm\0alice", &damaged).is_err());
    }

    #[test]
    fn debug_never_shows_values() {
        let creds = Credentials::from_pairs([("crm.token".to_owned(), "s3cret-value".to_owned())]);
        let shown = format!("{creds:?}");
        assert!(shown.contains("crm.token") && !shown.contains("s3cret-value"));
    }
}
