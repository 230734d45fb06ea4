//! Calls of pinned tools their server no longer lists fail naming them (OPS-51). The
//! connection tools this gateway withholds because their definitions differ from their
//! pins (docs/rules.md OPS-49), as found at boot, and accepting them from a surface of this
//! process (the inbox, INBOX-10); accepted definitions are served from the next start.

use std::collections::HashSet;
use std::sync::Mutex;

use airlock_ledger::{LedgerError, Store};
use airlock_spec::ToolSpec;

use crate::pins::{self, Pending};
use crate::{ToolError, ToolErrorKind};

/// What boot found of the connection tools' definitions against their pins.
#[derive(Debug, Default)]
pub struct Definitions {
    /// Connection tools their server no longer lists though they are pinned: kept in the
    /// scope so their calls fail naming them, never listed (docs/rules.md OPS-51).
    pub(super) removed: HashSet<String>,
    /// Connection tools withheld until an operator accepts them (docs/rules.md OPS-49).
    pub(super) pending: Mutex<Vec<Pending>>,
}

impl Definitions {
    /// Whether `name` is a pinned connection tool its server no longer lists.
    #[must_use]
    pub fn is_removed(&self, name: &str) -> bool {
        self.removed.contains(name)
    }

    /// A call of a removed tool, as the tool error its caller reads; nothing is sent.
    pub(super) fn removed_refusal(&self, spec: &ToolSpec) -> Option<ToolError> {
        let name = spec.definition.name.as_str();
        self.is_removed(name).then(|| {
            ToolError::new(
                ToolErrorKind::Unavailable,
                format!(
                    "tool `{name}` was removed by its connection server since its definition was pinned; nothing was called (an operator sees it in `airlock tools diff`)"
                ),
            )
        })
    }

    /// What waits for an operator, as found at boot, less what was accepted since.
    #[must_use]
    pub fn pending(&self) -> Vec<Pending> {
        self.pending.lock().map(|p| p.clone()).unwrap_or_default()
    }

    /// Accepts what `connection`'s server said at boot (every waiting tool, or only `tool`),
    /// recorded in `store` under `by`; returns what was accepted.
    ///
    /// # Errors
    /// The ledger's, or nothing of `connection` (`tool`) waiting.
    pub async fn accept(
        &self,
        store: &dyn Store,
        connection: &str,
        tool: Option<&str>,
        by: &str,
    ) -> Result<Vec<Pending>, LedgerError> {
        let waiting = self.pending();
        let accepted = pins::accept(store, &waiting, connection, tool, by).await?;
        if let Ok(mut pending) = self.pending.lock() {
            pending.retain(|p| !accepted.contains(p));
        }
        Ok(accepted)
    }
}
