//! `airlock check [--dir DIR] [--json] [--discover]`: validate offline, print the warnings (keys
//! accepted but not read, each with file:line) and each scope's tools and digest. Exit status 1
//! when any declaration is invalid, or when boot or a call would fail on what can be known
//! offline (a credential that does not resolve, a URL the egress guard refuses without DNS):
//! the same gate `serve` boots through ([`crate::preflight`]), so the two never disagree;
//! warnings alone never fail it. Only `--discover` touches the network: it lists every
//! connection file's tools (one `tools/list` each, through the deployment's egress policy) and
//! shows them in the gateway scope, with the digest `serve` would have. The freezes in force
//! are listed too (POLICY-51) — what `serve` refuses now beside what the declarations allow —
//! from a SQLite ledger file when there is one, and from PostgreSQL only with `--discover`
//! (the one flag that lets `check` reach the network); a ledger that cannot be read is a
//! warning, not a failure, since the declarations are what `check` judges.

use std::path::PathBuf;
use std::process::ExitCode;

use airlock_ledger::Freeze;
use airlock_spec::{
    Deployment, Policy, RateLimit, Scope, ScopeId, SpecErrors, SpecIssue, ToolSource, ToolSpec,
};
use serde_json::{Value, json};

use super::deployment::DirArg;
use crate::result::freeze_json;

/// Arguments of `airlock check`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The deployment directory, as with --dir (kept for scripts written before --dir).
    #[arg(hide = true, conflicts_with = "dir")]
    path: Option<PathBuf>,
    #[command(flatten)]
    deployment: DirArg,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Also discover connection files' tools (network: one `tools/list` per connection).
    #[arg(long)]
    discover: bool,
}

pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let dir = args.deployment.locate_or(args.path.as_deref())?;
    match crate::preflight::load(&dir) {
        Ok(deployment) => {
            let mut scopes = super::deployment::scopes(&deployment);
            let discovered = if args.discover {
                let tools = super::discover::connection_tools(&dir, &deployment)?;
                crate::boot::add_discovered(&mut scopes[0], tools.clone())?;
                Some(tools)
            } else {
                None
            };
            let freezes = freezes_in_force(&deployment, args.discover);
            if args.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&json!({
                        "ok": true,
                        "warnings": deployment.warnings,
                        "scopes": scopes.iter().map(scope_json).collect::<Vec<_>>(),
                        "freezes": freezes.as_ref().map(|f| f.iter().map(freeze_json).collect::<Vec<_>>()),
                    }))?
                );
            } else {
                print_warnings(&deployment.warnings);
                scopes.iter().for_each(print_scope);
                match &discovered {
                    Some(tools) => print_discovered(&deployment, tools),
                    None => print_connections(&deployment),
                }
                print_freezes(&deployment, freezes.as_deref(), args.discover);
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(errors) => {
            report(&dir, &errors, args.json)?;
            Ok(ExitCode::FAILURE)
        }
    }
}

/// Keys accepted but not read, on standard error so a script reading the tables is unaffected.
fn print_warnings(warnings: &[SpecIssue]) {
    for warning in warnings {
        eprintln!("warning: {warning}");
    }
}

/// The freezes the deployment's ledger holds; `None` when it has no ledger yet, when it is on
/// PostgreSQL and `online` is not set, or when it cannot be read (said on standard error).
fn freezes_in_force(deployment: &Deployment, online: bool) -> Option<Vec<Freeze>> {
    let local = deployment.config.database_url.starts_with("sqlite://");
    if !local && !online {
        return None;
    }
    // A SQLite file needs no I/O driver, whose signal pipe would be `check`'s one socket.
    let mut runtime = tokio::runtime::Builder::new_current_thread();
    runtime.enable_time();
    if !local {
        runtime.enable_io();
    }
    let read = async {
        match super::deployment::ledger_if_any(deployment).await? {
            Some(store) => Ok(Some(store.freezes().await?)),
            None => Ok(None),
        }
    };
    let freezes: anyhow::Result<Option<Vec<Freeze>>> = match runtime.build() {
        Ok(runtime) => runtime.block_on(read),
        Err(e) => Err(e.into()),
    };
    freezes
        .inspect_err(|e| eprintln!("warning: the freezes in force could not be read: {e:#}"))
        .ok()
        .flatten()
}

fn print_freezes(deployment: &Deployment, freezes: Option<&[Freeze]>, online: bool) {
    match freezes {
        Some([]) => println!("nothing is frozen"),
        Some(freezes) => {
            for f in freezes {
                let at = freeze_json(f)["at"].as_str().unwrap_or_default().to_owned();
                println!("frozen: {} by {} at {at}: {}", f.target, f.by, f.reason);
            }
        }
        None if !online && !deployment.config.database_url.starts_with("sqlite://") => println!(
            "freezes: not read offline (the ledger is on PostgreSQL: `airlock freezes`, or \
             `airlock check --discover`)"
        ),
        None => {}
    }
}

fn scope_label(scope: &Scope) -> String {
    match &scope.id {
        ScopeId::Gateway => "gateway (/mcp)".to_owned(),
        ScopeId::Agent(name) => format!("agent {name} (/agents/{name}/mcp)"),
    }
}

fn row(tool: &ToolSpec) -> [String; 7] {
    let p = &tool.policy;
    [
        tool.definition.name.to_string(),
        tool.source.kind().to_string(),
        p.approval.to_string(),
        p.effect.to_string(),
        p.mode.to_string(),
        rate_limit(p),
        limits(p),
    ]
}

/// `name max[ unit]/Ws[ per by][, approval]` for each of the declaration's `limits:`
/// (POLICY-57), `;`-separated.
fn limits(p: &Policy) -> String {
    if p.limits.is_empty() {
        return "-".to_owned();
    }
    let one = |l: &airlock_spec::Limit| {
        let unit = match &l.measure {
            airlock_spec::Measure::Amount { unit: Some(u), .. } => format!(" {u}"),
            _ => String::new(),
        };
        let what = match &l.measure {
            airlock_spec::Measure::Calls => "calls".to_owned(),
            airlock_spec::Measure::Count(p) => format!("count {p}"),
            airlock_spec::Measure::Amount { pointer, .. } => format!("sum {pointer}"),
        };
        let by = match l.by {
            airlock_spec::LimitBy::Tool => String::new(),
            by => format!(" per {by}"),
        };
        format!(
            "{} {what} {}{unit}/{}s{by}, over: {}",
            l.name,
            l.max,
            l.per.as_secs(),
            l.over
        )
    };
    p.limits.iter().map(one).collect::<Vec<_>>().join("; ")
}

/// `N/Ws` for the declaration's limit, `+ N/Ws per principal` for each principal's on top.
fn rate_limit(p: &Policy) -> String {
    let rate = |r: RateLimit| format!("{}/{}s", r.requests, r.per.as_secs());
    let parts: Vec<String> = [
        p.rate_limit.map(rate),
        p.per_principal_rate_limit
            .map(|r| format!("{} per principal", rate(r))),
    ]
    .into_iter()
    .flatten()
    .collect();
    if parts.is_empty() {
        "-".to_owned()
    } else {
        parts.join(" + ")
    }
}

fn print_scope(scope: &Scope) {
    println!("{}  digest {}", scope_label(scope), scope.digest());
    let header = [
        "TOOL",
        "SOURCE",
        "APPROVAL",
        "EFFECT",
        "MODE",
        "RATE LIMIT",
        "LIMITS",
    ]
    .map(str::to_owned);
    let rows: Vec<[String; 7]> = std::iter::once(header)
        .chain(scope.tools().iter().map(row))
        .collect();
    let widths: Vec<usize> = (0..7)
        .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    for r in &rows {
        let cells: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("  {}", cells.join("  ").trim_end());
    }
    if scope.tools().is_empty() {
        println!("  (no tools declared; connection tools appear after discovery)");
    }
    println!();
}

fn print_connections(deployment: &Deployment) {
    for c in &deployment.connections {
        println!(
            "connection {}: tools {}__* are discovered at boot (approval {}, effect {})",
            c.namespace, c.namespace, c.approval, c.effect
        );
    }
}

fn print_discovered(deployment: &Deployment, tools: &[ToolSpec]) {
    for c in &deployment.connections {
        let mine: Vec<&ToolSpec> = tools
            .iter()
            .filter(
                |t| matches!(&t.source, ToolSource::Connection(s) if s.namespace == c.namespace),
            )
            .collect();
        println!(
            "connection {}: {} tool{} discovered at {} (approval {}, effect {})",
            c.namespace,
            mine.len(),
            if mine.len() == 1 { "" } else { "s" },
            c.url,
            c.approval,
            c.effect
        );
        for t in mine {
            println!("  {}  {}", t.definition.name, t.definition.description);
        }
    }
}

fn scope_json(scope: &Scope) -> Value {
    let tools: Vec<Value> = scope
        .tools()
        .iter()
        .map(|t| {
            let [name, source, approval, effect, mode, rate_limit, limits] = row(t);
            json!({"name": name, "source": source, "approval": approval, "effect": effect, "mode": mode, "rate_limit": rate_limit, "limits": limits})
        })
        .collect();
    json!({"scope": scope_label(scope), "digest": scope.digest(), "tools": tools})
}

fn report(dir: &std::path::Path, errors: &SpecErrors, json: bool) -> anyhow::Result<()> {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"ok": false, "errors": errors.0}))?
        );
    } else {
        eprintln!(
            "{} problem{} in {}:",
            errors.0.len(),
            if errors.0.len() == 1 { "" } else { "s" },
            dir.display()
        );
        for issue in &errors.0 {
            eprintln!("  {issue}");
        }
    }
    Ok(())
}
