//! `airlock egress check`: would the egress guard let this URL through, and where would it
//! connect? Runs the same checks as a real request (URL, name, one resolution, every address,
//! ports) with the deployment's policy, sends nothing. Exit 0 for allow, 3 for block.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use airlock_egress::{
    EgressPolicy, Resolve, StaticResolver, SystemResolver, check_join, check_url,
};
use anyhow::{Context as _, bail};

use super::deployment::{load, locate};
use super::exit::BLOCKED;

/// Subcommands of `airlock egress`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Check a URL, or a base URL joined with a declared path.
    Check(CheckArgs),
}

/// Arguments of `airlock egress check`.
#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    /// The URL to check (omit with --base/--path).
    url: Option<String>,
    /// Replace DNS with these answers: HOST=ADDR[,ADDR…] (repeatable); checks offline.
    #[arg(long = "resolve", value_name = "HOST=ADDR,…")]
    resolve: Vec<String>,
    /// Apply this deployment's `[egress]` policy (default: the built-in policy).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// A connection's base URL, joined with --path as an api tool would.
    #[arg(long, requires = "path", conflicts_with = "url")]
    base: Option<String>,
    /// A declared request path, joined to --base.
    #[arg(long, requires = "base")]
    path: Option<String>,
}

pub(crate) fn run(cmd: Command) -> anyhow::Result<ExitCode> {
    let Command::Check(args) = cmd;
    let policy = match &args.dir {
        // Located as every command does: a mistyped --dir is an error, not the default policy.
        Some(dir) => airlock_runtime::egress_policy(&load(&locate(Some(dir))?)?.config.egress),
        None => EgressPolicy::default(),
    };
    let resolver: Arc<dyn Resolve> = if args.resolve.is_empty() {
        Arc::new(
            SystemResolver::from_system_conf()
                .context("reading the system resolver configuration")?,
        )
    } else {
        Arc::new(StaticResolver::parse_overrides(
            args.resolve.iter().map(String::as_str),
        )?)
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(async {
        match (&args.url, &args.base, &args.path) {
            (Some(url), None, None) => Ok(check_url(&policy, url, resolver.as_ref()).await),
            (None, Some(base), Some(path)) => {
                Ok(check_join(&policy, base, path, resolver.as_ref()).await)
            }
            _ => bail!("give a URL, or --base and --path"),
        }
    })?;
    println!("{report}");
    Ok(if report.is_allowed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(BLOCKED)
    })
}
