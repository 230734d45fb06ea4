//! What a batch counts of each limit it judges, and what this process last knew each limit to
//! hold (docs/rules.md LEDGER-74).
//!
//! Guarantees: within a batch a key's use is read (or assumed) once and then counted in memory,
//! so the batch's later calls are judged with its earlier calls' shares, flushed or not. On
//! SQLite a batch whose writes are queued may judge a key from what this process knew after its
//! last commit touching it, instead of reading it — one statement fewer a call; it then carries
//! a commit check that fails the commit unless the key's buckets, after the batch's writes,
//! hold no more than it assumed plus what it added. A failed check is a lost race: the batch's
//! calls are judged again, and the key is read. So an assumption can only
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
    /// The base first assumed without a read, which the commit's check holds it to.
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
    /// (its queued rows were written first). A read taken in the write transaction is exact
    /// until the commit, so when it shows the assumption was not too low — every earlier
    /// judgement of the batch was as strict as the truth or stricter — the key needs no check
    /// at commit; when it shows more, the check stays and fails the commit, since an earlier
    /// call of the batch may have been judged on too little.
    pub(crate) fn refresh(&mut self, key: &str, read: i64) {
        if let Some(used) = self.keys.get_mut(key) {
            used.base = read.saturating_sub(used.added);
            used.refreshed = true;
            if used.assumed.is_some_and(|assumed| used.base <= assumed) {
                used.assumed = None;
            }
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{BatchBudgets, KnownUses};

    /// A batch that may assume `key` holds `held`, as this process's last commit left it.
    fn assuming(held: i64) -> BatchBudgets {
        let known = Arc::new(KnownUses::default());
        let mut committed = BatchBudgets::new(None);
        committed.start("k", held);
        known.learn(&committed);
        BatchBudgets::new(Some(known))
    }

    /// LEDGER-74: a read in the batch's transaction that shows the assumption was not too low
    /// drops the commit's check; one that shows more keeps it, so the commit fails.
    #[test]
    fn a_refresh_keeps_the_check_only_when_the_assumption_was_too_low() {
        let mut batch = assuming(10);
        assert_eq!(batch.counted("k"), Some(10));
        batch.add("k", 1);
        assert_eq!(batch.checks(0).len(), 1, "an unread assumption is checked");
        batch.refresh("k", 10);
        assert_eq!(batch.counted("k"), Some(10), "a share given back meanwhile");
        assert!(batch.checks(0).is_empty());

        let mut batch = assuming(10);
        batch.counted("k");
        batch.add("k", 1);
        batch.refresh("k", 13);
        assert_eq!(batch.counted("k"), Some(13));
        assert_eq!(
            batch.checks(0).len(),
            1,
            "another process reserved 2 meanwhile"
        );
    }
}
