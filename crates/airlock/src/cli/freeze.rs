//! The kill switch from the command line: `airlock freeze KIND [NAME] --reason R`, `airlock
//! unfreeze KIND [NAME]`, `airlock freezes` (docs/rules.md POLICY-51 … POLICY-56).
//!
//! Like the decision commands, it writes the deployment's ledger directly, so it works from any
//! machine that reaches the database, and every serving replica holds the change within its
//! refresh period. The operator is `--as NAME` or the OS user.

use std::process::ExitCode;

use airlock_ledger::{Freeze, FreezeTarget};
use anyhow::Context as _;

use super::approvals::{Reader, open, print_json};
use super::operator::AsArg;
use crate::result::freeze_json;

/// The freeze commands, flattened into the top level of `airlock`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Freeze everything, an agent, a principal, a connection or a tool: its calls are refused
    /// (recorded `denied` by the freeze) and decisions that would let them run wait.
    Freeze(FreezeArgs),
    /// Lift a freeze.
    Unfreeze(UnfreezeArgs),
    /// List the freezes in force.
    Freezes(Reader),
}

/// Which target: `everything`, or a kind and a name.
#[derive(Debug, clap::Args)]
pub(crate) struct TargetArgs {
    /// `everything`, `agent`, `principal`, `connection` or `tool`.
    kind: String,
    /// The agent's, principal's, connection's or tool's name (none for `everything`).
    #[arg(value_name = "NAME")]
    target: Option<String>,
}

impl TargetArgs {
    fn target(&self) -> anyhow::Result<FreezeTarget> {
        Ok(FreezeTarget::parse(
            &self.kind,
            self.target.as_deref().unwrap_or_default(),
        )?)
    }
}

/// Arguments of `airlock freeze`.
#[derive(Debug, clap::Args)]
pub(crate) struct FreezeArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// Why: shown to every caller refused and every person asked to decide.
    #[arg(long)]
    reason: String,
    #[command(flatten)]
    reader: Reader,
    #[command(flatten)]
    operator: AsArg,
}

/// Arguments of `airlock unfreeze`.
#[derive(Debug, clap::Args)]
pub(crate) struct UnfreezeArgs {
    #[command(flatten)]
    target: TargetArgs,
    #[command(flatten)]
    reader: Reader,
    #[command(flatten)]
    operator: AsArg,
}

/// Runs a freeze command.
pub(crate) fn run(cmd: Command) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(dispatch(cmd))
}

async fn dispatch(cmd: Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::Freeze(args) => freeze(args).await,
        Command::Unfreeze(args) => unfreeze(args).await,
        Command::Freezes(reader) => list(&reader).await,
    }
}

async fn freeze(args: FreezeArgs) -> anyhow::Result<ExitCode> {
    let target = args.target.target()?;
    let by = args.operator.resolve("freezing")?;
    // A deployment may be frozen before it first serves: the ledger is created if need be.
    let (_, deployment) = args.reader.deployment.load()?;
    let store = crate::boot::open_ledger(
        &deployment.config.database_url,
        crate::boot::store_config(&deployment.config, false),
    )
    .await?;
    let asked = Freeze {
        target: target.clone(),
        reason: args.reason.clone(),
        by: by.clone(),
        at: time::OffsetDateTime::now_utc(),
    };
    let stored = store
        .freeze(asked)
        .await
        .with_context(|| format!("freezing {target}"))?;
    tracing::warn!(freeze = %stored.target, by = stored.by, reason = stored.reason, "frozen");
    if args.reader.json() {
        print_json(&freeze_json(&stored))?;
    } else if stored.by == by && stored.reason == args.reason {
        println!(
            "{target} frozen by {by}: its calls are refused on every serving replica within a second"
        );
    } else {
        println!(
            "{target} was frozen already by {} ({}); that freeze stands",
            stored.by, stored.reason
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn unfreeze(args: UnfreezeArgs) -> anyhow::Result<ExitCode> {
    let target = args.target.target()?;
    let by = args.operator.resolve("unfreezing")?;
    let store = open(&args.reader).await?;
    let lifted = store
        .unfreeze(target.clone(), by.clone())
        .await
        .with_context(|| format!("unfreezing {target}"))?;
    if lifted.is_some() {
        tracing::warn!(freeze = %target, by, "unfrozen");
    }
    match lifted {
        Some(lifted) if args.reader.json() => print_json(&freeze_json(&lifted))?,
        Some(_) => println!("{target} unfrozen by {by}"),
        None => anyhow::bail!("{target} is not frozen"),
    }
    Ok(ExitCode::SUCCESS)
}

async fn list(reader: &Reader) -> anyhow::Result<ExitCode> {
    let store = open(reader).await?;
    let freezes = store.freezes().await?;
    if reader.json() {
        let listed: Vec<_> = freezes.iter().map(freeze_json).collect();
        print_json(&serde_json::json!({ "freezes": listed }))?;
    } else if freezes.is_empty() {
        println!("nothing is frozen");
    } else {
        for f in &freezes {
            let at = freeze_json(f)["at"].as_str().unwrap_or_default().to_owned();
            println!("{}\tby {} at {at}\t{}", f.target, f.by, f.reason);
        }
    }
    Ok(ExitCode::SUCCESS)
}
