//! Decisions from the command line: `airlock approvals list`, `airlock approve|deny|answer|
//! resolve ID`, `airlock invocations show ID`.
//!
//! The CLI opens the deployment's ledger directly (SQLite file or PostgreSQL, so it works from
//! any machine that reaches the database) and makes the same single compare-and-swap the HTTP
//! API makes; the decider is `--as NAME` or the OS user. It never runs a tool: an approved
//! call is claimed and run by the serving gateway's worker (or a waiting client).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use airlock_ledger::{Decision, Invocation, InvocationId, InvocationState, Resolution, Store};
use airlock_spec::Deployment;
use anyhow::Context as _;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use airlock_runtime::decisions::pending;

/// The decision commands, flattened into the top level of `airlock`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// What waits for a person (approvals, questions, calls in doubt).
    #[command(subcommand)]
    Approvals(ApprovalsCommand),
    /// Approve a parked call; the serving gateway's worker then runs it once.
    Approve(Target),
    /// Decline a parked call or question.
    Deny(DenyArgs),
    /// Answer a question (`ask_human`).
    Answer(AnswerArgs),
    /// Settle a call in doubt: did it run upstream or not, or give up on it?
    Resolve(ResolveArgs),
    /// Read invocations.
    #[command(subcommand)]
    Invocations(InvocationsCommand),
}

/// Subcommands of `airlock approvals`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum ApprovalsCommand {
    /// List what waits for a person, oldest first.
    List(ListArgs),
}

/// Subcommands of `airlock invocations`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum InvocationsCommand {
    /// Show one invocation.
    Show(Target),
}

/// Where the deployment is and who is deciding.
#[derive(Debug, clap::Args)]
pub(crate) struct Operator {
    /// The deployment directory (its `airlock.toml` names the database).
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// The decider's name (default: the OS user from $USER or $LOGNAME).
    #[arg(long = "as", value_name = "NAME")]
    as_: Option<String>,
}

/// Arguments of `airlock approvals list`.
#[derive(Debug, clap::Args)]
pub(crate) struct ListArgs {
    #[command(flatten)]
    operator: Operator,
    /// Only this tool.
    #[arg(long)]
    tool: Option<String>,
    /// Only calls by this principal.
    #[arg(long)]
    principal: Option<String>,
    /// Only calls made in this agent's scope.
    #[arg(long)]
    agent: Option<String>,
    /// At most this many rows.
    #[arg(long)]
    limit: Option<u32>,
    /// Skip this many rows.
    #[arg(long)]
    offset: Option<u32>,
}

/// One invocation.
#[derive(Debug, clap::Args)]
pub(crate) struct Target {
    /// The invocation id.
    id: InvocationId,
    #[command(flatten)]
    operator: Operator,
}

/// Arguments of `airlock deny`.
#[derive(Debug, clap::Args)]
pub(crate) struct DenyArgs {
    #[command(flatten)]
    target: Target,
    /// Why (shown to the caller).
    #[arg(long)]
    reason: String,
}

/// Arguments of `airlock answer`.
#[derive(Debug, clap::Args)]
pub(crate) struct AnswerArgs {
    #[command(flatten)]
    target: Target,
    /// The answer (the question's result).
    #[arg(long)]
    text: String,
}

/// What happened upstream to a call in doubt.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum Outcome {
    /// It ran: the row settles as resolved.
    Ran,
    /// It did not run: the row is approved again and runs once more.
    // Spelled as the API and the ledger spell it (clap's default would be `did-not-run`).
    #[value(name = "did_not_run", alias = "did-not-run")]
    DidNotRun,
    /// Give up on it (the note is the reason): the row is abandoned and never runs.
    Abandoned,
}

/// Arguments of `airlock resolve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ResolveArgs {
    #[command(flatten)]
    target: Target,
    /// Whether the call ran upstream, or that it is given up.
    #[arg(long, value_enum)]
    outcome: Outcome,
    /// What you checked (for `abandoned`: why it is given up; required).
    #[arg(long, visible_alias = "reason")]
    note: String,
}

pub(crate) fn run(cmd: Command) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(dispatch(cmd))?;
    Ok(ExitCode::SUCCESS)
}

async fn dispatch(cmd: Command) -> anyhow::Result<()> {
    match cmd {
        Command::Approvals(ApprovalsCommand::List(args)) => list(&args).await,
        Command::Invocations(InvocationsCommand::Show(target)) => {
            let store = open(&target.operator.dir).await?;
            let row = store.get(target.id).await?;
            print!("{}", describe(&row));
            Ok(())
        }
        Command::Approve(target) => decide(&target, Decision::Approve).await,
        Command::Deny(DenyArgs { target, reason }) => {
            decide(&target, Decision::Deny { reason }).await
        }
        Command::Answer(AnswerArgs { target, text }) => {
            decide(&target, Decision::Answer { text }).await
        }
        Command::Resolve(ResolveArgs {
            target,
            outcome,
            note,
        }) => {
            let resolution = match outcome {
                Outcome::Ran => Resolution::Ran,
                Outcome::DidNotRun => Resolution::DidNotRun,
                Outcome::Abandoned => Resolution::Abandoned,
            };
            decide(&target, Decision::Resolve { resolution, note }).await
        }
    }
}

/// Opens the deployment's ledger.
async fn open(dir: &Path) -> anyhow::Result<Arc<dyn Store>> {
    let deployment = Deployment::load(dir).map_err(|e| anyhow::anyhow!("{e}"))?;
    let config = &deployment.config;
    crate::boot::open_store(&config.database_url, config.approval_ttl).await
}

/// `--as`, else the OS user.
fn decider(operator: &Operator) -> anyhow::Result<String> {
    if let Some(name) = operator.as_.as_ref().filter(|n| !n.trim().is_empty()) {
        return Ok(name.clone());
    }
    ["USER", "LOGNAME"]
        .iter()
        .find_map(|var| std::env::var(var).ok().filter(|v| !v.trim().is_empty()))
        .context("who is deciding? pass --as NAME (neither $USER nor $LOGNAME is set)")
}

async fn decide(target: &Target, decision: Decision) -> anyhow::Result<()> {
    let by = decider(&target.operator)?;
    let store = open(&target.operator.dir).await?;
    let row = store
        .decide(target.id, &by, decision)
        .await
        .with_context(|| format!("deciding {}", target.id))?;
    let next = match row.state {
        InvocationState::Approved => {
            "the serving gateway's worker runs it (`airlock invocations show` to follow)"
        }
        InvocationState::Denied => "the caller sees the refusal",
        InvocationState::Succeeded => "the answer is the call's result",
        InvocationState::Resolved => "settled as run",
        InvocationState::Abandoned => "given up: it never runs",
        InvocationState::Pending
        | InvocationState::AwaitingApproval
        | InvocationState::AwaitingAnswer
        | InvocationState::Running
        | InvocationState::InDoubt
        | InvocationState::Failed
        | InvocationState::Expired
        | InvocationState::Proposed => "",
    };
    println!("{} {} ({}) by {by}: {next}", row.state, row.id, row.tool);
    Ok(())
}

async fn list(args: &ListArgs) -> anyhow::Result<()> {
    let store = open(&args.operator.dir).await?;
    let query = pending::Query {
        tool: args.tool.clone(),
        principal: args.principal.clone(),
        agent: args.agent.clone(),
        older_than: None,
        limit: args.limit,
        offset: args.offset,
    };
    let page = pending::list(store.as_ref(), &query).await?;
    if page.rows.is_empty() {
        println!("nothing waits for a person");
        return Ok(());
    }
    println!(
        "{:<36}  {:<17}  {:<24}  {:<16}  {:<20}  ARGUMENTS",
        "ID", "STATE", "TOOL", "PRINCIPAL", "RECORDED"
    );
    for row in &page.rows {
        println!(
            "{:<36}  {:<17}  {:<24}  {:<16}  {:<20}  {}",
            row.id.to_string(),
            row.state.to_string(),
            row.tool,
            row.principal.as_deref().unwrap_or("-"),
            timestamp(row.created_at),
            shorten(&row.arguments.to_string(), 60),
        );
    }
    if let Some(next) = page.next_offset {
        println!("more: --offset {next}");
    }
    Ok(())
}

/// A row as `airlock invocations show` prints it.
fn describe(row: &Invocation) -> String {
    let mut out = format!(
        "id          {}\ntool        {}\nstate       {}\nprincipal   {}\nsession     {}\nrecorded    {}\narguments   {}\n",
        row.id,
        row.tool,
        row.state,
        row.principal.as_deref().unwrap_or("-"),
        row.session_id,
        timestamp(row.created_at),
        row.arguments,
    );
    if let Some(expires) = row.expires_at {
        out.push_str(&format!("expires     {}\n", timestamp(expires)));
    }
    if let Some(d) = &row.decision {
        let reason = d
            .reason
            .as_deref()
            .map(|r| format!(": {r}"))
            .unwrap_or_default();
        out.push_str(&format!(
            "decision    {} by {} at {}{reason}\n",
            d.decision,
            d.by,
            timestamp(d.at)
        ));
    }
    if let Some(r) = &row.resolution {
        out.push_str(&format!(
            "resolution  {} by {} at {}: {}\n",
            r.resolution,
            r.by,
            timestamp(r.at),
            r.note
        ));
    }
    if let Some(result) = crate::result::result_json(row) {
        out.push_str(&format!("result      {result}\n"));
    }
    out
}

fn timestamp(t: OffsetDateTime) -> String {
    t.replace_nanosecond(0)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| t.to_string())
}

fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let cut: String = text.chars().take(max.saturating_sub(1)).collect();
    format!("{cut}…")
}
