//! What the gateway does as its serving process shuts down (docs/rules.md OPS-9): long polls
//! answer at once from the moment shutdown begins, and a call it runs in the background is
//! tracked, so the process waits for it instead of cutting it off. Nothing is decided or
//! dropped: a poll answers with the call's current state, and the row stays as it is.

use std::future::Future;

use super::Gateway;

impl Gateway {
    /// Whether shutdown has begun, so a long poll answers now.
    #[must_use]
    pub fn long_polls_ended(&self) -> bool {
        self.long_polls.is_cancelled()
    }

    /// Resolves once shutdown has begun (at once if it has).
    pub async fn until_long_polls_end(&self) {
        self.long_polls.cancelled().await;
    }

    /// Runs `task` on its own, tracked: a serving process waits for it before exiting.
    pub(crate) fn spawn_tracked(&self, task: impl Future<Output = ()> + Send + 'static) {
        drop(self.tasks.spawn(task));
    }
}
