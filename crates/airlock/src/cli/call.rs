//! `airlock call TOOL --args JSON [--agent NAME]`: one tool call through the gateway's one path
//! (ledger row, policy, egress guard) on channel `cli` — handy for testing a declaration.
//! Exit 0 when the call completed without a tool error, 1 otherwise (parked, denied, failed).

use std::path::PathBuf;
use std::process::ExitCode;

use airlock_ledger::InvocationId;
use airlock_runtime::{CallContext, OutcomeKind};
use airlock_spec::ScopeId;
use anyhow::Context as _;
use serde_json::{Value, json};

use crate::boot::boot;

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
    /// The deployment directory.
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// The principal recorded on the call (default: the OS user).
    #[arg(long = "as")]
    principal: Option<String>,
}

pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let arguments: Value =
        serde_json::from_str(&args.args).context("--args must be a JSON object")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(call(args, arguments))
}

async fn call(args: &Args, arguments: Value) -> anyhow::Result<ExitCode> {
    let booted = boot(&args.dir).await?;
    let scope = args.agent.clone().map_or(ScopeId::Gateway, ScopeId::Agent);
    let principal = args
        .principal
        .clone()
        .or_else(|| std::env::var("USER").ok());
    let session = booted
        .gateway
        .open_session("cli", principal.clone(), &scope)
        .await?;
    let ctx = CallContext {
        scope,
        session,
        call_id: InvocationId::new().to_string(),
        principal,
    };
    let outcome = booted.gateway.call(&ctx, &args.tool, arguments).await?;
    let row = outcome.invocation();
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({
            "invocation_id": row.id.to_string(),
            "state": row.state.to_string(),
            "result": crate::result::result_json(row),
        }))?
    );
    let ok = outcome.kind() == OutcomeKind::Completed && row.error.is_none();
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
