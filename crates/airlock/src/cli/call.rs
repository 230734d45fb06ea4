//! `airlock call TOOL --args JSON [--agent NAME]`: one tool call through the gateway's one path
//! (ledger row, policy, egress guard) on channel `cli` — handy for testing a declaration. It
//! prints the row as JSON, indented (`--json`: on one line).
//!
//! Guarantees: the principal recorded is `--as` or the OS user, never a placeholder (no name,
//! no call); the exit status says what became of the call ([`super::exit`]): 0 it completed,
//! 4 it waits for a person and nothing ran, 5 it settled without success, 6 it may have run
//! and waits for a person to settle it; 1 is left to errors of the command itself.

use std::path::Path;
use std::process::ExitCode;

use airlock_ledger::{Invocation, InvocationId, InvocationState};
use airlock_runtime::{CallContext, OutcomeKind};
use airlock_spec::ScopeId;
use serde_json::{Value, json};

use crate::boot::boot;

use super::deployment::DirArg;
use super::exit;
use super::operator::AsArg;

/// Arguments of `airlock call`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The tool's name in its scope.
    tool: String,
    /// The arguments, as a JSON object.
    #[arg(long, default_value = "{}")]
    args: String,
    /// Call a tool of this agent's scope (default: the gateway scope).
    #[arg(long)]
    agent: Option<String>,
    #[command(flatten)]
    deployment: DirArg,
    /// The principal recorded on the call.
    #[command(flatten)]
    principal: AsArg,
    /// Print the JSON on one line (default: indented).
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let parsed = serde_json::from_str::<Value>(&args.args).ok();
    let Some(arguments) = parsed.filter(Value::is_object) else {
        // A usage error like clap's own (exit 2), not a failed call (OPS-20).
        eprintln!("error: --args must be a JSON object, e.g. --args '{{\"id\": \"7\"}}'");
        return Ok(ExitCode::from(exit::USAGE));
    };
    let principal = args.principal.resolve("calling")?;
    let dir = args.deployment.locate()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(call(args, &dir, principal, arguments))
}

async fn call(
    args: &Args,
    dir: &Path,
    principal: String,
    arguments: Value,
) -> anyhow::Result<ExitCode> {
    let booted = boot(dir).await?;
    let scope = args.agent.clone().map_or(ScopeId::Gateway, ScopeId::Agent);
    let session = booted
        .gateway
        .open_session("cli", Some(principal.clone()), &scope)
        .await?;
    let ctx = CallContext {
        scope,
        session,
        call_id: InvocationId::new().to_string(),
        principal: Some(principal),
        // The operator at the deployment: `[[access]]` binds token callers (POLICY-47).
        groups: None,
        channel: "cli",
        downstream: Default::default(),
    };
    let outcome = booted.gateway.call(&ctx, &args.tool, arguments).await?;
    let row = outcome.invocation();
    let printed = json!({
        "invocation_id": row.id.to_string(),
        "state": row.state.to_string(),
        "result": crate::result::result_json(row),
    });
    if args.json {
        println!("{printed}");
    } else {
        println!("{}", serde_json::to_string_pretty(&printed)?);
    }
    Ok(status(outcome.kind(), row))
}

/// What became of the call, as an exit status.
fn status(kind: OutcomeKind, row: &Invocation) -> ExitCode {
    match kind {
        OutcomeKind::Completed if row.error.is_none() => ExitCode::SUCCESS,
        OutcomeKind::Completed
        | OutcomeKind::Denied
        | OutcomeKind::Expired
        | OutcomeKind::Abandoned
        | OutcomeKind::InputRequired => ExitCode::from(exit::CALL_FAILED),
        OutcomeKind::Parked
            if matches!(
                row.state,
                InvocationState::InDoubt | InvocationState::Running
            ) =>
        {
            ExitCode::from(exit::IN_DOUBT)
        }
        OutcomeKind::Parked | OutcomeKind::Proposed => ExitCode::from(exit::PARKED),
    }
}
