//! `airlock audit verify`: walks the deployment's audit chain (every session, run and
//! invocation against the hash-chained events) and names the first broken row.
//!
//! Guarantees: read-only — it opens the ledger the deployment names (migrating a fresh one, as
//! every command does) and changes nothing; it exits 0 only when the whole chain checks out,
//! and 1 naming the first break otherwise, so a cron job or CI step can alert on tampering.

use std::path::PathBuf;
use std::process::ExitCode;

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
        let store = super::approvals::open(&args.dir).await?;
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
