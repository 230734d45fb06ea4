//! What a store's writer lanes remember between batches, so a batch need not read it again: on
//! PostgreSQL each read is a round trip, about as long as the batch's useful work; on SQLite a
//! statement on the writer's connection.
//!
//! [`SessionCache`]: sessions seen in the database, and the ids of agent runs seen there.
//! Sessions are never updated or deleted, so a cached one stays true; runs are never deleted,
//! and only a run's existence is kept (its status moves), which is all recording a call in it
//! checks — so a run's steps record their calls without reading the run (AGENT-54).
//!
//! [`RecentRows`]: the invocation rows the last commits left `running`. One is lent only to a
//! job of the lease that holds it (a renewal or a finish), so a cached row always leads its job
//! to write, never to a refusal read off a stale copy. Only batches whose writes are queued borrow, and every queued
//! write is a compare-and-swap on the (state, version) its job read: if another process
//! changed the row since (a second replica's sweeper), the batch finds the write
//! short, the whole batch rolls back, the cache is emptied, and the jobs run again from rows
//! read in the transaction. A version never goes backwards here, so a slower lane cannot
//! overwrite a newer row with an older one.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, PoisonError};

use crate::vocabulary::ids::{InvocationId, RunId, SessionId};
use crate::vocabulary::model::Invocation;
use crate::vocabulary::state::InvocationState;

/// Entries kept before a cache starts over (a bound on memory, not a tuning knob).
const CACHE_MAX: usize = 4096;

/// Sessions seen in the database, with their principal, and runs seen there; recording a call
/// then needs no session read, nor a run read.
#[derive(Default)]
pub(crate) struct SessionCache {
    sessions: Mutex<HashMap<SessionId, Option<String>>>,
    runs: Mutex<HashSet<RunId>>,
}

impl SessionCache {
    pub(crate) fn get(&self, id: SessionId) -> Option<Option<String>> {
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
            .cloned()
    }

    pub(crate) fn put(&self, id: SessionId, principal: Option<String>) {
        let mut map = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        if map.len() >= CACHE_MAX {
            map.clear();
        }
        map.insert(id, principal);
    }

    /// Whether run `id` was seen in the database.
    pub(crate) fn has_run(&self, id: RunId) -> bool {
        self.runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&id)
    }

    pub(crate) fn put_run(&self, id: RunId) {
        let mut set = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        if set.len() >= CACHE_MAX {
            set.clear();
        }
        set.insert(id);
    }

    /// Forgets everything (after a rolled-back batch, which may have created sessions or runs).
    pub(crate) fn clear(&self) {
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

/// Rows as the last commits left them, shared by a store's writer lanes.
#[derive(Default)]
pub(crate) struct RecentRows(Mutex<HashMap<InvocationId, Invocation>>);

impl RecentRows {
    /// Copies into `rows` each cached row among `leases` (id, owner) that runs under that
    /// owner's lease, and returns the ids it had no such row for.
    pub(crate) fn lend(
        &self,
        leases: Vec<(InvocationId, String)>,
        rows: &mut HashMap<InvocationId, Invocation>,
    ) -> Vec<InvocationId> {
        let map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        leases
            .into_iter()
            .filter_map(|(id, owner)| match map.get(&id) {
                Some(inv) if inv.lease.as_ref().is_some_and(|l| l.owner == owner) => {
                    rows.insert(id, inv.clone());
                    None
                }
                _ => Some(id),
            })
            .collect()
    }

    /// Keeps the running rows a batch committed (or read inside its transaction), and forgets
    /// the ones that stopped running.
    pub(crate) fn keep<'a>(&self, rows: impl IntoIterator<Item = &'a Invocation>) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        for inv in rows {
            if inv.state != InvocationState::Running {
                map.remove(&inv.id);
                continue;
            }
            if map
                .get(&inv.id)
                .is_some_and(|had| had.version >= inv.version)
            {
                continue;
            }
            if map.len() >= CACHE_MAX {
                map.clear();
            }
            map.insert(inv.id, inv.clone());
        }
    }

    /// Forgets everything (after a batch that rolled back: a row may have moved on).
    pub(crate) fn clear(&self) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// AGENT-54: a run seen once is known without a read; a rolled-back batch forgets it with
    /// the sessions it may have created.
    #[test]
    fn a_run_seen_is_known_until_the_cache_is_cleared() {
        let cache = SessionCache::default();
        let (seen, other) = (RunId::new(), RunId::new());
        cache.put_run(seen);
        assert!(cache.has_run(seen));
        assert!(!cache.has_run(other));
        cache.clear();
        assert!(!cache.has_run(seen));
    }
}
