//! `airlock audit verify`: walks the deployment's audit chain (every session, run and
//! invocation against the hash-chained events) and names the first broken row.
//!
//! Guarantees: read-only — it reads the chain and the rows in one snapshot, so a serving
//! gateway's commits never look like tampering; it exits 0 only when the whole chain checks
//! out, and 1 naming the first break otherwise, so a cron job or CI step can alert on it. A
//! SQLite ledger that does not exist is an error, never an empty "intact" ledger created on
//! the spot (a wrong `--dir` or a deleted file must not pass).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use airlock_spec::Deployment;

/// Subcommands of `airlock audit`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Check the audit chain; exit 1 naming the first broken row.
    Verify(Args),
}

/// Arguments of `airlock audit verify`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The deployment directory (its `airlock.toml` names the database).
    #[arg(long, default_value = ".")]
    dir: PathBuf,
}

pub(crate) fn run(cmd: Command) -> anyhow::Result<ExitCode> {
    let Command::Verify(args) = cmd;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let deployment = Deployment::load(&args.dir).map_err(|e| anyhow::anyhow!("{e}"))?;
        if let Some(path) = deployment.config.database_url.strip_prefix("sqlite://")
            && !Path::new(path).exists()
        {
            anyhow::bail!(
                "no ledger at {path}: nothing to verify (is --dir the deployment directory?)"
            );
        }
        let config = &deployment.config;
        let store = crate::boot::open_store(&config.database_url, config.approval_ttl).await?;
        let report = store.verify().await?;
        Ok(match report.first_break {
            None => {
                println!(
                    "audit chain intact: {} rows, {} events",
                    report.rows, report.events
                );
                ExitCode::SUCCESS
            }
            Some(broken) => {
                println!("audit chain BROKEN: {broken}");
                ExitCode::FAILURE
            }
        })
    })
}
