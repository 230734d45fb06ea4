//! Where the deployment is, found one way for every command: `--dir DIR` (or the directory
//! `check` and `serve` also take as an argument), else `$AIRLOCK_DIR`, else the current
//! directory — only when it holds `airlock.toml`.
//!
//! Guarantees: never a guess. A folder that does not exist, is not a directory or holds no
//! `airlock.toml` is an error naming the folder, where it came from and what was looked for.
//! Commands that only read or decide open an existing ledger and never create one: an SQLite
//! file that is not there is an error, not an empty ledger that answers "nothing here".

use std::path::{Path, PathBuf};
use std::sync::Arc;

use airlock_ledger::Store;
use airlock_spec::Deployment;
use anyhow::{Context as _, bail};

/// The environment variable naming the deployment directory when `--dir` is not given.
const ENV: &str = "AIRLOCK_DIR";
/// The file that makes a folder a deployment.
const MARKER: &str = "airlock.toml";

/// The deployment option every command that works on a deployment shares.
#[derive(Debug, clap::Args)]
pub(crate) struct DirArg {
    /// The deployment directory [default: $AIRLOCK_DIR, else the current directory if it holds
    /// airlock.toml].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

impl DirArg {
    /// The deployment directory, found by the rule of this module.
    pub(crate) fn locate(&self) -> anyhow::Result<PathBuf> {
        locate(self.dir.as_deref())
    }

    /// [`DirArg::locate`] for `check` and `serve`, which also take the directory as an argument
    /// (clap refuses both at once).
    pub(crate) fn locate_or(&self, argument: Option<&Path>) -> anyhow::Result<PathBuf> {
        locate(self.dir.as_deref().or(argument))
    }

    /// The deployment, loaded and validated.
    pub(crate) fn load(&self) -> anyhow::Result<(PathBuf, Deployment)> {
        let dir = self.locate()?;
        let deployment = load(&dir)?;
        Ok((dir, deployment))
    }
}

/// `explicit` (from `--dir` or the argument), else `$AIRLOCK_DIR`, else the current directory
/// if it holds `airlock.toml`; each checked to be a deployment.
pub(crate) fn locate(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(dir) = explicit {
        return checked(dir, "the command line");
    }
    if let Some(dir) = std::env::var_os(ENV).filter(|v| !v.is_empty()) {
        return checked(Path::new(&dir), "$AIRLOCK_DIR");
    }
    let here = std::env::current_dir().context("reading the current directory")?;
    if here.join(MARKER).is_file() {
        return Ok(here);
    }
    bail!(
        "no deployment found: pass --dir DIR or set ${ENV}, or run airlock in a directory holding \
         {MARKER} (there is none in {})",
        here.display()
    )
}

fn checked(dir: &Path, from: &str) -> anyhow::Result<PathBuf> {
    let shown = dir.display();
    if !dir.exists() {
        bail!("the deployment directory {shown} (from {from}) does not exist");
    }
    if !dir.is_dir() {
        bail!(
            "{shown} (from {from}) is not a directory: a deployment is a directory holding {MARKER}"
        );
    }
    if !dir.join(MARKER).is_file() {
        bail!("{shown} (from {from}) is not a deployment: it holds no {MARKER}");
    }
    Ok(dir.to_path_buf())
}

/// Loads and validates the deployment in `dir`, every problem in one message.
pub(crate) fn load(dir: &Path) -> anyhow::Result<Deployment> {
    Deployment::load(dir).map_err(|e| anyhow::anyhow!("{e}"))
}

/// The deployment's scopes as declared: the gateway's, then each agent's (connection files'
/// tools appear only once discovered).
pub(crate) fn scopes(deployment: &Deployment) -> Vec<airlock_spec::Scope> {
    let agents = deployment
        .agents
        .keys()
        .filter_map(|name| deployment.agent_scope(name));
    std::iter::once(deployment.gateway_scope())
        .chain(agents)
        .collect()
}

/// Opens the deployment's ledger only if it exists (PostgreSQL: the database must be there).
pub(crate) async fn existing_ledger(deployment: &Deployment) -> anyhow::Result<Arc<dyn Store>> {
    match ledger_if_any(deployment).await? {
        Some(store) => Ok(store),
        None => bail!(
            "no ledger at {}: nothing was recorded in this deployment yet (`airlock serve` or \
             `airlock call` creates it)",
            deployment.config.database_url
        ),
    }
}

/// The deployment's ledger, or `None` when it is a SQLite file not created yet (opening it
/// would create it).
pub(crate) async fn ledger_if_any(
    deployment: &Deployment,
) -> anyhow::Result<Option<Arc<dyn Store>>> {
    let config = &deployment.config;
    if let Some(path) = config.database_url.strip_prefix("sqlite://")
        && !Path::new(path).exists()
    {
        return Ok(None);
    }
    let settings = crate::boot::store_config(config, false);
    Ok(Some(
        crate::boot::open_ledger(&config.database_url, settings).await?,
    ))
}
