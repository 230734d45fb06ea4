//! What a batch counts of each limit it judges, and what this process last knew each limit to
//! hold (docs/rules.md LEDGER-74).
//!
//! Guarantees: within a batch a key's use is read (or assumed) once and then counted in memory,
//! so the batch's later calls are judged with its earlier calls' shares, flushed or not. On
//! SQLite a batch whose writes are queued may judge a key from what this process knew after its
//! last commit touching it, instead of reading it — one statement and one hand-off to the
//! database's thread fewer a call; it then carries a guard that fails the commit unless the
//! key's buckets, after the batch's writes, hold no more than it assumed plus what it added.
//! A failed guard is a lost race: the batch runs again and reads. So an assumption can only
//! make a judgement stricter than the database's (a window that moved on, a share given back)
//! or be refused at commit, never let a call past a cap.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::sql::db::{CommitCheck, SqlValue};

/// Keys remembered at most; past it the memory starts over (keys per run come and go).
const MAX_KNOWN: usize = 16_384;

/// What this process's commits last left each key's buckets holding, at most (shares given
/// back and windows passing since only lower it).
#[derive(Default)]
pub(crate) struct KnownUses {
    keys: Mutex<HashMap<String, i64>>,
}

impl KnownUses {
    fn get(&self, key: &str) -> Option<i64> {
        self.lock().get(key).copied()
    }

    /// Remembers what a committed batch left its keys holding.
    pub(crate) fn learn(&self, batch: &BatchBudgets) {
        if batch.keys.is_empty() {
            return;
        }
        let mut keys = self.lock();
        if keys.len() + batch.keys.len() > MAX_KNOWN {
            keys.clear();
        }
        for (key, used) in &batch.keys {
            keys.insert(key.clone(), used.base.saturating_add(used.added));
        }
    }

    /// Forgets everything: a batch failed, and what it assumed is not known to hold.
    pub(crate) fn forget(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, i64>> {
        self.keys.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One key's use as a batch counts it.
struct KeyUse {
    /// What the key held before the batch: read in the batch's transaction, or assumed.
    base: i64,
    /// The shares the batch's rows added.
    added: i64,
    /// The base first assumed without a read, which the commit's guard checks.
    assumed: Option<i64>,
    /// Read in the transaction after an assumption judged a call over (once a key).
    refreshed: bool,
}

/// The limits one batch judged.
#[derive(Default)]
pub(crate) struct BatchBudgets {
    /// What this process knew, when the batch may assume it (SQLite, queued writes).
    known: Option<Arc<KnownUses>>,
    keys: HashMap<String, KeyUse>,
}

impl BatchBudgets {
    /// A batch's budgets; `known` lets it assume instead of reading (see the module's doc).
    pub(crate) fn new(known: Option<Arc<KnownUses>>) -> Self {
        Self {
            known,
            keys: HashMap::new(),
        }
    }

    /// What `key` holds as the batch counts it, if the batch has it or may assume it.
    pub(crate) fn counted(&mut self, key: &str) -> Option<i64> {
        if !self.keys.contains_key(key) {
            let base = self.known.as_ref()?.get(key)?;
            let assumed = Some(base);
            let used = KeyUse {
                base,
                added: 0,
                assumed,
                refreshed: false,
            };
            self.keys.insert(key.to_owned(), used);
        }
        self.keys.get(key).map(|u| u.base.saturating_add(u.added))
    }

    /// Starts counting `key` from `read`, what the transaction read it to hold.
    pub(crate) fn start(&mut self, key: &str, read: i64) {
        let used = KeyUse {
            base: read,
            added: 0,
            assumed: None,
            refreshed: false,
        };
        self.keys.insert(key.to_owned(), used);
    }

    /// Whether `key`'s count rests on an assumption not yet checked by a read.
    pub(crate) fn unread(&self, key: &str) -> bool {
        self.keys
            .get(key)
            .is_some_and(|u| u.assumed.is_some() && !u.refreshed)
    }

    /// Replaces an assumed base by `read`, which holds every share the batch added already
    /// (its queued rows were written first).
    pub(crate) fn refresh(&mut self, key: &str, read: i64) {
        if let Some(used) = self.keys.get_mut(key) {
            used.base = read.saturating_sub(used.added);
            used.refreshed = true;
        }
    }

    /// Counts a share a new row of the batch carries.
    pub(crate) fn add(&mut self, key: &str, share: i64) {
        if let Some(used) = self.keys.get_mut(key) {
            used.added = used.added.saturating_add(share);
        }
    }

    /// The commit's checks: for each key judged on an assumption, its buckets in a window at
    /// `now` hold no more than assumed plus added, or the commit fails as a lost race.
    pub(crate) fn checks(&self, now: i64) -> Vec<CommitCheck> {
        self.keys
            .iter()
            .filter_map(|(key, used)| Some((key, used.assumed?.saturating_add(used.added))))
            .map(|(key, expected)| CommitCheck {
                sql: "(SELECT COALESCE(SUM(used), 0) FROM budget_buckets \
                      WHERE limit_key = ? AND until > ?) <= ?"
                    .to_owned(),
                binds: vec![
                    SqlValue::Text(key.clone()),
                    SqlValue::Int(now),
                    SqlValue::Int(expected),
                ],
            })
            .collect()
    }
}
