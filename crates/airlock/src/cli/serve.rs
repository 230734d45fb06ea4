//! `airlock serve DIR`: validate (fail loud), discover connection tools (fail loud), migrate,
//! start the sweeper and the worker (approved calls nobody claimed), serve HTTP; on
//! SIGTERM/SIGINT stop accepting, let in-flight calls finish within a deadline, and leave
//! parked rows as they are.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use airlock_ledger::Store;
use anyhow::Context as _;
use tokio::net::TcpListener;

use crate::boot::{boot_serving, scope_paths};
use crate::http::{AppState, app, serve};

/// How often expired leases and approvals are swept.
const SWEEP_EVERY: Duration = Duration::from_secs(5);
/// How long in-flight requests may run after a shutdown signal.
const DRAIN: Duration = Duration::from_secs(30);

/// Arguments of `airlock serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The deployment directory.
    dir: PathBuf,
    /// Listen on this address instead of `airlock.toml`'s `listen` (port 0: any free port).
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// Lease of a running call in seconds (default 60); for crash tests.
    #[arg(long, hide = true, value_name = "SECS")]
    lease: Option<u64>,
}

pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(serve_dir(args))?;
    Ok(ExitCode::SUCCESS)
}

async fn serve_dir(args: &Args) -> anyhow::Result<()> {
    let booted = boot_serving(&args.dir, args.lease.map(Duration::from_secs)).await?;
    let listen = args.listen.unwrap_or(booted.deployment.config.listen);
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
    println!("airlock listening on http://{addr}");
    println!(
        "  /healthz /readyz  /v1/approvals  /v1/invocations/{{id}}[/approve|/deny|/answer|/resolve]"
    );
    println!("  MCP: {}", scope_paths(&booted).join(" "));
    let sweeper = tokio::spawn(sweep(booted.gateway.store().clone()));
    let (stop_worker, worker_stop) = tokio::sync::oneshot::channel::<()>();
    let worker = tokio::spawn(airlock_runtime::decisions::worker::work(
        booted.gateway.clone(),
        worker_stop,
    ));
    let state = AppState {
        gateway: booted.gateway,
        admin: booted.admin,
        mcp: booted.mcp,
    };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, app(state), async move {
        let _ = stop_rx.await;
    }));
    shutdown_signal().await;
    println!(
        "shutting down: draining in-flight requests (up to {} s)",
        DRAIN.as_secs()
    );
    let _ = stop_tx.send(());
    let _ = stop_worker.send(());
    sweeper.abort();
    let (served, worked) = tokio::join!(
        tokio::time::timeout(DRAIN, server),
        tokio::time::timeout(DRAIN, worker)
    );
    if served.is_err() || worked.is_err() {
        tracing::warn!(
            "in-flight calls did not finish within {} s",
            DRAIN.as_secs()
        );
    }
    if let Ok(result) = served {
        result.context("server task")?.context("serving")?;
    }
    Ok(())
}

/// Turns expired leases into in-doubt rows or re-runs, and overdue approvals into expired rows.
async fn sweep(store: std::sync::Arc<dyn Store>) {
    let mut tick = tokio::time::interval(SWEEP_EVERY);
    loop {
        tick.tick().await;
        match store.sweep(time::OffsetDateTime::now_utc()).await {
            Ok(report) => {
                for id in &report.in_doubt {
                    tracing::warn!(%id, "lease ran out on an at-most-once call: in doubt, resolve it (`airlock resolve`)");
                }
                for id in &report.retried {
                    tracing::info!(%id, "lease ran out on an idempotent call: approved for a re-run");
                }
            }
            Err(error) => tracing::error!(%error, "sweep failed"),
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { () = ctrl_c => {}, () = term => {} }
}
