//! Calls of pinned tools their server no longer lists fail naming them (OPS-51). The
//! connection tools this gateway withholds because their definitions differ from their
//! pins (docs/rules.md OPS-49), as found at boot, and accepting them from a surface of this
//! process (the inbox, INBOX-10); accepted definitions are served from the next start.

use airlock_ledger::LedgerError;
use airlock_spec::ToolSpec;

use super::Gateway;
use crate::pins::{self, Pending};
use crate::{ToolError, ToolErrorKind};

impl Gateway {
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
    pub fn pending_definitions(&self) -> Vec<Pending> {
        self.pending.lock().map(|p| p.clone()).unwrap_or_default()
    }

    /// Accepts what `connection`'s server said at boot (every waiting tool, or only `tool`),
    /// recorded under `by`; returns what was accepted.
    ///
    /// # Errors
    /// The ledger's, or nothing of `connection` (`tool`) waiting.
    pub async fn accept_definitions(
        &self,
        connection: &str,
        tool: Option<&str>,
        by: &str,
    ) -> Result<Vec<Pending>, LedgerError> {
        let waiting = self.pending_definitions();
        let accepted = pins::accept(self.store.as_ref(), &waiting, connection, tool, by).await?;
        if let Ok(mut pending) = self.pending.lock() {
            pending.retain(|p| !accepted.contains(p));
        }
        Ok(accepted)
    }
}
