//! `airlock run AGENT "input" [--session S] [--dir D] [--as NAME] [--json]`: runs an agent of the
//! deployment in this process, as `airlock call` calls a tool — the same runner, ledger, policy
//! and egress guard as `serve` — on the terminal (docs/rules.md AGENT-52). It shows the run's
//! events as they happen ([`render`]; `--json`: one event a line, the WebSocket's frames).
//!
//! Guarantees: the exit status says what became of the run (OPS-20): 0 completed, 4 parked —
//! a call waits for a person, and the printed command decides it; a running `serve` then resumes
//! the run —, 5 failed or cancelled; 1 is left to errors of the command itself (no such agent,
//! a session with a run in progress). Ctrl-C cancels the run, recorded as cancelled.

mod render;

use std::path::Path;
use std::process::ExitCode;

use airlock_ledger::SessionId;
use airlock_runtime::agent::{RunEvent, RunReport, RunRequest, RunState};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::boot::{boot, shell_word};

use super::deployment::DirArg;
use super::exit;
use super::operator::AsArg;
use render::Progress;

/// Events buffered between the run and the terminal.
const EVENTS_BUFFER: usize = 64;

/// Arguments of `airlock run`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The agent (its manifest's `metadata.name`).
    agent: String,
    /// What the agent should do.
    input: String,
    /// Continue this session (a `session_id` an earlier run printed).
    #[arg(long, value_name = "SESSION")]
    session: Option<SessionId>,
    #[command(flatten)]
    deployment: DirArg,
    /// The principal recorded on the run and its calls.
    #[command(flatten)]
    principal: AsArg,
    /// Print each event as one line of JSON (the WebSocket's frames), then the run's report.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let principal = args.principal.resolve("running the agent")?;
    let dir = args.deployment.locate()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run_agent(args, &dir, principal))
}

async fn run_agent(args: &Args, dir: &Path, principal: String) -> anyhow::Result<ExitCode> {
    let booted = boot(dir).await?;
    let request = RunRequest {
        agent: args.agent.clone(),
        input: args.input.clone(),
        session_id: args.session,
        context: None,
        connections: Default::default(),
        principal: Some(principal),
        // The operator at the deployment: `[[access]]` binds token callers (POLICY-47).
        groups: None,
        proposals_enabled: true,
    };
    let (events_tx, events) = mpsc::channel(EVENTS_BUFFER);
    let cancel = CancellationToken::new();
    let interrupted = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            interrupted.cancel();
        }
    });
    let agents = booted.agents.clone();
    let run = tokio::spawn(async move { agents.run(request, Some(events_tx), cancel).await });
    let mut progress = Progress::new(std::io::stdout(), decide_dir(dir));
    show(args.json, &mut progress, events).await?;
    let report = run.await??;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        progress.finish(&report)?;
    }
    Ok(status(&report))
}

/// The deployment directory as the printed commands name it: absolute, one shell word.
fn decide_dir(dir: &Path) -> String {
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
    shell_word(&dir.to_string_lossy())
}

/// Shows every event until the run has sent its last.
async fn show(
    json: bool,
    progress: &mut Progress<std::io::Stdout>,
    mut events: mpsc::Receiver<RunEvent>,
) -> anyhow::Result<()> {
    while let Some(event) = events.recv().await {
        if json {
            println!("{}", serde_json::to_string(&event)?);
        } else {
            progress.event(&event)?;
        }
    }
    Ok(())
}

/// What became of the run, as an exit status (OPS-20).
fn status(report: &RunReport) -> ExitCode {
    match report.status {
        RunState::Completed => ExitCode::SUCCESS,
        // Not finished here: nothing waits in this command; `serve` resumes the run.
        RunState::Parked | RunState::Running => ExitCode::from(exit::PARKED),
        RunState::Failed | RunState::Cancelled => ExitCode::from(exit::CALL_FAILED),
    }
}
