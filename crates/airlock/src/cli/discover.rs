//! `airlock discover URL --name SLUG`: lists a live MCP server's tools through the egress guard
//! (the deployment's policy with `--dir`, the default policy otherwise) and prints a ready
//! `type: mcp` block to paste under an agent's `spec.tools`. Safe as pasted (docs/rules.md
//! DECL-39): a tool is `writes: false` only when the server marks it `readOnlyHint: true`, every
//! other tool is `writes: true` + `mode: propose`, each with a comment naming the hint; `auth`
//! is printed as `--auth` asks (bearer when `--credential` alone authenticated the listing) and
//! `approval` only when asked for (`--approval`). A tool whose input
//! schema breaks the 8-level / 16 KiB limits (or is not `type: object`) is left out with a `# …`
//! comment saying why, so the printed block always passes `airlock check`.
//! Also runs `airlock check --discover`'s discovery of connection files.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use airlock_egress::{EgressPolicy, GuardedClient};
use airlock_mcp::{McpClient, McpCredential, McpTarget, RemoteTool};
use airlock_runtime::egress_policy;
use airlock_spec::{
    Approval, CredentialPath, Credentials, Deployment, MAX_SCHEMA_BYTES, MAX_SCHEMA_DEPTH,
    ToolSpec, compile_input_schema,
};
use anyhow::{Context as _, bail};
use serde_json::Value;

/// How the server authenticates airlock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum AuthScheme {
    /// `Authorization: Bearer <credential>`.
    Bearer,
    /// `<--header>: <credential>`.
    Header,
}

/// Arguments of `airlock discover`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The server's MCP endpoint, e.g. `https://mcp.tenant.example.com/mcp`.
    url: String,
    /// The slug of the printed `type: mcp` declaration (its tools become `<slug>_<tool>`).
    #[arg(long)]
    name: String,
    /// The `[connections.NAME]` of airlock.toml the block refers to (default `<slug>_mcp`).
    #[arg(long)]
    connection: Option<String>,
    /// The auth scheme, for listing and for the printed block; without it the block has no
    /// `auth` (a `--credential` alone is sent as bearer for listing only).
    #[arg(long, value_enum)]
    auth: Option<AuthScheme>,
    /// The printed block's `approval` (never | once | always | caller), for every tool of the
    /// server.
    #[arg(long)]
    approval: Option<Approval>,
    /// The header name with `--auth header`.
    #[arg(long)]
    header: Option<String>,
    /// A dotted credential path in the deployment's credentials (needs `--dir`).
    #[arg(long, requires = "dir")]
    credential: Option<String>,
    /// A deployment directory: its egress policy and credentials are used.
    #[arg(long)]
    dir: Option<PathBuf>,
}

pub(crate) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let url = url::Url::parse(&args.url).with_context(|| format!("`{}` is not a URL", args.url))?;
    if url.query().is_some() || url.fragment().is_some() {
        bail!("`{url}` has a query or fragment; an MCP endpoint URL has neither");
    }
    let (guard, credentials) = guard_and_credentials(args.dir.as_deref())?;
    let target = McpTarget::new(url.as_str()).with_credential(credential(args, &credentials)?);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let tools = runtime
        .block_on(McpClient::new(guard).discover(&target))
        .map_err(|e| anyhow::anyhow!("{url}: tools/list failed — {}", e.message))?;
    let block = Block {
        url: url.as_str(),
        slug: &args.name,
        connection: args
            .connection
            .clone()
            .unwrap_or_else(|| format!("{}_mcp", args.name.replace('-', "_"))),
        base_url: url.origin().ascii_serialization(),
        path: url.path(),
        auth: scheme_yaml(args)?,
        approval: args.approval,
    };
    print!("{}", block.render(&tools));
    Ok(ExitCode::SUCCESS)
}

fn guard_and_credentials(dir: Option<&Path>) -> anyhow::Result<(GuardedClient, Credentials)> {
    let Some(dir) = dir else {
        let guard = GuardedClient::new(EgressPolicy::default()).context("the egress client")?;
        return Ok((guard, Credentials::default()));
    };
    let deployment = super::deployment::load(&super::deployment::locate(Some(dir))?)?;
    let config = &deployment.config;
    let credentials = Credentials::load(dir, &config.credentials, std::env::vars())?;
    let guard = GuardedClient::new(egress_policy(&config.egress)).context("the egress client")?;
    Ok((guard, credentials))
}

fn credential(args: &Args, credentials: &Credentials) -> anyhow::Result<McpCredential> {
    let Some(path) = &args.credential else {
        return Ok(McpCredential::None);
    };
    let path = CredentialPath::try_from(path.as_str()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let value = credentials.get(&path)?.clone();
    Ok(match args.auth.unwrap_or(AuthScheme::Bearer) {
        AuthScheme::Bearer => McpCredential::Bearer(value),
        AuthScheme::Header => McpCredential::Header {
            name: args
                .header
                .clone()
                .context("--auth header needs --header NAME")?,
            value,
        },
    })
}

/// The block's `auth`: as `--auth` asks, or bearer when `--credential` alone authenticated the
/// listing (the server needs a credential, and a block without `auth` on a credentialed
/// connection does not load, DECL-86); none for a server listed without one.
fn scheme_yaml(args: &Args) -> anyhow::Result<Option<String>> {
    match (args.auth, &args.header) {
        (None, _) if args.credential.is_some() => Ok(Some("{ scheme: bearer }".to_owned())),
        (None, _) => Ok(None),
        (Some(AuthScheme::Bearer), _) => Ok(Some("{ scheme: bearer }".to_owned())),
        (Some(AuthScheme::Header), Some(h)) => {
            Ok(Some(format!("{{ scheme: header, header: {} }}", quote(h))))
        }
        (Some(AuthScheme::Header), None) => bail!("--auth header needs --header NAME"),
    }
}

/// The printed declaration.
struct Block<'a> {
    url: &'a str,
    slug: &'a str,
    connection: String,
    base_url: String,
    path: &'a str,
    auth: Option<String>,
    approval: Option<Approval>,
}

impl Block<'_> {
    fn render(&self, tools: &[RemoteTool]) -> String {
        let mut entries = String::new();
        let mut kept = 0;
        for tool in tools {
            match schema_problem(&tool.input_schema) {
                Some(why) => {
                    let _ = writeln!(entries, "    # tool {} left out: {why}", quote(&tool.name));
                }
                None => {
                    kept += 1;
                    entries.push_str(&entry(tool));
                }
            }
        }
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# From `airlock discover {}`: {kept} of {} tools.\n\
             # airlock.toml needs the connection (credential: where its secret lives):\n\
             #   [connections.{}]\n#   base_url = {}\n#   credential = \"<dotted.path>\"\n\
             # Paste the rest under `spec.tools:` of an agent manifest.",
            self.url,
            tools.len(),
            self.connection,
            quote(&self.base_url),
        );
        let _ = writeln!(out, "- name: {}", quote(self.slug));
        out.push_str("  type: mcp\n");
        let _ = writeln!(out, "  connection: {}", quote(&self.connection));
        let _ = writeln!(out, "  path: {}", quote(self.path));
        if let Some(auth) = &self.auth {
            let _ = writeln!(out, "  auth: {auth}");
        }
        if let Some(approval) = self.approval {
            let _ = writeln!(out, "  approval: {approval}  # every tool of this server");
        }
        if kept == 0 {
            out.push_str("  # no tool fits: `airlock check` refuses an empty list\n");
        }
        out.push_str("  tools:\n");
        out.push_str(&entries);
        out
    }
}

fn entry(tool: &RemoteTool) -> String {
    // A missing description gets the name: the manifest requires one.
    let description = if tool.description.trim().is_empty() {
        &tool.name
    } else {
        &tool.description
    };
    format!(
        "    - name: {}\n      description: {}\n{}      input_schema: {}\n",
        quote(&tool.name),
        quote(description),
        writes(tool.read_only_hint),
        tool.input_schema
    )
}

/// `writes` from the server's hint: only an explicit `readOnlyHint: true` makes a read, so a
/// pasted block never lets an unmarked write run as a read.
fn writes(read_only_hint: Option<bool>) -> &'static str {
    match read_only_hint {
        Some(true) => "      writes: false  # the server marks it readOnlyHint: true\n",
        Some(false) => {
            "      writes: true  # the server marks it readOnlyHint: false\n      mode: propose\n"
        }
        None => "      writes: true  # the server gives no readOnlyHint\n      mode: propose\n",
    }
}

/// A YAML double-quoted scalar: JSON's string syntax is a subset of it.
fn quote(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// Why a schema cannot go into a manifest (`airlock check`'s rules), if it cannot.
fn schema_problem(schema: &Value) -> Option<String> {
    if let Err(reason) = compile_input_schema(schema) {
        return Some(reason);
    }
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Some("the input schema is not `type: object`".to_owned());
    }
    let depth = depth(schema);
    if depth > MAX_SCHEMA_DEPTH {
        return Some(format!(
            "the input schema is {depth} levels deep; the limit is {MAX_SCHEMA_DEPTH}"
        ));
    }
    let size = schema.to_string().len();
    (size > MAX_SCHEMA_BYTES).then(|| {
        format!("the input schema is {size} bytes as compact JSON; the limit is {MAX_SCHEMA_BYTES}")
    })
}

/// Nesting depth of objects and lists, as `airlock check` counts it: a scalar is 0, `{}` is 1.
fn depth(value: &Value) -> usize {
    match value {
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// `airlock check --discover`: every connection file's tools, one `tools/list` each, through
/// the deployment's egress policy and credentials.
///
/// # Errors
/// The first connection that fails, named ("connection crm: tools/list failed at boot — …").
pub(crate) fn connection_tools(
    dir: &Path,
    deployment: &Deployment,
) -> anyhow::Result<Vec<ToolSpec>> {
    let config = &deployment.config;
    let credentials = Credentials::load(dir, &config.credentials, std::env::vars())?;
    let guard = GuardedClient::new(egress_policy(&config.egress)).context("the egress client")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let tools = runtime.block_on(airlock_runtime::discover(
        &McpClient::new(guard),
        &deployment.connections,
        &credentials,
    ))?;
    Ok(tools.into_iter().map(|t| t.spec).collect())
}
