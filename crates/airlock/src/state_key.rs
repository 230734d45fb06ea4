//! The keys that seal the MCP endpoint's input-request states (docs/rules.md DECL-66, DECL-89,
//! OPS-76): the current key, which seals and opens, and the keys a rotation retired, which only
//! open the states sealed before it (each state expires 10 minutes after it was sealed).
//!
//! Guarantees: with `[mcp] request_state_key` the keys are credentials (the current one, and
//! `request_state_previous_keys`); without it they are the lines of the key file
//! [`KEY_FILE`] — the current key first, then the retired ones — created on first boot with
//! mode 0600 (two processes booting at once agree on one key: only one can create the file).
//! [`rotate`] replaces the file whole (a reader sees the old file or the new one, never half of
//! either) with a new current key followed by the key it retires. No key is ever logged, and
//! an error names where a key was read, never its content.

use std::path::{Path, PathBuf};

use airlock_mcp::{RequestStateKey, RequestStates};
use airlock_runtime::vault::VaultKeys;
use airlock_spec::{Credentials, Deployment, MasterKey};
use anyhow::Context as _;

use crate::durable::{self, Replace};
use secrecy::ExposeSecret as _;
use zeroize::Zeroizing;

/// The key file's name when `[mcp] request_state_key` names none: beside an SQLite ledger,
/// else in the deployment directory.
pub const KEY_FILE: &str = "request_state.key";

/// The vault key file's name when `[credentials] vault_key` names none, in the same place.
pub const VAULT_KEY_FILE: &str = "vault.key";

/// A 32-byte key kept as 64 hex digits, one per line of a key file.
trait HexKey: Sized {
    fn generate() -> Self;
    fn from_hex(text: &str) -> Result<Self, String>;
    fn to_hex(&self) -> Zeroizing<String>;
}

impl HexKey for RequestStateKey {
    fn generate() -> Self {
        RequestStateKey::generate()
    }
    fn from_hex(text: &str) -> Result<Self, String> {
        RequestStateKey::from_hex(text)
    }
    fn to_hex(&self) -> Zeroizing<String> {
        RequestStateKey::to_hex(self)
    }
}

impl HexKey for MasterKey {
    fn generate() -> Self {
        MasterKey::generate()
    }
    fn from_hex(text: &str) -> Result<Self, String> {
        MasterKey::from_hex(text).map_err(|e| e.to_string())
    }
    fn to_hex(&self) -> Zeroizing<String> {
        MasterKey::to_hex(self)
    }
}

/// The key file of `deployment`, or `None` when `[mcp] request_state_key` names a credential.
#[must_use]
pub fn key_file(deployment: &Deployment) -> Option<PathBuf> {
    deployment
        .config
        .mcp
        .request_state_key
        .is_none()
        .then(|| file_of(deployment))
}

fn file_of(deployment: &Deployment) -> PathBuf {
    dir_of(deployment).join(KEY_FILE)
}

fn dir_of(deployment: &Deployment) -> &Path {
    let url = &deployment.config.database_url;
    url.strip_prefix("sqlite://")
        .and_then(|file| Path::new(file).parent())
        .unwrap_or(&deployment.root)
}

/// The keys that seal principals' own credentials (docs/rules.md CALL-14): `[credentials]
/// vault_key` and `vault_previous_keys`, else the lines of [`VAULT_KEY_FILE`] (created with a
/// new key on first use, like the request-state key file).
///
/// # Errors
/// A key credential that does not resolve or is not 64 hex digits; a key file that cannot be
/// read, created or parsed.
pub fn vault_keys(deployment: &Deployment, credentials: &Credentials) -> anyhow::Result<VaultKeys> {
    let settings = &deployment.config.credentials;
    let hex = |path: &airlock_spec::CredentialPath, key: &str| -> anyhow::Result<MasterKey> {
        let text = credentials
            .get(path)
            .with_context(|| format!("[credentials] {key}"))?;
        MasterKey::from_hex(text.expose_secret())
            .map_err(|why| anyhow::anyhow!("[credentials] {key} `{path}`: {why}"))
    };
    let (current, mut previous) = match &settings.vault_key {
        Some(path) => (hex(path, "vault_key")?, vec![]),
        None => load_or_create(&dir_of(deployment).join(VAULT_KEY_FILE))?,
    };
    for path in &settings.vault_previous_keys {
        previous.push(hex(path, "vault_previous_keys")?);
    }
    Ok(VaultKeys::new(current, previous))
}

/// How the MCP endpoint seals and opens input requests' states for `deployment`.
///
/// # Errors
/// A key credential that does not resolve or is not 64 hex digits; a key file that cannot be
/// read, created or parsed.
pub fn request_states(
    deployment: &Deployment,
    credentials: &Credentials,
) -> anyhow::Result<RequestStates> {
    let mcp = &deployment.config.mcp;
    let (key, mut previous) = match &mcp.request_state_key {
        Some(path) => (credential(credentials, path, "request_state_key")?, vec![]),
        None => load_or_create(&file_of(deployment))?,
    };
    for path in &mcp.request_state_previous_keys {
        previous.push(credential(
            credentials,
            path,
            "request_state_previous_keys",
        )?);
    }
    Ok(RequestStates::new(key, RequestStates::DEFAULT_TTL).opening_also(previous))
}

fn credential(
    credentials: &Credentials,
    path: &airlock_spec::CredentialPath,
    key: &str,
) -> anyhow::Result<RequestStateKey> {
    let text = credentials
        .get(path)
        .with_context(|| format!("[mcp] {key}"))?;
    RequestStateKey::from_hex(text.expose_secret())
        .map_err(|why| anyhow::anyhow!("[mcp] {key} `{path}`: {why}"))
}

/// The keys in `path` (current first), the file written with a new key first if it does not
/// exist yet.
fn load_or_create<K: HexKey>(path: &Path) -> anyhow::Result<(K, Vec<K>)> {
    if path.exists() {
        return read(path);
    }
    let key = K::generate();
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(mut file) => {
            std::io::Write::write_all(&mut file, key.to_hex().as_bytes())
                .and_then(|()| file.sync_all())
                .with_context(|| format!("writing {}", path.display()))?;
            tracing::info!(file = %path.display(), "generated a sealing key");
            Ok((key, vec![]))
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read(path),
        Err(e) => Err(e).with_context(|| format!("creating {}", path.display())),
    }
}

/// The keys of the file at `path`: one per line, the current one first; blank lines ignored.
fn read<K: HexKey>(path: &Path) -> anyhow::Result<(K, Vec<K>)> {
    let text = Zeroizing::new(
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
    );
    let mut keys = text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| {
            K::from_hex(line)
                .map_err(|why| anyhow::anyhow!("{} line {}: {why}", path.display(), n + 1))
        });
    let current = keys
        .next()
        .unwrap_or_else(|| Err(anyhow::anyhow!("{} holds no key", path.display())))?;
    Ok((current, keys.collect::<anyhow::Result<_>>()?))
}

/// Puts a new current key in the file at `path`, the current one retired behind it (keys
/// retired before are dropped: their states have expired unless two rotations were less than
/// a state's 10 minutes apart). Whether a key was there to retire.
///
/// # Errors
/// The file cannot be read, parsed or replaced.
pub fn rotate(path: &Path) -> anyhow::Result<bool> {
    let retired = if path.exists() {
        Some(read::<RequestStateKey>(path)?.0)
    } else {
        None
    };
    let mut text = Zeroizing::new(RequestStateKey::generate().to_hex().to_string());
    if let Some(retired) = &retired {
        text.push('\n');
        text.push_str(&retired.to_hex());
    }
    text.push('\n');
    let dir = durable::parent(path);
    // A fresh file beside it, mode 0600 (tempfile's default), then put in its place.
    let mut next = tempfile::Builder::new()
        .prefix(".request_state.key-")
        .tempfile_in(dir)
        .with_context(|| format!("creating a file in {}", dir.display()))?;
    std::io::Write::write_all(&mut next, text.as_bytes())?;
    durable::put_in_place(next, path, Replace::Whole)?;
    Ok(retired.is_some())
}
