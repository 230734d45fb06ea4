//! `airlock audit verify`: walks the deployment's audit chain (every session, run and
//! invocation against the hash-chained events) and names the first broken row.
//!
//! Guarantees: read-only — it reads the chain and the rows in one snapshot, so a serving
//! gateway's commits never look like tampering; it exits 0 only when the whole chain checks
//! out, and 1 naming the first break otherwise, so a cron job or CI step can alert on it. A
//! SQLite ledger that does not exist is an error, never an empty "intact" ledger created on
//! the spot (a wrong `--dir` or a deleted file must not pass). `--json` prints
//! `{"intact", "rows", "events", "first_break"}` with the same exit status.

use std::process::ExitCode;

use super::deployment::{DirArg, existing_ledger};

/// Subcommands of `airlock audit`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Check the audit chain; exit 1 naming the first broken row.
    Verify(Args),
}

/// Arguments of `airlock audit verify`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    deployment: DirArg,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(cmd: Command) -> anyhow::Result<ExitCode> {
    let Command::Verify(args) = cmd;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let (_, deployment) = args.deployment.load()?;
        let store = existing_ledger(&deployment).await?;
        let report = store.verify().await?;
        if args.json {
            println!(
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({
                    "intact": report.first_break.is_none(),
                    "rows": report.rows,
                    "events": report.events,
                    "first_break": report.first_break.as_ref().map(ToString::to_string),
                }))?
            );
        } else if let Some(broken) = &report.first_break {
            println!("audit chain BROKEN: {broken}");
        } else {
            println!(
                "audit chain intact: {} rows, {} events",
                report.rows, report.events
            );
        }
        Ok(if report.first_break.is_none() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        })
    })
}
