//! The command line: one module per subcommand, each calling the same library functions the
//! HTTP surfaces call.
//!
//! Guarantees: every command finds its deployment the same way ([`deployment`]); exit statuses
//! mean the same across commands ([`exit`]); a reader that closes the pipe early ends the
//! command quietly, never with a panic.

mod approvals;
mod audit;
mod backup;
mod call;
mod check;
mod credentials;
mod deployment;
mod discover;
mod egress;
mod exit;
mod freeze;
mod keys;
mod logs;
mod operator;
mod run;
mod serve;
mod tools;
mod vault;

use std::process::ExitCode;

use clap::{CommandFactory as _, Parser, Subcommand};

/// airlock: the gateway every tool call of an AI agent passes through.
#[derive(Debug, Parser)]
#[command(name = "airlock", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// How log lines on standard error are written (filter them with AIRLOCK_LOG).
    #[arg(long, global = true, value_enum, default_value_t)]
    log_format: logs::Format,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validate a deployment directory offline and list every scope's tools.
    Check(check::Args),
    /// Call one tool through the gateway (ledger, policy, egress guard) on channel `cli`.
    Call(call::Args),
    /// Run an agent of the deployment here, showing its progress (tool calls, parks, the answer).
    Run(run::Args),
    /// Start the gateway: validate, discover, migrate, serve.
    Serve(serve::Args),
    /// Manage the encrypted credentials file.
    #[command(subcommand)]
    Credentials(credentials::Command),
    /// List a live MCP server's tools through the guard and print a ready `type: mcp` block.
    Discover(discover::Args),
    /// Operator tools for the egress guard.
    #[command(subcommand)]
    Egress(egress::Command),
    /// Pinned tool definitions of connection files: what changed, and accepting it.
    #[command(subcommand)]
    Tools(tools::Command),
    /// Check the ledger's audit chain.
    #[command(subcommand)]
    Audit(audit::Command),
    /// Copy the SQLite ledger to a new file, consistently, while `serve` runs.
    Backup(backup::Args),
    /// Rotate the key that seals the MCP endpoint's input-request states.
    #[command(subcommand)]
    Keys(keys::Command),
    /// Principals' own credentials for connections declared `per_principal = true`.
    #[command(subcommand)]
    Vault(vault::Command),
    #[command(flatten)]
    Decisions(approvals::Command),
    #[command(flatten)]
    Freezes(freeze::Command),
    /// Print a shell completion script (e.g. `airlock completions bash > /etc/bash_completion.d/airlock`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// Parses the command line and runs the subcommand.
#[must_use]
pub fn run() -> ExitCode {
    quiet_on_closed_pipe();
    let cli = Cli::parse();
    // Diagnostics go to stderr through tracing; human output to stdout.
    let default = match cli.command {
        Command::Run(_) => logs::QUIET_FILTER,
        _ => logs::DEFAULT_FILTER,
    };
    if let Err(error) = logs::init(cli.log_format, default) {
        eprintln!("error: {error}");
        return ExitCode::from(exit::USAGE);
    }
    let result = match cli.command {
        Command::Check(args) => check::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Call(args) => call::run(&args),
        Command::Run(args) => run::run(&args),
        Command::Credentials(cmd) => credentials::run(cmd),
        Command::Discover(args) => discover::run(&args),
        Command::Egress(cmd) => egress::run(cmd),
        Command::Audit(cmd) => audit::run(cmd),
        Command::Backup(args) => backup::run(&args),
        Command::Keys(cmd) => keys::run(cmd),
        Command::Vault(cmd) => vault::run(cmd),
        Command::Tools(cmd) => tools::run(cmd),
        Command::Decisions(cmd) => approvals::run(cmd),
        Command::Freezes(cmd) => freeze::run(cmd),
        Command::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "airlock",
                &mut std::io::stdout(),
            );
            Ok(ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// std's print macros panic when the reader has gone (`airlock check --json | head -c 10`).
/// The reader chose to stop: exit 0 without a word instead of a panic message.
fn quiet_on_closed_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let closed = info.payload_as_str().is_some_and(|message| {
            message.starts_with("failed printing to std") && message.contains("Broken pipe")
        });
        if closed {
            std::process::exit(0);
        }
        default(info);
    }));
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    /// Every subcommand's arguments are well formed (unique names, valid defaults): clap checks
    /// a command only when it is parsed, so one no test runs would fail at its first use.
    #[test]
    fn every_command_is_well_formed() {
        super::Cli::command().debug_assert();
    }
}
