//! The kill switch as the call path sees it (docs/rules.md POLICY-51 to POLICY-55): which
//! freeze, if any, covers a call, judged on this process's copy of the ledger's freezes.
//!
//! Guarantees: the copy is replaced whole, never edited, so a call is judged against one
//! consistent set; a freeze or unfreeze made through this process is in its copy before the
//! request that made it is answered, and one made anywhere else (another replica, the CLI)
//! within one refresh period ([`REFRESH`]) of its commit, as long as [`FreezeWatch::run`] runs.
//! A covered call is recorded `denied` in the freeze's name before any other policy, and never
//! runs; an approved call a freeze covers stays approved and runs once it is lifted.

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use airlock_ledger::{Freeze, FreezeTarget, LedgerError, Refusal, Refuser, Store};
use airlock_spec::{ScopeId, ToolSpec};
use tokio_util::sync::CancellationToken;

/// How often a serving process reads the freezes every replica shares: a freeze made anywhere
/// reaches every replica within this, plus one read.
pub const REFRESH: Duration = Duration::from_millis(250);

/// What a freeze can cover of one call.
#[derive(Debug, Clone, Copy)]
pub struct Covered<'a> {
    /// The agent whose scope the call is made in (None: the gateway scope).
    pub agent: Option<&'a str>,
    /// Who calls.
    pub principal: Option<&'a str>,
    /// The tool's full name.
    pub tool: &'a str,
    /// The connection it goes through, when the caller can tell ([`ToolSource::connection`]).
    ///
    /// [`ToolSource::connection`]: airlock_spec::ToolSource::connection
    pub connection: Option<&'a str>,
}

impl<'a> Covered<'a> {
    /// A call of `spec` in `scope` by `principal`.
    #[must_use]
    pub fn call(scope: &'a ScopeId, principal: Option<&'a str>, spec: &'a ToolSpec) -> Self {
        Self {
            agent: agent_of(scope),
            principal,
            tool: spec.definition.name.as_str(),
            connection: spec.source.connection(),
        }
    }
}

/// The agent whose scope `scope` is, if any.
pub(crate) fn agent_of(scope: &ScopeId) -> Option<&str> {
    match scope {
        ScopeId::Gateway => None,
        ScopeId::Agent(name) => Some(name),
    }
}

/// The first of `freezes` that covers `call`.
#[must_use]
pub fn covering<'f>(freezes: &'f [Freeze], call: &Covered<'_>) -> Option<&'f Freeze> {
    freezes.iter().find(|f| match &f.target {
        FreezeTarget::Everything => true,
        FreezeTarget::Agent(name) => call.agent == Some(name.as_str()),
        FreezeTarget::Principal(name) => call.principal == Some(name.as_str()),
        FreezeTarget::Connection(name) => call.connection == Some(name.as_str()),
        FreezeTarget::Tool(name) => call.tool == name,
    })
}

/// What froze a call, as its caller and the people who read the row see it.
#[must_use]
pub fn describe(freeze: &Freeze) -> String {
    format!(
        "frozen: {} is frozen by {} ({})",
        freeze.target, freeze.by, freeze.reason
    )
}

/// The reason a frozen call is refused with.
pub(crate) fn reason(freeze: &Freeze) -> String {
    format!("{}; nothing was run", describe(freeze))
}

/// The refusal a frozen call is recorded with.
pub(crate) fn refusal(freeze: &Freeze) -> Refusal {
    Refusal {
        by: Refuser::Freeze,
        reason: reason(freeze),
    }
}

/// This process's copy of the freezes in force, and the way to change them.
pub struct FreezeWatch {
    store: Arc<dyn Store>,
    copy: RwLock<Arc<Vec<Freeze>>>,
    /// Changes whenever a refresh finds a freeze gone: the approved calls it held back may run.
    lifted: tokio::sync::watch::Sender<()>,
    /// One refresh at a time: a read begun before a change this process made cannot install
    /// itself after the read that includes it.
    refreshing: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for FreezeWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FreezeWatch")
            .field("freezes", &self.current().len())
            .finish_non_exhaustive()
    }
}

impl FreezeWatch {
    /// A watch over `store`'s freezes, empty until [`Self::refresh`] reads them.
    #[must_use]
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            copy: RwLock::new(Arc::new(Vec::new())),
            lifted: tokio::sync::watch::Sender::new(()),
            refreshing: tokio::sync::Mutex::new(()),
        }
    }

    /// A signal that changes whenever this process sees a freeze lifted.
    #[must_use]
    pub fn lifted(&self) -> tokio::sync::watch::Receiver<()> {
        self.lifted.subscribe()
    }

    /// The freezes in force, as of the last read.
    #[must_use]
    pub fn current(&self) -> Arc<Vec<Freeze>> {
        Arc::clone(&self.copy.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// The freeze that covers `call`, if any.
    #[must_use]
    pub fn covering(&self, call: &Covered<'_>) -> Option<Freeze> {
        covering(&self.current(), call).cloned()
    }

    /// Reads the freezes every replica shares into this process's copy.
    ///
    /// # Errors
    /// The ledger's; the copy is then left as it was.
    pub async fn refresh(&self) -> Result<(), LedgerError> {
        let _one = self.refreshing.lock().await;
        let read = self.store.freezes().await?;
        // OPS-73: what this replica holds frozen, as of its last read.
        metrics::gauge!("airlock_freezes").set(read.len() as f64);
        let before = std::mem::replace(
            &mut *self.copy.write().unwrap_or_else(PoisonError::into_inner),
            Arc::new(read.clone()),
        );
        if before.iter().any(|f| !read.contains(f)) {
            self.lifted.send_replace(());
        }
        Ok(())
    }

    /// Freezes `target` in `by`'s name; in this process's copy before it returns. A target
    /// frozen already keeps its first freeze, which is returned.
    ///
    /// # Errors
    /// The ledger's (`Invalid` for an empty reason).
    pub async fn freeze(
        &self,
        target: FreezeTarget,
        reason: &str,
        by: &str,
    ) -> Result<Freeze, LedgerError> {
        let freeze = Freeze {
            target,
            reason: reason.to_owned(),
            by: by.to_owned(),
            at: time::OffsetDateTime::now_utc(),
        };
        let stored = self.store.freeze(freeze).await?;
        tracing::warn!(target: crate::EVENTS, freeze = %stored.target, by = stored.by, reason = stored.reason, "frozen");
        self.refresh().await?;
        Ok(stored)
    }

    /// Lifts the freeze of `target` in `by`'s name; `None` when it was not frozen.
    ///
    /// # Errors
    /// The ledger's.
    pub async fn unfreeze(
        &self,
        target: FreezeTarget,
        by: &str,
    ) -> Result<Option<Freeze>, LedgerError> {
        let lifted = self.store.unfreeze(target, by.to_owned()).await?;
        if let Some(lifted) = &lifted {
            tracing::warn!(target: crate::EVENTS, freeze = %lifted.target, by, "unfrozen");
        }
        self.refresh().await?;
        Ok(lifted)
    }

    /// Refreshes the copy every `every` until `stop`; a failed read is logged and tried again
    /// at the next period.
    pub async fn run(&self, every: Duration, stop: CancellationToken) {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticks.tick() => {}
            }
            if let Err(error) = self.refresh().await {
                tracing::warn!(%error, "the freezes could not be read; the last copy stands");
            }
        }
    }
}
