//! `airlock tools diff` and `airlock tools accept CONNECTION [TOOL]`: the connection tools a
//! boot withholds because their definitions differ from their pins, and the skills whose
//! entries differ from theirs (docs/rules.md OPS-49, OPS-50, OPS-79).
//!
//! Guarantees: `diff` asks every connection server for its tools now (through the egress
//! guard), and for its skills, and writes nothing; it exits 0 when nothing waits and 1 when something does, so a
//! script can alert. `accept` pins what the server says now for the connection (or one tool),
//! recorded under `--as`; a running `serve` serves it from its next boot.

use std::process::ExitCode;

use airlock_egress::GuardedClient;
use airlock_mcp::McpClient;
use airlock_runtime::pins::{self, Difference, Pending};
use airlock_runtime::{Offered, discover, egress_policy};
use airlock_spec::Credentials;
use anyhow::Context as _;

use super::deployment::{DirArg, existing_ledger};
use super::operator::AsArg;

/// Subcommands of `airlock tools`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// List the connection tools withheld until accepted (changed, new, renamed, removed); exit
    /// 1 when any waits.
    Diff(DiffArgs),
    /// Accept what a connection's server says now (every waiting tool, or only TOOL).
    Accept(AcceptArgs),
}

/// Arguments of `airlock tools diff`.
#[derive(Debug, clap::Args)]
pub(crate) struct DiffArgs {
    #[command(flatten)]
    deployment: DirArg,
}

/// Arguments of `airlock tools accept`.
#[derive(Debug, clap::Args)]
pub(crate) struct AcceptArgs {
    /// The connection file's namespace (`connections/<name>.yml`).
    connection: String,
    /// One tool of it (its name on the server) or skill (the URI of its SKILL.md there);
    /// default: everything of it that waits.
    tool: Option<String>,
    #[command(flatten)]
    deployment: DirArg,
    #[command(flatten)]
    by: AsArg,
}

pub(crate) fn run(cmd: Command) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    match cmd {
        Command::Diff(args) => runtime.block_on(diff(&args.deployment)),
        Command::Accept(args) => {
            let by = args.by.resolve("accepting tool definitions")?;
            runtime.block_on(accept(&args, &by))
        }
    }
}

/// What waits, as discovered now against the ledger's pins.
async fn pending(
    deployment: &DirArg,
) -> anyhow::Result<(Vec<Pending>, std::sync::Arc<dyn airlock_ledger::Store>)> {
    let (dir, deployment) = deployment.load()?;
    let config = &deployment.config;
    let credentials = Credentials::load(&dir, &config.credentials, std::env::vars())?;
    let guard = GuardedClient::new(egress_policy(&config.egress)).context("the egress client")?;
    let client = McpClient::new(guard);
    let connections = &deployment.connections;
    let discovered = discover(&client, connections, &credentials).await?;
    let mut offered =
        Offered::discover(&client, &[], connections, &Default::default(), &credentials).await?;
    let store = existing_ledger(&deployment).await?;
    let pinned = pins::pinned_connections(store.as_ref()).await?;
    let mut checked = pins::check(store.as_ref(), discovered, false).await?;
    let skills = offered.pin_skills(store.as_ref(), &pinned, false).await?;
    checked.pending.extend(skills);
    Ok((checked.pending, store))
}

async fn diff(deployment: &DirArg) -> anyhow::Result<ExitCode> {
    let (pending, _) = pending(deployment).await?;
    if pending.is_empty() {
        println!("every connection tool and skill matches its pin");
        return Ok(ExitCode::SUCCESS);
    }
    for p in &pending {
        println!("{}", p.describe());
        match &p.difference {
            Difference::Changed { pinned } => {
                println!("  pinned: {pinned}\n  now:    {}", p.definition);
            }
            Difference::New | Difference::Renamed { .. } => println!("  now: {}", p.definition),
            Difference::Removed { pinned } => println!("  pinned: {pinned}"),
        }
    }
    println!("accept with: airlock tools accept CONNECTION [TOOL]");
    Ok(ExitCode::FAILURE)
}

async fn accept(args: &AcceptArgs, by: &str) -> anyhow::Result<ExitCode> {
    let (pending, store) = pending(&args.deployment).await?;
    let accepted = pins::accept(
        store.as_ref(),
        &pending,
        &args.connection,
        args.tool.as_deref(),
        by,
    )
    .await?;
    for p in &accepted {
        println!("accepted: {}", p.describe());
    }
    println!("a running `airlock serve` serves them from its next start");
    Ok(ExitCode::SUCCESS)
}
