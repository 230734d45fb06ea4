//! `airlock credentials edit | set | show-paths`: manage the encrypted credentials file.
//! Values are read from standard input or an editor, never from arguments (shell history),
//! and never printed.

use std::io::Read as _;
use std::path::Path;
use std::process::ExitCode;

use airlock_spec::{CredentialPath, Credentials, CredentialsSettings, MASTER_KEY_ENV, MasterKey};
use anyhow::{Context as _, bail};
use zeroize::Zeroizing;

use super::deployment::DirArg;

/// Subcommands of `airlock credentials`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Open the decrypted file in $EDITOR and encrypt it again.
    Edit(DirArg),
    /// Set one credential; the value is read from standard input.
    Set {
        #[command(flatten)]
        dir: DirArg,
        /// Dotted path, e.g. `crm.mcp_token`.
        path: String,
    },
    /// List the credential paths (never the values).
    ShowPaths {
        #[command(flatten)]
        dir: DirArg,
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
}

pub(crate) fn run(cmd: Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::Edit(d) => edit(&d.locate()?),
        Command::Set { dir, path } => set(&dir.locate()?, &path),
        Command::ShowPaths { dir, json } => show_paths(&dir.locate()?, json),
    }?;
    Ok(ExitCode::SUCCESS)
}

fn settings(dir: &Path) -> anyhow::Result<CredentialsSettings> {
    super::deployment::load(dir).map(|d| d.config.credentials)
}

fn env() -> Vec<(String, String)> {
    std::env::vars().collect()
}

/// The key, creating `master.key` (mode 0600) when no key exists yet.
fn key(dir: &Path, settings: &CredentialsSettings) -> anyhow::Result<MasterKey> {
    let env = env();
    let key_file = dir.join(&settings.master_key_file);
    if env.iter().any(|(k, _)| k == MASTER_KEY_ENV) || key_file.exists() {
        return Ok(MasterKey::find(dir, settings, &env)?);
    }
    let key = MasterKey::generate();
    write_private(&key_file, key.to_hex().as_bytes())?;
    eprintln!(
        "created {} — keep it out of version control",
        key_file.display()
    );
    Ok(key)
}

#[cfg(unix)]
fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(bytes)?;
    Ok(())
}

#[cfg(not(unix))]
fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("creating {}", path.display()))
}

fn read_plain(
    dir: &Path,
    settings: &CredentialsSettings,
    key: &MasterKey,
) -> anyhow::Result<Zeroizing<String>> {
    let file = dir.join(&settings.encrypted);
    if !file.exists() {
        return Ok(Zeroizing::new(String::new()));
    }
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    key.decrypt(&text)
        .map_err(|reason| anyhow::anyhow!("{}: {reason}", file.display()))
}

fn write_sealed(
    dir: &Path,
    settings: &CredentialsSettings,
    key: &MasterKey,
    plain: &str,
) -> anyhow::Result<()> {
    // Refuse to store a document that would not load.
    Credentials::from_yaml(&settings.encrypted, plain)?;
    let file = dir.join(&settings.encrypted);
    std::fs::write(&file, key.encrypt(plain)?)
        .with_context(|| format!("writing {}", file.display()))
}

fn set(dir: &Path, path: &str) -> anyhow::Result<()> {
    let path = CredentialPath::try_from(path).map_err(anyhow::Error::msg)?;
    let settings = settings(dir)?;
    let key = key(dir, &settings)?;
    let mut value = Zeroizing::new(String::new());
    std::io::stdin()
        .read_to_string(&mut value)
        .context("reading the value from standard input")?;
    let value = value.trim_end_matches(['\n', '\r']);
    if value.is_empty() {
        bail!("no value on standard input");
    }
    let plain = read_plain(dir, &settings, &key)?;
    let mut creds: Vec<(String, Zeroizing<String>)> = Vec::new();
    let existing = Credentials::from_yaml(&settings.encrypted, &plain)?;
    for p in existing.paths() {
        if p != path.as_str() {
            let p = CredentialPath::try_from(p).map_err(anyhow::Error::msg)?;
            creds.push((
                p.to_string(),
                Zeroizing::new(secrecy::ExposeSecret::expose_secret(existing.get(&p)?).to_owned()),
            ));
        }
    }
    creds.push((path.to_string(), Zeroizing::new(value.to_owned())));
    let doc = Zeroizing::new(to_yaml(&creds));
    write_sealed(dir, &settings, &key, &doc)?;
    eprintln!("set {path}");
    Ok(())
}

/// Writes flat dotted paths as a flow-style YAML document of nested mappings.
fn to_yaml(pairs: &[(String, Zeroizing<String>)]) -> String {
    let mut tree = serde_json::Map::new();
    for (path, value) in pairs {
        let mut node = &mut tree;
        let segments: Vec<&str> = path.split('.').collect();
        let (last, parents) = segments.split_last().unwrap_or((&"", &[]));
        for seg in parents {
            let entry = node
                .entry((*seg).to_owned())
                .or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
            if !entry.is_object() {
                *entry = serde_json::Value::Object(serde_json::Map::new());
            }
            let serde_json::Value::Object(next) = entry else {
                unreachable!("just made an object")
            };
            node = next;
        }
        node.insert(
            (*last).to_owned(),
            serde_json::Value::String(value.as_str().to_owned()),
        );
    }
    // JSON is YAML; one document, quoted strings, no ambiguity.
    serde_json::to_string_pretty(&serde_json::Value::Object(tree)).unwrap_or_default()
}

fn edit(dir: &Path) -> anyhow::Result<()> {
    let settings = settings(dir)?;
    let key = key(dir, &settings)?;
    let plain = read_plain(dir, &settings, &key)?;
    let scratch = tempfile::Builder::new()
        .prefix("airlock-credentials")
        .suffix(".yml")
        .tempfile()?;
    std::fs::write(scratch.path(), plain.as_bytes())?;
    let editor = std::env::var("EDITOR").unwrap_or_else(|_| "vi".to_owned());
    let status = std::process::Command::new(&editor)
        .arg(scratch.path())
        .status()
        .with_context(|| format!("starting {editor}"))?;
    if !status.success() {
        bail!("{editor} exited with {status}; nothing was changed");
    }
    let edited = Zeroizing::new(std::fs::read_to_string(scratch.path())?);
    write_sealed(dir, &settings, &key, &edited)?;
    eprintln!("saved {}", dir.join(&settings.encrypted).display());
    Ok(())
}

fn show_paths(dir: &Path, json: bool) -> anyhow::Result<()> {
    let settings = settings(dir)?;
    let creds = Credentials::load(dir, &settings, env())?;
    if json {
        let paths: Vec<&str> = creds.paths().collect();
        println!("{}", serde_json::to_string_pretty(&paths)?);
        return Ok(());
    }
    for path in creds.paths() {
        println!("{path}");
    }
    Ok(())
}
