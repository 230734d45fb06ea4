//! `airlock vault set | revoke | list | connect-link`: principals' own credentials for the
//! connections declared `per_principal = true` (docs/rules.md CALL-13, CALL-15), from the
//! command line.
//!
//! Like the decision commands it writes the deployment's ledger directly (with the
//! deployment's vault key), so it works from any machine that reaches the database; every
//! serving replica holds the change within a second. A secret is read from standard input,
//! never from an argument (shell history), and never printed; `list` shows digests only.

use std::io::Read as _;
use std::process::ExitCode;
use std::sync::Arc;

use airlock_egress::GuardedClient;
use airlock_runtime::agent::RunCredential;
use airlock_runtime::egress_policy;
use airlock_runtime::vault::PersonalVault;
use anyhow::Context as _;
use secrecy::SecretString;
use zeroize::Zeroizing;

use super::approvals::{Reader, print_json};
use super::operator::AsArg;

/// Subcommands of `airlock vault`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Set a principal's own credential for a connection; the secret is read from standard
    /// input (with `--username`, it is the password).
    Set {
        /// The connection (`[connections.<name>]` declared `per_principal = true`).
        connection: String,
        /// Whose credential it is.
        #[arg(long)]
        principal: String,
        /// A `basic` credential's user name.
        #[arg(long)]
        username: Option<String>,
        #[command(flatten)]
        reader: Reader,
        #[command(flatten)]
        operator: AsArg,
    },
    /// Revoke a principal's credential for a connection, or for every connection.
    Revoke {
        /// The connection; none: every connection (disabling the principal's access).
        connection: Option<String>,
        /// Whose credential it is.
        #[arg(long)]
        principal: String,
        #[command(flatten)]
        reader: Reader,
        #[command(flatten)]
        operator: AsArg,
    },
    /// List the stored credentials (never a secret: kind, digest, who set it, when).
    List {
        /// Only this principal's.
        #[arg(long)]
        principal: Option<String>,
        #[command(flatten)]
        reader: Reader,
    },
    /// Print a link (valid 15 minutes) that connects a principal's account to a connection
    /// with `oauth`; give it to that principal only.
    ConnectLink {
        /// The connection.
        connection: String,
        /// Whose account it connects.
        #[arg(long)]
        principal: String,
        #[command(flatten)]
        reader: Reader,
    },
}

/// Runs a vault command.
pub(crate) fn run(cmd: Command) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(dispatch(cmd))
}

async fn dispatch(cmd: Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::Set {
            connection,
            principal,
            username,
            reader,
            operator,
        } => {
            let by = operator.resolve("setting a credential")?;
            let credential = read_credential(username)?;
            let released = vault(&reader, true)
                .await?
                .set(&connection, &principal, &credential, &by)
                .await?;
            println!(
                "{principal}'s credential for {connection} is set; {} waiting call(s) continue",
                released.len()
            );
        }
        Command::Revoke {
            connection,
            principal,
            reader,
            operator,
        } => {
            let by = operator.resolve("revoking a credential")?;
            let vault = vault(&reader, false).await?;
            let n = vault.revoke(connection.as_deref(), &principal, &by).await?;
            tracing::warn!(principal, connection, by, revoked = n, "credential revoked");
            println!(
                "{n} credential(s) of {principal} revoked on every serving replica within a second"
            );
        }
        Command::List { principal, reader } => {
            let rows = vault(&reader, false)
                .await?
                .list(principal.as_deref())
                .await?;
            if reader.json() {
                print_json(&serde_json::json!({ "credentials": rows }))?;
            } else {
                for row in rows {
                    let text = |k: &str| row[k].as_str().unwrap_or("-").to_owned();
                    println!(
                        "{}\t{}\t{}\t{}\tset by {} at {}",
                        text("connection"),
                        text("principal"),
                        text("kind"),
                        text("digest"),
                        text("set_by"),
                        text("set_at")
                    );
                }
            }
        }
        Command::ConnectLink {
            connection,
            principal,
            reader,
        } => {
            let url = vault(&reader, false)
                .await?
                .connect_link(&connection, &principal)?;
            println!("{url}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The deployment's vault on its ledger; `create`: the ledger is created if need be (a
/// credential may be set before the deployment first serves).
async fn vault(reader: &Reader, create: bool) -> anyhow::Result<Arc<PersonalVault>> {
    let (dir, deployment) = reader.deployment.load()?;
    let credentials = crate::boot::load_credentials(&dir, &deployment)?;
    let store = if create {
        let config = &deployment.config;
        crate::boot::open_ledger(
            &config.database_url,
            crate::boot::store_config(config, false),
        )
        .await?
    } else {
        super::approvals::open(reader).await?
    };
    let egress = GuardedClient::new(egress_policy(&deployment.config.egress))
        .context("building the egress client")?;
    crate::boot::personal_vault(&deployment, &credentials, (&store, &egress))?.ok_or_else(|| {
        anyhow::anyhow!("no connection of this deployment is declared `per_principal = true`")
    })
}

/// The secret from standard input (one line, its end trimmed), as a token or a password.
fn read_credential(username: Option<String>) -> anyhow::Result<RunCredential> {
    let mut text = Zeroizing::new(String::new());
    std::io::stdin()
        .read_to_string(&mut text)
        .context("reading the secret from standard input")?;
    let secret = text.trim_end_matches(['\r', '\n']);
    if secret.is_empty() {
        anyhow::bail!("no secret on standard input");
    }
    let secret = SecretString::from(secret.to_owned());
    Ok(match username {
        Some(user) => RunCredential::Basic {
            username: SecretString::from(user),
            password: secret,
        },
        None => RunCredential::Token(secret),
    })
}
