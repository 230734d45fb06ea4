//! Credentials per principal as calls use them (docs/rules.md CALL-11 … CALL-15): each
//! principal's own secret for a connection declared `per_principal = true`, sealed into the
//! ledger's database (so every replica shares it), opened in memory when a call needs it.
//!
//! Guarantees:
//! - a call through a per-principal connection carries its row's principal's credential and
//!   nobody else's: the copy held in memory is keyed by (connection, principal), and a sealed
//!   value opens only for the (connection, principal) it was sealed for, so a row moved in the
//!   database does not open for another person;
//! - a call whose principal has no credential is not sent: it waits for one
//!   ([`Unresolved::Waiting`]), with a message saying how to provide it;
//! - a credential set or revoked through this process is in effect here before the request
//!   that did it is answered, and one set or revoked anywhere else within one refresh period
//!   ([`REFRESH`]) of its commit, as long as [`PersonalVault::watch`] runs: every copy held in
//!   memory is dropped when the ledger's credential events change;
//! - no secret is logged, traced, shown in `Debug` or written anywhere but sealed; the audit
//!   sees a keyed digest ([`MasterKey::digest`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use airlock_egress::GuardedClient;
use airlock_ledger::{
    CredentialUse, Invocation, InvocationId, LedgerError, SealedCredential, Store,
};
use airlock_spec::{ApiConnection, Credentials, MasterKey, ToolSource, ToolSpec};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use crate::execute::{RunConnections, RunCredential, sending};
use crate::oauth::ExchangeCache;
use crate::{ToolError, ToolErrorKind};

mod connect;
mod sources;

pub use connect::{ConnectError, STATE_TTL, TICKET_TTL};
pub use sources::Source;

/// How long before its expiry a connected account's token is refreshed.
const REFRESH_SKEW: Duration = Duration::from_secs(30);

/// How often a serving process reads whether any credential changed.
pub const REFRESH: Duration = Duration::from_millis(250);

/// The key that seals credentials, and the keys a rotation retired (they only open).
pub struct VaultKeys {
    current: MasterKey,
    previous: Vec<MasterKey>,
}

impl VaultKeys {
    /// `current` seals and opens; `previous` only open.
    #[must_use]
    pub fn new(current: MasterKey, previous: Vec<MasterKey>) -> Self {
        Self { current, previous }
    }

    fn seal(&self, context: &[u8], plain: &[u8]) -> Result<String, VaultError> {
        self.current
            .seal(context, plain)
            .map_err(|e| VaultError::Sealing(e.to_string()))
    }

    fn open(&self, context: &[u8], sealed: &str) -> Result<zeroize::Zeroizing<Vec<u8>>, String> {
        let mut last = String::from("no key");
        for key in std::iter::once(&self.current).chain(&self.previous) {
            match key.open(context, sealed) {
                Ok(plain) => return Ok(plain),
                Err(why) => last = why,
            }
        }
        Err(last)
    }
}

/// Why a credential could not be set, revoked or listed.
#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    /// The connection is not declared `per_principal = true`.
    #[error(
        "connection `{0}` does not take each principal's own credential (declare `per_principal = true`)"
    )]
    NotPerPrincipal(String),
    /// The connection's credentials come from elsewhere (an OAuth exchange).
    #[error("connection `{0}` exchanges each caller's own OAuth token; there is nothing to set")]
    Exchanged(String),
    /// The value is empty or too large.
    #[error("{0}")]
    Invalid(String),
    /// Sealing failed.
    #[error("sealing the credential failed: {0}")]
    Sealing(String),
    /// The ledger failed.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// The largest secret a person may set: a token or a password, not a document.
pub const MAX_SECRET: usize = 16 * 1024;

/// A principal's credential as one call carries it, with what the audit records of it.
pub(crate) struct Personal {
    pub(crate) credential: RunCredential,
    pub(crate) used: CredentialUse,
}

/// A principal's own credential as one call carries it: the connection that sends it, and
/// what the audit records of it.
pub(crate) struct Carried {
    pub(crate) pair: (ApiConnection, Credentials),
    pub(crate) used: CredentialUse,
}

/// What the call `row` of `spec` carries when its connection takes each principal's own
/// credential (and the run did not supply that connection): the row principal's, resolved by
/// `vault` (CALL-11); `None` for any other call.
pub(crate) async fn carried(
    vault: Option<&PersonalVault>,
    connections: &BTreeMap<String, ApiConnection>,
    (spec, row): (&ToolSpec, &Invocation),
    supplied: Option<&RunConnections>,
    downstream: &airlock_mcp::Downstream,
) -> Result<Option<Carried>, Unresolved> {
    let Some(vault) = vault else {
        return Ok(None);
    };
    let through_connection = matches!(spec.source, ToolSource::Api(_) | ToolSource::McpInline(_));
    let Some(name) = spec.source.connection().filter(|_| through_connection) else {
        return Ok(None);
    };
    let by_run = supplied
        .map(|s| s.get(name))
        .transpose()
        .map_err(Unresolved::Failed)?
        .flatten();
    let configured = connections.get(name);
    let (None, Some(configured), Some(_)) = (by_run, configured, vault.source(name)) else {
        return Ok(None);
    };
    let personal = vault
        .resolve(name, row.principal.as_deref(), downstream.subject_token())
        .await?;
    Ok(Some(Carried {
        pair: sending(&configured.base_url, &personal.credential),
        used: personal.used,
    }))
}

/// Why a call has no credential to carry.
#[derive(Debug)]
pub(crate) enum Unresolved {
    /// Its principal has none yet: the call waits for one (LEDGER-82).
    Waiting {
        /// The connection.
        connection: String,
        /// What the caller reads meanwhile.
        message: String,
    },
    /// It cannot have one (no principal, a damaged value): the call fails with this.
    Failed(ToolError),
}

/// An opened credential held in memory.
struct Held {
    credential: RunCredential,
    expires_at: Option<OffsetDateTime>,
    used: CredentialUse,
}

type Copies = HashMap<String, HashMap<String, Arc<Held>>>;

/// The per-principal connections of a deployment and their principals' credentials.
pub struct PersonalVault {
    store: Arc<dyn Store>,
    keys: VaultKeys,
    declared: BTreeMap<String, Source>,
    /// Where people are sent to connect an account (`[server] public_url`), for messages.
    public_url: Option<String>,
    /// The operator's guard: authorization servers are the operator's declarations.
    guard: GuardedClient,
    held: RwLock<Copies>,
    exchanged: ExchangeCache,
    seen: AtomicI64,
}

impl std::fmt::Debug for PersonalVault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersonalVault")
            .field("connections", &self.declared.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl PersonalVault {
    /// The vault of the connections in `declared`, sealing with `keys`, reaching authorization
    /// servers through `guard`.
    #[must_use]
    pub fn new(
        store: Arc<dyn Store>,
        keys: VaultKeys,
        declared: BTreeMap<String, Source>,
        (public_url, guard): (Option<String>, GuardedClient),
    ) -> Self {
        Self {
            store,
            keys,
            declared,
            public_url,
            guard,
            held: RwLock::new(HashMap::new()),
            exchanged: ExchangeCache::new(),
            seen: AtomicI64::new(-1),
        }
    }

    /// Every per-principal connection, by name, with where its credentials come from.
    pub fn connections(&self) -> impl Iterator<Item = (&str, &Source)> {
        self.declared
            .iter()
            .map(|(name, source)| (name.as_str(), source))
    }

    /// How `connection`'s principals get their credentials, when it takes theirs.
    #[must_use]
    pub fn source(&self, connection: &str) -> Option<&Source> {
        self.declared.get(connection)
    }

    /// The credential `principal` has for `connection`; `subject` is the caller's own OAuth
    /// access token, when the request that runs the call came with one.
    pub(crate) async fn resolve(
        &self,
        connection: &str,
        principal: Option<&str>,
        subject: Option<&SecretString>,
    ) -> Result<Personal, Unresolved> {
        let Some(principal) = principal else {
            return Err(failed(
                ToolErrorKind::CredentialMissing,
                format!(
                    "connection `{connection}` sends each principal's own credential, and this call has no principal"
                ),
            ));
        };
        if let Some(Source::Exchange(_)) = self.declared.get(connection) {
            return self.exchange(connection, principal, subject).await;
        }
        let mut held = match self.copy(connection, principal) {
            Some(held) => held,
            None => self.load(connection, principal).await?,
        };
        let soon = OffsetDateTime::now_utc() + REFRESH_SKEW;
        if held.expires_at.is_some_and(|at| at <= soon) {
            held = self.refreshed(connection, principal).await?;
        }
        Ok(Personal {
            credential: held.credential.clone(),
            used: held.used.clone(),
        })
    }

    fn copy(&self, connection: &str, principal: &str) -> Option<Arc<Held>> {
        let held = self.held.read().unwrap_or_else(PoisonError::into_inner);
        held.get(connection)?.get(principal).cloned()
    }

    async fn load(&self, connection: &str, principal: &str) -> Result<Arc<Held>, Unresolved> {
        let failed = |e: String| Unresolved::Failed(ToolError::new(ToolErrorKind::Database, e));
        let stored = self
            .store
            .credential(connection.to_owned(), principal.to_owned())
            .await
            .map_err(|e| failed(e.to_string()))?;
        let Some(stored) = stored else {
            return Err(self.waiting(connection, principal, "is not set"));
        };
        let held = Arc::new(self.open(&stored).map_err(|why| {
            Unresolved::Failed(ToolError::new(
                ToolErrorKind::CredentialInvalid,
                format!(
                    "`{principal}`'s credential for connection `{connection}` {why}; set it again"
                ),
            ))
        })?);
        let mut copies = self.held.write().unwrap_or_else(PoisonError::into_inner);
        copies
            .entry(connection.to_owned())
            .or_default()
            .insert(principal.to_owned(), Arc::clone(&held));
        Ok(held)
    }

    fn open(&self, stored: &SealedCredential) -> Result<Held, String> {
        let context = context(&stored.connection, &stored.principal);
        let plain = self
            .keys
            .open(&context, &stored.sealed)
            .map_err(|why| format!("cannot be opened ({why})"))?;
        let value: Value =
            serde_json::from_slice(&plain).map_err(|_| "is damaged (not a credential)")?;
        Ok(Held {
            credential: credential_of(&value).ok_or("is damaged (no token)")?,
            expires_at: stored.expires_at,
            used: CredentialUse {
                connection: stored.connection.clone(),
                principal: stored.principal.clone(),
                kind: stored.kind.clone(),
                issuer: stored.issuer.clone(),
                digest: stored.digest.clone(),
            },
        })
    }

    fn waiting(&self, connection: &str, principal: &str, state: &str) -> Unresolved {
        let how = match self.declared.get(connection) {
            Some(Source::OAuth(_)) => format!(
                "connect the account: POST /v1/credentials/{connection}/connect with your token gives the link (or the inbox's Credentials page)"
            ),
            _ => format!(
                "set it with PUT /v1/credentials/{connection} and your token (or the inbox's Credentials page)"
            ),
        };
        Unresolved::Waiting {
            connection: connection.to_owned(),
            message: format!(
                "waiting for `{principal}`'s credential for connection `{connection}`, which {state}: {how}; the call runs once it is there"
            ),
        }
    }

    /// Stores `credential` as `principal`'s for `connection` (replacing theirs), in `by`'s
    /// name, and releases the calls that waited for it; returns them.
    ///
    /// # Errors
    /// A connection that does not take a person's secret, an empty or oversized value, or the
    /// ledger's failure.
    pub async fn set(
        &self,
        connection: &str,
        principal: &str,
        credential: &RunCredential,
        by: &str,
    ) -> Result<Vec<InvocationId>, VaultError> {
        match self.declared.get(connection) {
            None => return Err(VaultError::NotPerPrincipal(connection.to_owned())),
            Some(Source::Exchange(_)) => {
                return Err(VaultError::Exchanged(connection.to_owned()));
            }
            Some(_) => {}
        }
        let plain = plain_of(credential)?;
        let sealed = SealedCredential {
            connection: connection.to_owned(),
            principal: principal.to_owned(),
            kind: "secret".to_owned(),
            sealed: self
                .keys
                .seal(&context(connection, principal), plain.as_bytes())?,
            refresh_sealed: None,
            expires_at: None,
            issuer: None,
            digest: self.keys.current.digest(plain.as_bytes()),
            set_by: by.to_owned(),
            set_at: OffsetDateTime::now_utc(),
        };
        let released = self.store.set_credential(sealed).await?;
        self.forget(Some(connection), principal);
        Ok(released)
    }

    /// Revokes `principal`'s credential for `connection` (every connection when `None`) in
    /// `by`'s name; how many were removed.
    ///
    /// # Errors
    /// The ledger's failure.
    pub async fn revoke(
        &self,
        connection: Option<&str>,
        principal: &str,
        by: &str,
    ) -> Result<u32, VaultError> {
        let n = self
            .store
            .revoke_credential(
                connection.map(str::to_owned),
                principal.to_owned(),
                by.to_owned(),
            )
            .await?;
        self.forget(connection, principal);
        Ok(n)
    }

    /// What is stored (of `principal`, when given), never a secret: connection, principal,
    /// kind, digest, who set it and when.
    ///
    /// # Errors
    /// The ledger's failure.
    pub async fn list(&self, principal: Option<&str>) -> Result<Vec<Value>, VaultError> {
        let rows = self.store.credentials(principal.map(str::to_owned)).await?;
        Ok(rows.iter().map(listed).collect())
    }

    fn forget(&self, connection: Option<&str>, principal: &str) {
        let mut copies = self.held.write().unwrap_or_else(PoisonError::into_inner);
        for (name, by_principal) in copies.iter_mut() {
            if connection.is_none_or(|c| c == name) {
                by_principal.remove(principal);
            }
        }
        drop(copies);
        self.exchanged.forget_principal(principal);
    }

    /// Drops every copy held in memory whenever the ledger's credential events change; runs
    /// until `cancel`.
    pub async fn watch(self: Arc<Self>, cancel: CancellationToken) {
        let mut tick = tokio::time::interval(REFRESH);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = tick.tick() => self.refresh().await,
            }
        }
    }

    /// One read of the ledger's credential events; every copy dropped if they changed.
    pub async fn refresh(&self) {
        match self.store.credentials_epoch().await {
            Ok(epoch) => {
                if self.seen.swap(epoch, Ordering::AcqRel) != epoch {
                    self.held
                        .write()
                        .unwrap_or_else(PoisonError::into_inner)
                        .clear();
                    self.exchanged.clear();
                }
            }
            Err(error) => tracing::warn!(%error, "reading the credential events failed"),
        }
    }
}

fn failed(kind: ToolErrorKind, message: String) -> Unresolved {
    Unresolved::Failed(ToolError::new(kind, message))
}

/// What a sealed value is bound to: its connection and principal.
fn context(connection: &str, principal: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(connection.len() + principal.len() + 1);
    out.extend_from_slice(connection.as_bytes());
    out.push(0);
    out.extend_from_slice(principal.as_bytes());
    out
}

fn plain_of(credential: &RunCredential) -> Result<zeroize::Zeroizing<String>, VaultError> {
    let value = match credential {
        RunCredential::None => {
            return Err(VaultError::Invalid("a credential needs a value".into()));
        }
        RunCredential::Token(token) => json!({ "token": token.expose_secret() }),
        RunCredential::Basic { username, password } => json!({
            "username": username.expose_secret(),
            "password": password.expose_secret(),
        }),
    };
    let plain = zeroize::Zeroizing::new(value.to_string());
    let empty = match credential {
        RunCredential::Token(t) => t.expose_secret().is_empty(),
        RunCredential::Basic { username, .. } => username.expose_secret().is_empty(),
        RunCredential::None => true,
    };
    if empty {
        return Err(VaultError::Invalid("a credential cannot be empty".into()));
    }
    if plain.len() > MAX_SECRET {
        return Err(VaultError::Invalid(format!(
            "a credential is at most {MAX_SECRET} bytes"
        )));
    }
    Ok(plain)
}

fn credential_of(value: &Value) -> Option<RunCredential> {
    let text = |key: &str| {
        value
            .get(key)?
            .as_str()
            .map(|s| SecretString::from(s.to_owned()))
    };
    match (text("token"), text("username"), text("password")) {
        (Some(token), _, _) => Some(RunCredential::Token(token)),
        (None, Some(username), Some(password)) => Some(RunCredential::Basic { username, password }),
        _ => None,
    }
}

fn listed(row: &SealedCredential) -> Value {
    let time = |t: OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .ok()
    };
    json!({
        "connection": row.connection,
        "principal": row.principal,
        "kind": row.kind,
        "digest": row.digest,
        "issuer": row.issuer,
        "expires_at": row.expires_at.and_then(time),
        "set_by": row.set_by,
        "set_at": time(row.set_at),
    })
}
