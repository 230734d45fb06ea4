//! `airlock keys rotate`: a new key for the MCP endpoint's input-request states, the current
//! one kept to open the states sealed before (docs/rules.md OPS-76).
//!
//! Guarantees: only the generated key file is rotated here
//! ([`crate::state_key::rotate`]); a deployment whose key is a credential
//! (`[mcp] request_state_key`) is refused with where the procedure is, since its replicas must
//! each be given the new key before any seals with it. Nothing is printed of either key. A
//! running `serve` seals with the new key from its next start.

use std::process::ExitCode;

use anyhow::bail;

use super::deployment::DirArg;

/// Subcommands of `airlock keys`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Generate a new MCP request-state key; the current one keeps opening earlier states.
    Rotate(Args),
}

/// Arguments of `airlock keys rotate`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    deployment: DirArg,
}

pub(crate) fn run(cmd: Command) -> anyhow::Result<ExitCode> {
    let Command::Rotate(args) = cmd;
    let (_, deployment) = args.deployment.load()?;
    let Some(file) = crate::state_key::key_file(&deployment) else {
        bail!(
            "the request-state key is a credential ([mcp] request_state_key): rotate it as \
             docs/operations.md, \"Key rotation\", says (the new key first as one of \
             request_state_previous_keys on every replica, then as request_state_key)"
        );
    };
    let retired = crate::state_key::rotate(&file)?;
    let kept = if retired {
        "; the previous key still opens the states sealed before (for their 10 minutes)"
    } else {
        ""
    };
    println!(
        "new MCP request-state key in {}{kept}; restart `airlock serve` to seal with it",
        file.display()
    );
    Ok(ExitCode::SUCCESS)
}
