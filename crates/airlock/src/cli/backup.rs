//! `airlock backup DEST`: an online copy of the deployment's SQLite ledger, taken while
//! `serve` runs (docs/rules.md OPS-74, OPS-75).
//!
//! Guarantees: the copy is the ledger as of one instant, whatever is committed meanwhile
//! ([`airlock_ledger::backup_sqlite`]); it is written under a temporary name beside DEST,
//! synced, and only then given DEST's name, so DEST is either absent or a whole copy, never a
//! half-written file; an existing DEST is refused, never overwritten. The ledger is only read:
//! not migrated, not created. A PostgreSQL ledger is refused with the `pg_dump` command that
//! backs it up instead (OPS-75). The database URL is never printed (it may hold a password).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};

use super::deployment::DirArg;
use crate::durable::{self, Replace};

/// Arguments of `airlock backup`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The file to write the copy to; it must not exist.
    dest: PathBuf,
    #[command(flatten)]
    deployment: DirArg,
}

pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let (_, deployment) = args.deployment.load()?;
    let Some(source) = deployment.config.database_url.strip_prefix("sqlite://") else {
        bail!(
            "the ledger is on PostgreSQL: back it up with `pg_dump --format=custom --file=FILE \
             DATABASE_URL` (consistent while `serve` runs) and restore it with `pg_restore`; \
             see docs/operations.md, \"Backup and restore\""
        );
    };
    let source = Path::new(source);
    if !source.exists() {
        bail!(
            "no ledger at {}: nothing was recorded in this deployment yet",
            source.display()
        );
    }
    if args.dest.exists() {
        bail!(
            "{} exists: a backup never overwrites a file; name a new one",
            args.dest.display()
        );
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let bytes = runtime.block_on(copy(source, &args.dest))?;
    println!(
        "backed up the ledger {} to {} ({bytes} bytes)",
        source.display(),
        args.dest.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Copies `source` into a temporary file beside `dest`, then puts it in place as `dest`
/// (failing if `dest` appeared meanwhile); the copy's size.
async fn copy(source: &Path, dest: &Path) -> anyhow::Result<u64> {
    let dir = durable::parent(dest);
    let partial = tempfile::Builder::new()
        .prefix(".airlock-backup-")
        .suffix(".partial")
        .tempfile_in(dir)
        .with_context(|| format!("creating a file in {}", dir.display()))?;
    airlock_ledger::backup_sqlite(source, partial.path())
        .await
        .context("copying the ledger")?;
    // VACUUM INTO wrote through its own handle and left the pages to the OS's cache; syncing
    // the temporary file's handle flushes them (fsync is per file, not per handle).
    let bytes = partial.as_file().metadata()?.len();
    durable::put_in_place(partial, dest, Replace::Never)?;
    Ok(bytes)
}
