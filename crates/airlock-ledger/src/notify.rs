//! Waking waiters: an in-process notifier keyed by invocation id.
//!
//! Every committed change calls [`Notifier::notify_many`]; on PostgreSQL a listener task also
//! feeds it `NOTIFY`s from other processes. A waiter registers *before* it reads the row, so a
//! change that commits between the read and the wait still wakes it (no lost wake-ups, no
//! polling).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

use crate::ids::InvocationId;

/// Waiters per invocation.
#[derive(Debug, Default)]
pub(crate) struct Notifier {
    waiters: Mutex<HashMap<InvocationId, Arc<Notify>>>,
}

/// A registration; dropping the last one for an id removes the entry.
pub(crate) struct Watch<'a> {
    notifier: &'a Notifier,
    id: InvocationId,
    pub(crate) notify: Arc<Notify>,
}

impl Notifier {
    pub(crate) fn watch(&self, id: InvocationId) -> Watch<'_> {
        let mut map = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        let notify = Arc::clone(map.entry(id).or_default());
        Watch {
            notifier: self,
            id,
            notify,
        }
    }

    pub(crate) fn notify_many(&self, ids: &[InvocationId]) {
        if ids.is_empty() {
            return;
        }
        let map = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        for id in ids {
            if let Some(n) = map.get(id) {
                n.notify_waiters();
            }
        }
    }

    /// Wakes everyone (after a lost `LISTEN` connection, when notifications may have been
    /// missed); each waiter re-reads its row.
    pub(crate) fn notify_all(&self) {
        let map = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        for n in map.values() {
            n.notify_waiters();
        }
    }
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        let mut map = self
            .notifier
            .waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Two references left: the map's and ours. Checked under the lock, so no new
        // registration can race with the removal.
        if Arc::strong_count(&self.notify) == 2 {
            map.remove(&self.id);
        }
    }
}
