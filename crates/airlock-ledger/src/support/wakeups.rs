//! Waking waiters: an in-process wakeups keyed by invocation id, and the text other processes
//! hear a commit announced in.
//!
//! Every committed change calls [`Wakeups::wake_many`]; a listener task also feeds it
//! other processes' announcements (`NOTIFY` on PostgreSQL, the wake socket on SQLite, see
//! `wake`). A waiter registers *before* it reads the row, so a change that commits between the
//! read and the wait still wakes it (no lost wake-ups, no polling). Rows that became approved
//! also bump [`Wakeups::approvals`], which a worker that runs approved calls waits on.
//!
//! An announcement names invocation ids and markers, never a row's content: arguments and
//! results stay in the database.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{Notify, watch};

use crate::vocabulary::ids::InvocationId;

/// Marks an announcement one of whose rows became approved (a worker should look).
const APPROVED: &str = "approved";
/// Ids per announcement: PostgreSQL's NOTIFY payload limit is 8000 bytes, an id is 36 bytes
/// plus a comma. The wake socket uses the same size.
const IDS_PER_MESSAGE: usize = 200;

/// Waiters per invocation, and the approvals signal.
#[derive(Debug)]
pub(crate) struct Wakeups {
    waiters: Mutex<HashMap<InvocationId, Arc<Notify>>>,
    approvals: watch::Sender<()>,
    /// Bumped when this process committed outbox rows (LEDGER-32).
    notices: watch::Sender<()>,
}

impl Default for Wakeups {
    fn default() -> Self {
        Self {
            waiters: Mutex::default(),
            approvals: watch::channel(()).0,
            notices: watch::channel(()).0,
        }
    }
}

/// The announcements of one commit: `changed` in chunks, the first marked if `approved`.
pub(crate) fn messages(changed: &[InvocationId], approved: bool) -> Vec<String> {
    changed
        .chunks(IDS_PER_MESSAGE)
        .enumerate()
        .map(|(i, chunk)| {
            let marker = (approved && i == 0).then_some(APPROVED);
            let ids = chunk.iter().map(ToString::to_string);
            marker
                .map(str::to_owned)
                .into_iter()
                .chain(ids)
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect()
}

/// A registration; dropping the last one for an id removes the entry.
pub(crate) struct Watch<'a> {
    wakeups: &'a Wakeups,
    id: InvocationId,
    pub(crate) notify: Arc<Notify>,
}

impl Wakeups {
    pub(crate) fn watch(&self, id: InvocationId) -> Watch<'_> {
        let mut map = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        let notify = Arc::clone(map.entry(id).or_default());
        Watch {
            wakeups: self,
            id,
            notify,
        }
    }

    pub(crate) fn wake_many(&self, ids: &[InvocationId]) {
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
    /// missed); each waiter re-reads its row, and a worker looks for approved rows.
    pub(crate) fn notify_all(&self) {
        let map = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        for n in map.values() {
            n.notify_waiters();
        }
        self.approved();
    }

    /// Some row became approved: a worker waiting on [`Wakeups::approvals`] looks.
    pub(crate) fn approved(&self) {
        self.approvals.send_replace(());
    }

    /// Changes whenever a row may have become approved; a receiver never misses a change made
    /// after it last looked.
    pub(crate) fn approvals(&self) -> watch::Receiver<()> {
        self.approvals.subscribe()
    }

    pub(crate) fn noticed(&self) {
        self.notices.send_replace(());
    }

    /// Changes whenever this process committed outbox rows.
    pub(crate) fn notices(&self) -> watch::Receiver<()> {
        self.notices.subscribe()
    }

    /// Applies another process's announcement (see [`messages`]); a message it cannot read
    /// wakes everyone, as a lost one would have to.
    pub(crate) fn hear(&self, message: &str) {
        let mut ids = Vec::new();
        for token in message.split(',') {
            match token {
                APPROVED => self.approved(),
                _ => match token.parse() {
                    Ok(id) => ids.push(id),
                    Err(_) => return self.notify_all(),
                },
            }
        }
        self.wake_many(&ids);
    }
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        let mut map = self
            .wakeups
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_big_commit_is_announced_in_messages_under_the_notify_limit() {
        let ids: Vec<InvocationId> = (0..450).map(|_| InvocationId::new()).collect();
        let sent = messages(&ids, true);
        assert_eq!(sent.len(), 3);
        assert!(sent.iter().all(|m| m.len() < 8000));
        assert!(sent[0].starts_with("approved,"));
        assert!(!sent[1].contains(APPROVED));
        let heard: Vec<InvocationId> = sent
            .iter()
            .flat_map(|m| m.split(','))
            .filter_map(|t| t.parse().ok())
            .collect();
        assert_eq!(heard, ids);
        assert!(messages(&[], true).is_empty());
    }

    #[tokio::test]
    async fn the_marker_raises_approvals_and_an_unreadable_message_wakes_everyone() {
        let wakeups = Wakeups::default();
        let mut approvals = wakeups.approvals();
        let (id, other) = (InvocationId::new(), InvocationId::new());
        let watch = wakeups.watch(id);
        let mut woken = std::pin::pin!(watch.notify.notified());
        woken.as_mut().enable();

        wakeups.hear(&other.to_string());
        assert!(!approvals.has_changed().unwrap());
        wakeups.hear(&format!("approved,{other}"));
        assert!(approvals.has_changed().unwrap());
        approvals.borrow_and_update();
        assert!(futures::poll!(woken.as_mut()).is_pending());

        wakeups.hear("garbled");
        assert!(futures::poll!(woken.as_mut()).is_ready());
        assert!(approvals.has_changed().unwrap());
    }
}
