//! `airlock audit verify`: walks the deployment's audit chain (every session, run and
//! invocation against the hash-chained events) and names the first broken row; `airlock audit
//! export` writes the audit events out as JSON lines ([`export`]).
//!
//! Guarantees: read-only — it reads the chain and the rows in one snapshot, so a serving
//! gateway's commits never look like tampering; it exits 0 only when the whole chain checks
//! out, and 1 naming the first break otherwise, so a cron job or CI step can alert on it. A
//! SQLite ledger that does not exist is an error, never an empty "intact" ledger created on
//! the spot (a wrong `--dir` or a deleted file must not pass). `--json` prints
//! `{"intact", "rows", "events", "first_break"}` with the same exit status.

mod export;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;

use super::deployment::{DirArg, existing_ledger};

/// Subcommands of `airlock audit`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Check the audit chain; exit 1 naming the first broken row.
    Verify(Args),
    /// Append the audit events not yet exported to a JSON-lines file (`[audit.export] file`,
    /// or `--to`; `--to -` prints every event).
    Export(ExportArgs),
}

/// Arguments of `airlock audit export`.
#[derive(Debug, clap::Args)]
pub(crate) struct ExportArgs {
    #[command(flatten)]
    deployment: DirArg,
    /// The JSON-lines file to append to (default `[audit.export] file`); `-`: every event to
    /// standard output.
    #[arg(long)]
    to: Option<PathBuf>,
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
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    match cmd {
        Command::Verify(args) => runtime.block_on(verify(args)),
        Command::Export(args) => runtime.block_on(export(args)),
    }
}

/// `airlock audit export` (docs/rules.md OPS-83 … OPS-85).
async fn export(args: ExportArgs) -> anyhow::Result<ExitCode> {
    let (_, deployment) = args.deployment.load()?;
    let settings = &deployment.config.audit_export;
    let to = args.to.or_else(|| settings.file.clone()).context(
        "no file to export to: pass `--to FILE` (or `-`), or set `[audit.export] file` in airlock.toml",
    )?;
    let store = existing_ledger(&deployment).await?;
    let trail = store.audit_trail().await?;
    let lines = export::lines(&trail, settings.include_arguments);
    if to.as_os_str() == "-" {
        for (_, line) in &lines {
            println!("{line}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let (appended, held) = export::append(&to, &lines)?;
    println!(
        "exported {appended} new audit events to {} ({held} already there)",
        to.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `airlock audit verify`.
async fn verify(args: Args) -> anyhow::Result<ExitCode> {
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
}
