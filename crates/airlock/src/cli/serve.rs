//! `airlock serve [--dir DIR]`: raise the open-file limit and keep `max_connections` below it
//! (OPS-67), validate (fail loud), discover connection tools (fail loud), migrate, start the
//! sweeper, the worker (approved calls nobody claimed), the resume worker (parked runs whose
//! calls were decided, AGENT-7) and, with `[notify]`, the delivery of notifications; serve HTTP.
//!
//! Shutdown (docs/rules.md OPS-9): the first SIGTERM/SIGINT cancels the process's one stop
//! token. Long polls end first, at once, with the call's current state (the row stays parked;
//! the client calls again); the server stops accepting. The server, the workers and an
//! approval's call run on one task tracker, and status 0 means each of them ended within the
//! grace period (`--grace`): the server's requests in progress, the worker's calls, the resume
//! worker's runs and an approval's call have finished, while the sweeper, the memory give-back
//! and the delivery of notifications stopped at once (a notice being sent keeps its lease and
//! is sent again after it, LEDGER-31). A second signal, or the end of the grace period, exits
//! at once with status 1 — a call cut off keeps its lease, and the next start's sweep settles
//! it as any crash.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use airlock_ledger::Store;
use airlock_spec::ServerLimits;
use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::boot::{Booted, boot_serving, scope_paths};
use crate::http::{AppState, app, serve};
use crate::open_files::{FileLimit, RESERVED, connection_cap};

use super::deployment::DirArg;

/// How often expired leases and approvals are swept.
const SWEEP_EVERY: Duration = Duration::from_secs(5);
/// How long running calls may finish after a shutdown signal, unless `--grace` says otherwise.
const GRACE: Duration = Duration::from_secs(10);

/// Arguments of `airlock serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The deployment directory, as with --dir (kept for scripts written before --dir).
    #[arg(hide = true, conflicts_with = "dir")]
    path: Option<PathBuf>,
    #[command(flatten)]
    deployment: DirArg,
    /// Listen on this address instead of `airlock.toml`'s `listen` (port 0: any free port).
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// Seconds running calls may take to finish after the first shutdown signal.
    #[arg(long, value_name = "SECS", default_value_t = GRACE.as_secs())]
    grace: u64,
    /// Lease of a running call in seconds (default 60); for crash tests.
    #[arg(long, hide = true, value_name = "SECS")]
    lease: Option<u64>,
    /// Seconds between sweeps of expired leases (default 5); for crash and replica tests.
    #[arg(long, hide = true, value_name = "SECS", default_value_t = SWEEP_EVERY.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    sweep_every: u64,
    /// Threads that run requests (default: one fewer than this machine's cores, at least one;
    /// docs/rules.md OPS-66).
    #[arg(long, env = "AIRLOCK_WORKERS", value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..))]
    workers: Option<u16>,
}

pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let dir = args.deployment.locate_or(args.path.as_deref())?;
    // Before anything is opened: the ledger, the runtime and every connection live under it.
    let files = crate::open_files::raise();
    let workers = args.workers.map_or_else(default_workers, usize::from);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name_fn(thread_namer(workers))
        .enable_all()
        // Each worker gives back its own heap after a quiet period (OPS-62).
        .on_thread_park(crate::memory::worker_parks)
        .build()?;
    let served = runtime.block_on(serve_dir(args, &dir, files));
    // A call cut off at the deadline must not hold the process open.
    runtime.shutdown_timeout(Duration::from_secs(1));
    served
}

/// Names the runtime's threads so an operator can tell the request workers from the blocking
/// pool, which tokio would otherwise give the same name: tokio starts its `workers` worker
/// threads first, while the runtime is built, so the first `workers` names go to them and every
/// later thread is a blocking one (a worker may still hand its place to a new thread for a
/// while, so the count of workers is the runtime's, logged at start).
fn thread_namer(workers: usize) -> impl Fn() -> String + Send + Sync + 'static {
    let started = std::sync::atomic::AtomicUsize::new(0);
    move || {
        let n = started.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if n < workers {
            "airlock-worker"
        } else {
            "airlock-block"
        }
        .to_owned()
    }
}

/// One worker fewer than the cores, at least one (OPS-66): the ledger's commits run on a thread
/// of their own (SQLite's writer lane) or in another process (PostgreSQL), and a call
/// hands off between its tasks several times; with a worker on every core the workers woke and
/// robbed each other at each hand-off, which cost more than the extra worker gave
/// (docs/benchmarks.md).
fn default_workers() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    workers_for(cores)
}

fn workers_for(cores: usize) -> usize {
    cores.saturating_sub(1).max(1)
}

async fn serve_dir(args: &Args, dir: &Path, files: FileLimit) -> anyhow::Result<ExitCode> {
    // The process's one shutdown (OPS-9): `stop` is cancelled at the first signal, and every
    // task serving starts is on `tasks`, each ended before this returns.
    let stop = CancellationToken::new();
    let tasks = TaskTracker::new();
    // Ended first: the server's drain waits for every request in progress, and an await must
    // not make it wait out its time.
    let long_polls = stop.child_token();
    let lease = args.lease.map(Duration::from_secs);
    let booted = boot_serving(dir, lease, long_polls.clone(), tasks.clone()).await?;
    let listen = args.listen.unwrap_or(booted.deployment.config.listen);
    // Before the banner: a signal sent once it is printed must find its handler.
    let mut signals = Signals::new()?;
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    let addr = listener.local_addr()?;
    if booted.mcp.tokens.is_empty() {
        tracing::warn!("no [[mcp.tokens]] configured: every MCP request will be refused");
    }
    if booted.admin.0.is_empty() {
        tracing::warn!("no [[admin.tokens]] configured: the approvals API is closed");
    }
    for warning in &booted.deployment.warnings {
        tracing::warn!("{warning}");
    }
    // The runtime's own count (OPS-66), not the flag's: a thread's name can be shared with a
    // blocking thread that took a worker's place for a while.
    let workers = tokio::runtime::Handle::current().metrics().num_workers();
    tracing::info!(workers, "requests run on {workers} worker threads");
    println!("airlock listening on http://{addr}");
    println!(
        "  /healthz /readyz  /v1/approvals  /v1/invocations/{{id}}[/approve|/deny|/answer|/resolve]"
    );
    println!("  runs: /v1/agents/{{name}}/run|ws  /v1/runs/{{id}}[/cancel]");
    println!("  MCP: {}", scope_paths(&booted).join(" "));
    let telemetry = booted.telemetry.clone();
    start_workers(
        &booted,
        Duration::from_secs(args.sweep_every),
        &stop,
        &tasks,
    );
    let state = AppState {
        gateway: booted.gateway,
        agents: booted.agents,
        admin: booted.admin,
        mcp: booted.mcp,
        limits: within_file_limit(booted.deployment.config.server, files),
        slack: booted.slack,
        max_grant: booted.deployment.config.max_grant,
    };
    let limits = state.limits;
    let server = tasks.spawn(serve(listener, app(state), limits, stop.clone()));
    signals.next().await;
    let grace = Duration::from_secs(args.grace);
    println!(
        "shutting down: no new requests, long polls answered now, running calls get {} s (a second signal exits at once)",
        grace.as_secs()
    );
    long_polls.cancel();
    stop.cancel();
    // Closed after the cancel: a call an approval starts during the drain is still waited for.
    tasks.close();
    let exit = tokio::select! {
        drained = tokio::time::timeout(grace, tasks.wait()) => match drained {
            Ok(()) => {
                server.await.context("server task")?.context("serving")?;
                ExitCode::SUCCESS
            }
            Err(_) => cut_off(&format!("running calls did not finish within {} s", grace.as_secs())),
        },
        () = signals.next() => cut_off("second signal"),
    };
    // OPS-26: the spans of the last calls are exported before the process ends.
    if let Some(telemetry) = telemetry {
        telemetry.shutdown().await;
    }
    Ok(exit)
}

/// Starts, on `tasks`, everything that works beside the server until `stop` is cancelled: the
/// memory give-back, the sweeper (every `sweep_every`), the worker (approved calls nobody
/// claimed), the resume worker and, with `[notify]`, the delivery of notifications.
fn start_workers(
    booted: &Booted,
    sweep_every: Duration,
    stop: &CancellationToken,
    tasks: &TaskTracker,
) {
    // Stops at once: a give-back skipped costs nothing.
    let give_back = crate::memory::give_back_when_quiet(crate::memory::collect_allocator);
    tasks.spawn(stop.clone().run_until_cancelled_owned(give_back));
    let store = booted.gateway.store().clone();
    tasks.spawn(sweep(store, sweep_every, stop.clone()));
    // Freezes made on any replica reach this one within a refresh (POLICY-51).
    let freezes = std::sync::Arc::clone(booted.gateway.freezes());
    let every = airlock_runtime::freeze::REFRESH;
    let watching = stop.clone();
    tasks.spawn(async move { freezes.run(every, watching).await });
    // Credentials set or revoked on any replica reach this one within a refresh (CALL-13).
    if let Some(vault) = booted.gateway.vault() {
        tasks.spawn(std::sync::Arc::clone(vault).watch(stop.clone()));
    }
    tasks.spawn(airlock_runtime::decisions::worker::work(
        booted.gateway.clone(),
        stop.clone(),
    ));
    tasks.spawn(airlock_runtime::decisions::escalations::work(
        booted.gateway.clone(),
        airlock_runtime::decisions::escalations::EVERY,
        stop.clone(),
    ));
    tasks.spawn(airlock_runtime::agent::resume::work(
        booted.agents.clone(),
        stop.clone(),
    ));
    if let Some(notifications) = booted.notifications.clone() {
        tasks.spawn(airlock_runtime::notify::deliver(
            booted.gateway.store().clone(),
            booted.egress.clone(),
            notifications,
            // Unique per process: a restarted server's leases are not its predecessor's.
            format!(
                "serve-{}-{}",
                std::process::id(),
                time::OffsetDateTime::now_utc().unix_timestamp_nanos()
            ),
            stop.clone(),
        ));
    }
}

/// `limits` with `max_connections` kept below the open-file limit (OPS-67, OPS-68), said in
/// one line of the log.
fn within_file_limit(mut limits: ServerLimits, files: FileLimit) -> ServerLimits {
    let configured = limits.max_connections;
    limits.max_connections = connection_cap(configured, files.now);
    let shown =
        |limit: Option<u64>| limit.map_or_else(|| "unlimited".to_owned(), |l| l.to_string());
    tracing::info!(
        open_files = %shown(files.now),
        raised_from = %shown(files.found),
        max_connections = limits.max_connections,
        configured,
        reserved = RESERVED,
        "connections capped below the open-file limit"
    );
    limits
}

/// Exits without waiting for running calls: their rows keep their leases, and the next start's
/// sweep settles them (re-run if idempotent, in doubt otherwise), as after a crash.
fn cut_off(why: &str) -> ExitCode {
    tracing::warn!("{why}: exiting now; calls still running are settled by the next start's sweep");
    ExitCode::FAILURE
}

/// Turns expired leases into in-doubt rows or re-runs, and overdue approvals into expired rows,
/// until `stop` is cancelled.
async fn sweep(store: std::sync::Arc<dyn Store>, every: Duration, stop: CancellationToken) {
    let mut tick = tokio::time::interval(every);
    // A sweep begun finishes: it is one short transaction, well inside the grace period.
    while stop.run_until_cancelled(tick.tick()).await.is_some() {
        match store.sweep(time::OffsetDateTime::now_utc()).await {
            Ok(report) => {
                for id in &report.in_doubt {
                    let why = "its lease ran out while it ran (a crash or a stall): it may have run; settle it with `airlock resolve`";
                    tracing::warn!(target: airlock_runtime::EVENTS, %id, why, "in doubt");
                }
                for id in &report.retried {
                    tracing::info!(%id, "lease ran out on an idempotent call: approved for a re-run");
                }
            }
            Err(error) => tracing::error!(%error, "sweep failed"),
        }
    }
}

/// SIGTERM and SIGINT (Ctrl-C), listened to from start-up to exit so no second signal is missed.
struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
}

impl Signals {
    #[cfg(unix)]
    fn new() -> anyhow::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            term: signal(SignalKind::terminate()).context("listening for SIGTERM")?,
            interrupt: signal(SignalKind::interrupt()).context("listening for SIGINT")?,
        })
    }

    #[cfg(not(unix))]
    fn new() -> anyhow::Result<Self> {
        Ok(Self {})
    }

    /// The next SIGTERM or SIGINT.
    #[cfg(unix)]
    async fn next(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.interrupt.recv() => {}
        }
    }

    /// The next Ctrl-C.
    #[cfg(not(unix))]
    async fn next(&mut self) {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::workers_for;

    #[test]
    fn one_core_is_left_to_the_ledger_and_there_is_always_a_worker() {
        assert_eq!(workers_for(1), 1);
        assert_eq!(workers_for(2), 1);
        assert_eq!(workers_for(8), 7);
        assert_eq!(workers_for(0), 1);
    }
}
