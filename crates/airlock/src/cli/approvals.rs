//! Decisions from the command line: `airlock approvals list`, `airlock approve|deny|answer|
//! resolve|record ID`, `airlock invocations show ID`.
//!
//! The CLI opens the deployment's ledger directly (SQLite file or PostgreSQL, so it works from
//! any machine that reaches the database) and makes the same single compare-and-swap the HTTP
//! API makes; the decider is `--as NAME` or the OS user. It never runs a tool: an approved
//! call is claimed and run by the serving gateway's worker (or a waiting client). An approval
//! with edited arguments (`approve ID --arguments JSON`, DECIDE-20) also loads the deployment's
//! declarations, to check them before anything is decided (DECIDE-21).
//!
//! Guarantees: it never creates a ledger (a wrong deployment is an error, not "nothing waits");
//! only the deciding commands take `--as`; `--json` prints exactly what the HTTP API answers
//! for the same question.

use std::process::ExitCode;
use std::sync::Arc;

use airlock_ledger::{
    CallerOutcome, Decision, DecisionKind, Invocation, InvocationId, InvocationState, Resolution,
    Store,
};
use anyhow::Context as _;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use airlock_runtime::decisions::pending;

use super::deployment::{self, DirArg};
use super::operator::AsArg;
use crate::result::{approvals_json, invocation_json};

/// The decision commands, flattened into the top level of `airlock`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// What waits for a person (approvals, questions, calls in doubt).
    #[command(subcommand)]
    Approvals(ApprovalsCommand),
    /// Approve a parked call; the serving gateway's worker then runs it once.
    Approve(ApproveArgs),
    /// Decline a parked call or question.
    Deny(DenyArgs),
    /// Answer a question (`ask_human`).
    Answer(AnswerArgs),
    /// Settle a call in doubt: did it run upstream or not, or give up on it?
    Resolve(ResolveArgs),
    /// Record how a proposal you executed (or rejected) yourself went; airlock never runs it.
    Record(RecordArgs),
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
    Show(ShowArgs),
}

/// Where the deployment is, and how to print.
#[derive(Debug, clap::Args)]
pub(crate) struct Reader {
    #[command(flatten)]
    pub(super) deployment: DirArg,
    /// Print JSON, as the HTTP API answers.
    #[arg(long)]
    json: bool,
}

impl Reader {
    /// Whether to print JSON.
    pub(super) fn json(&self) -> bool {
        self.json
    }
}

/// Arguments of `airlock approvals list`.
#[derive(Debug, clap::Args)]
pub(crate) struct ListArgs {
    #[command(flatten)]
    reader: Reader,
    /// Only calls waiting for this: approval, question, proposal or in_doubt.
    #[arg(long)]
    kind: Option<pending::Waiting>,
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

/// Arguments of `airlock invocations show`.
#[derive(Debug, clap::Args)]
pub(crate) struct ShowArgs {
    /// The invocation id.
    id: InvocationId,
    #[command(flatten)]
    reader: Reader,
}

/// One invocation to decide, and who decides it.
#[derive(Debug, clap::Args)]
pub(crate) struct Target {
    /// The invocation id.
    id: InvocationId,
    #[command(flatten)]
    reader: Reader,
    /// The decider.
    #[command(flatten)]
    decider: AsArg,
}

/// Arguments of `airlock approve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ApproveArgs {
    #[command(flatten)]
    target: Target,
    /// Approve with these arguments (a JSON object) instead of the proposed ones; they are
    /// checked against the tool's declaration first (docs/rules.md DECIDE-20, DECIDE-21).
    #[arg(long)]
    arguments: Option<String>,
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
    // Spelled as the API and the ledger spell it; `did-not-run` (clap's default) still parses.
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

/// Arguments of `airlock record`: exactly one outcome.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("outcome").required(true).args(["result", "tool_error", "rejected"])))]
pub(crate) struct RecordArgs {
    #[command(flatten)]
    target: Target,
    /// It ran; what it returned (JSON; anything else is kept as a string).
    #[arg(long)]
    result: Option<String>,
    /// It ran and the tool reported this error.
    #[arg(long)]
    tool_error: Option<String>,
    /// You did not execute it, and why.
    #[arg(long)]
    rejected: Option<String>,
}

impl RecordArgs {
    fn outcome(&self) -> Option<CallerOutcome> {
        if let Some(result) = &self.result {
            let result = serde_json::from_str(result)
                .unwrap_or_else(|_| serde_json::Value::String(result.clone()));
            return Some(CallerOutcome::Completed { result });
        }
        if let Some(message) = &self.tool_error {
            return Some(CallerOutcome::ToolError {
                message: message.clone(),
            });
        }
        let reason = self.rejected.clone()?;
        Some(CallerOutcome::Rejected { reason })
    }
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
        Command::Invocations(InvocationsCommand::Show(args)) => {
            let store = open(&args.reader).await?;
            let row = store.get(args.id).await?;
            if args.reader.json {
                print_json(&invocation_json(&row))
            } else {
                print!("{}", describe(&row));
                Ok(())
            }
        }
        Command::Approve(ApproveArgs {
            target,
            arguments: None,
        }) => decide(&target, Decision::Approve).await,
        Command::Approve(ApproveArgs {
            target,
            arguments: Some(arguments),
        }) => edit(&target, &arguments).await,
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
        Command::Record(args) => {
            // clap requires exactly one of the three.
            let outcome = args
                .outcome()
                .context("one of --result, --tool-error, --rejected")?;
            decide(&args.target, Decision::Record { outcome }).await
        }
    }
}

/// Opens the deployment's existing ledger (never creates one).
pub(super) async fn open(reader: &Reader) -> anyhow::Result<Arc<dyn Store>> {
    let (_, deployment) = reader.deployment.load()?;
    deployment::existing_ledger(&deployment).await
}

pub(super) fn print_json(value: &serde_json::Value) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

async fn decide(target: &Target, decision: Decision) -> anyhow::Result<()> {
    let by = target.decider.resolve("deciding")?;
    let (_, deployment) = target.reader.deployment.load()?;
    let store = deployment::existing_ledger(&deployment).await?;
    // Who may decide and how many must approve are the deployment's declarations (POLICY-61).
    let scopes = deployment::scopes(&deployment);
    let row = airlock_runtime::decisions::record(
        store.as_ref(),
        &scopes,
        target.id,
        &by,
        decision,
        "cli",
    )
    .await
    .with_context(|| format!("deciding {}", target.id))?;
    report(target, &by, &row)
}

/// `approve --arguments` (DECIDE-20): the edit is judged against the deployment's declarations,
/// which only a booted gateway holds (DECIDE-21); the serving gateway's worker then runs it.
async fn edit(target: &Target, arguments: &str) -> anyhow::Result<()> {
    let arguments = serde_json::from_str(arguments).context("--arguments is not JSON")?;
    let by = target.decider.resolve("deciding")?;
    let booted = crate::boot::boot(&target.reader.deployment.locate()?).await?;
    let decision = Decision::Edit { arguments };
    let row = airlock_runtime::decisions::record_checked(
        &booted.gateway,
        target.id,
        &by,
        decision,
        "cli",
    )
    .await
    .with_context(|| format!("deciding {}", target.id))?;
    report(target, &by, &row)
}

/// What a decision did, as JSON (`--json`) or one line naming what happens next.
fn report(target: &Target, by: &str, row: &Invocation) -> anyhow::Result<()> {
    if target.reader.json {
        return print_json(&invocation_json(row));
    }
    let next = match row.state {
        InvocationState::Approved => {
            "the serving gateway's worker runs it (`airlock invocations show` to follow)"
        }
        InvocationState::Denied => "the caller sees the refusal",
        InvocationState::Failed if row.decision.is_some() => "recorded as the caller's outcome",
        InvocationState::Succeeded
            if row
                .decision
                .as_ref()
                .is_some_and(|d| d.decision == DecisionKind::Recorded) =>
        {
            "recorded as the caller's outcome"
        }
        InvocationState::Succeeded => "the answer is the call's result",
        InvocationState::Resolved => "settled as run",
        InvocationState::Abandoned => "given up: it never runs",
        InvocationState::InputRequired => {
            "the client was asked for input; its retry is the next round"
        }
        InvocationState::Pending
        | InvocationState::AwaitingApproval
        | InvocationState::AwaitingAnswer
        | InvocationState::AwaitingCredential
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
    let store = open(&args.reader).await?;
    let query = pending::Query {
        kind: args.kind,
        tool: args.tool.clone(),
        principal: args.principal.clone(),
        agent: args.agent.clone(),
        older_than: None,
        limit: args.limit,
        offset: args.offset,
        newest_first: false,
    };
    let page = pending::list(store.as_ref(), &query).await?;
    if args.reader.json {
        return print_json(&approvals_json(&page));
    }
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
    // DECIDE-20: the arguments a person edited into the approval, which are the ones that ran.
    if let Some(approved) = &row.approved_arguments {
        out.push_str(&format!("approved    {approved}\n"));
    }
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
