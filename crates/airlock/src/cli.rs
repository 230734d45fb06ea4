//! The command line: one module per subcommand, each calling the same library functions the
//! HTTP surfaces call.

mod check;
mod credentials;
mod egress;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// airlock: the gateway every tool call of an AI agent passes through.
#[derive(Debug, Parser)]
#[command(name = "airlock", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validate a deployment directory offline and list every scope's tools.
    Check(check::Args),
    /// Manage the encrypted credentials file.
    #[command(subcommand)]
    Credentials(credentials::Command),
    /// Operator tools for the egress guard.
    #[command(subcommand)]
    Egress(egress::Command),
}

/// Parses the command line and runs the subcommand.
#[must_use]
pub fn run() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check(args) => check::run(&args),
        Command::Credentials(cmd) => credentials::run(cmd),
        Command::Egress(cmd) => egress::run(cmd),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
