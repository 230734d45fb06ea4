//! Connections a run's caller supplied, and which runs this process holds them for.
//!
//! Guarantees: a supplied connection is held in memory only (never stored, logged or shown);
//! its credential has the shapes `airlock.toml`'s have (a single value for `bearer`, `header`
//! and `query`, a `username`/`password` pair for `basic`); a name the run's caller supplied
//! but this process no longer holds (it restarted, or another replica took the run over) is a
//! `credential_missing` tool error naming why — it is never answered with `airlock.toml`'s
//! connection of the same name (docs/rules.md AGENT-12, AGENT-63, AGENT-64).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use airlock_ledger::{LedgerError, RunId, Store};
use airlock_spec::{ApiConnection, CredentialPath, Credentials};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use crate::{ToolError, ToolErrorKind};

/// A supplied connection's credential, in the shapes `airlock.toml`'s credentials take
/// (docs/rules.md AGENT-65). `Debug` never shows a secret.
#[derive(Debug, Clone)]
pub enum RunCredential {
    /// None: for an API without auth (`auth: { scheme: none }`).
    None,
    /// One value: a bearer token, a header's value, a query parameter's value.
    Token(SecretString),
    /// A `basic` credential's user name and password.
    Basic {
        /// The user name.
        username: SecretString,
        /// The password.
        password: SecretString,
    },
}

/// A connection at `base_url` that sends `credential` (and nothing else): the connection and
/// the one credential it names, as the executors take them. Used for a connection a run's
/// caller supplied and for one whose credential is its principal's own.
pub(crate) fn sending(base_url: &str, credential: &RunCredential) -> (ApiConnection, Credentials) {
    let pairs: Vec<(String, String)> = match credential {
        RunCredential::None => Vec::new(),
        RunCredential::Token(token) => {
            vec![(RUN_CREDENTIAL.to_owned(), token.expose_secret().to_owned())]
        }
        RunCredential::Basic { username, password } => vec![
            (
                format!("{RUN_CREDENTIAL}.username"),
                username.expose_secret().to_owned(),
            ),
            (
                format!("{RUN_CREDENTIAL}.password"),
                password.expose_secret().to_owned(),
            ),
        ],
    };
    let path = (!pairs.is_empty())
        .then(|| CredentialPath::try_from(RUN_CREDENTIAL).ok())
        .flatten();
    let connection = ApiConnection {
        base_url: base_url.to_owned(),
        credential: path,
        // Not read: the executors decide the guard from the connection's name.
        use_egress_allow: false,
        per_principal: None,
    };
    (connection, Credentials::from_pairs(pairs))
}

/// The names of the connections a root run's caller supplied (never their URLs or
/// credentials), as the run's stored details keep them: what a call of the run must never
/// reach through another connection (AGENT-63). Flattened into the run's details.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SuppliedNames {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) supplied: Vec<String>,
}

impl SuppliedNames {
    /// The names root run `run`'s caller supplied, read from its stored details.
    pub(crate) async fn of(store: &dyn Store, run: RunId) -> Result<Vec<String>, LedgerError> {
        let row = store
            .run_detail(run)
            .await?
            .ok_or(LedgerError::RunNotFound(run))?;
        let names: Self = serde_json::from_value(row.detail)
            .map_err(|e| LedgerError::Invalid(format!("stored run detail: {e}")))?;
        Ok(names.supplied)
    }
}

/// The path under which a supplied connection's credential is held in its own bundle.
const RUN_CREDENTIAL: &str = "run.credential";

/// The connections one run's caller supplied: those this process holds, and those it was
/// given once and no longer holds.
#[derive(Debug, Default)]
pub(crate) struct RunConnections {
    held: BTreeMap<String, (ApiConnection, Credentials)>,
    gone: BTreeSet<String>,
}

impl RunConnections {
    /// Connections whose names the run's caller supplied but which this process was never
    /// given: each call through one fails naming why.
    pub(crate) fn gone(names: impl IntoIterator<Item = String>) -> Self {
        Self {
            held: BTreeMap::new(),
            gone: names.into_iter().collect(),
        }
    }

    /// Adds connection `name` at `base_url`, sent `credential`.
    pub(crate) fn insert(&mut self, name: &str, base_url: &str, credential: &RunCredential) {
        self.gone.remove(name);
        self.held
            .insert(name.to_owned(), sending(base_url, credential));
    }

    /// Connection `name` as the run's caller supplied it; `None` when it supplied none of
    /// that name (the deployment's applies).
    ///
    /// # Errors
    /// `credential_missing` when the caller supplied it and this process no longer holds it.
    pub(crate) fn get(
        &self,
        name: &str,
    ) -> Result<Option<(&ApiConnection, &Credentials)>, ToolError> {
        if self.gone.contains(name) {
            return Err(ToolError::new(
                ToolErrorKind::CredentialMissing,
                format!(
                    "connection `{name}` was supplied by this run's caller and is no longer held \
                     (the process restarted, or another replica took the run over); airlock \
                     never sends the call to another connection: start a new run supplying it"
                ),
            ));
        }
        Ok(self.held.get(name).map(|(c, k)| (c, k)))
    }
}

/// The supplied connections of the runs this process serves or holds parked, by root run:
/// what a call of a run reaches, looked up by the run id its row carries, so it is the same
/// whichever task runs the call (the run's own, a decision's, the worker's).
#[derive(Debug, Default)]
pub(crate) struct SuppliedRuns {
    by_run: Mutex<HashMap<RunId, Arc<RunConnections>>>,
}

impl SuppliedRuns {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<RunId, Arc<RunConnections>>> {
        self.by_run.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Holds `connections` for root run `run` (replacing what was held).
    pub(crate) fn hold(&self, run: RunId, connections: Arc<RunConnections>) {
        self.map().insert(run, connections);
    }

    /// What is held for `run`, if this process holds anything.
    pub(crate) fn get(&self, run: RunId) -> Option<Arc<RunConnections>> {
        self.map().get(&run).cloned()
    }

    /// Forgets `run`'s connections.
    pub(crate) fn release(&self, run: RunId) {
        self.map().remove(&run);
    }
}
