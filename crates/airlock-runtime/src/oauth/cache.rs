//! The cache of exchanged tokens, so a caller's every tool call does not cost a round trip to
//! the authorization server.
//!
//! Guarantees:
//! - An entry is found only under its own key: the SHA-256 digest of (principal, the exchange's
//!   target — endpoint, client, audience or resource, actor —, scopes, subject token); and an
//!   entry answers only the principal it was stored for (compared on every hit, so not even a
//!   digest collision could hand one principal another's token).
//! - An entry is served only until its token's `expires_in` less [`ExchangeCache::SKEW`], read
//!   on the injected clock; a token whose lifetime is unknown or within the skew is not kept.
//! - At most [`ExchangeCache::CAPACITY`] entries: when full, expired entries go first, then the
//!   one closest to expiry.
//! - [`ExchangeCache::forget_principal`] and [`ExchangeCache::clear`] also stop an exchange
//!   that was under way when they ran from storing its result (a revoked principal's token is
//!   never cached after the revocation).
//! - A hit hashes the key's parts once (no allocation) and takes one lock.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use secrecy::{ExposeSecret as _, SecretString};
use sha2::{Digest as _, Sha256};

use super::Tokens;

/// The monotonic clock the cache reads expiry by; tests inject their own.
pub type CacheClock = Arc<dyn Fn() -> Instant + Send + Sync>;

/// Where one exchanged token is kept: a digest of everything it depends on, and its principal.
/// Holds no token: the subject token enters only the digest.
#[derive(Debug, Clone, Copy)]
pub struct CacheKey<'a> {
    principal: &'a str,
    digest: [u8; 32],
}

impl<'a> CacheKey<'a> {
    /// The key for `principal`'s `subject` token exchanged for `audience` with `scopes` (in
    /// the order given: configured scopes have one).
    #[must_use]
    pub fn new(
        principal: &'a str,
        audience: &str,
        scopes: &[String],
        subject: &SecretString,
    ) -> Self {
        Self::of(principal, &[audience], scopes, subject)
    }

    /// The key over any number of target parts (see [`super::Exchange::cache_key`]).
    pub(super) fn of(
        principal: &'a str,
        target: &[&str],
        scopes: &[String],
        subject: &SecretString,
    ) -> Self {
        let mut hash = Sha256::new();
        // Each part length-prefixed, so no two different part lists hash the same bytes.
        let mut part = |bytes: &[u8]| {
            hash.update((bytes.len() as u64).to_be_bytes());
            hash.update(bytes);
        };
        part(principal.as_bytes());
        part(&(target.len() as u64).to_be_bytes());
        target.iter().for_each(|t| part(t.as_bytes()));
        part(&(scopes.len() as u64).to_be_bytes());
        scopes.iter().for_each(|s| part(s.as_bytes()));
        part(subject.expose_secret().as_bytes());
        Self {
            principal,
            digest: hash.finalize().into(),
        }
    }
}

struct Entry {
    principal: Box<str>,
    tokens: Arc<Tokens>,
    fresh_until: Instant,
}

#[derive(Default)]
struct State {
    entries: HashMap<[u8; 32], Entry>,
    /// Moves on every forget or clear: an exchange that started before cannot store its result.
    epoch: u64,
}

/// Exchanged tokens per (principal, target, scopes, subject token), until expiry less a skew.
pub struct ExchangeCache {
    state: Mutex<State>,
    clock: CacheClock,
}

impl std::fmt::Debug for ExchangeCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExchangeCache")
            .field("entries", &self.len())
            .finish_non_exhaustive()
    }
}

impl Default for ExchangeCache {
    fn default() -> Self {
        Self::new()
    }
}

impl ExchangeCache {
    /// Entries kept at most.
    pub const CAPACITY: usize = 8_192;
    /// A token is not served in the last this much of its life: a call must still find it
    /// valid when it arrives upstream.
    pub const SKEW: Duration = Duration::from_secs(30);

    /// An empty cache on the system's monotonic clock.
    #[must_use]
    pub fn new() -> Self {
        Self::with_clock(Arc::new(Instant::now))
    }

    /// An empty cache reading time from `clock`.
    #[must_use]
    pub fn with_clock(clock: CacheClock) -> Self {
        Self {
            state: Mutex::new(State::default()),
            clock,
        }
    }

    /// The tokens kept under `key`, if they are `key`'s principal's and not within the skew
    /// of expiring.
    #[must_use]
    pub fn get(&self, key: &CacheKey<'_>) -> Option<Arc<Tokens>> {
        let now = (self.clock)();
        let mut state = self.lock();
        let entry = state.entries.get(&key.digest)?;
        if *entry.principal != *key.principal {
            return None;
        }
        if now >= entry.fresh_until {
            state.entries.remove(&key.digest);
            return None;
        }
        Some(Arc::clone(&entry.tokens))
    }

    /// Keeps `tokens` under `key` (unless their lifetime is unknown or within the skew) and
    /// returns them shared.
    pub fn insert(&self, key: &CacheKey<'_>, tokens: Tokens) -> Arc<Tokens> {
        let tokens = Arc::new(tokens);
        self.store(key, &tokens, None);
        tokens
    }

    /// Drops every entry of `principal` (its credentials were revoked).
    pub fn forget_principal(&self, principal: &str) {
        let mut state = self.lock();
        state.entries.retain(|_, e| *e.principal != *principal);
        state.epoch += 1;
    }

    /// Drops every entry.
    pub fn clear(&self) {
        let mut state = self.lock();
        state.entries.clear();
        state.epoch += 1;
    }

    /// How many entries are kept (expired ones included until they are met or evicted).
    #[must_use]
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// True when nothing is kept.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The current epoch, read before an exchange starts.
    pub(super) fn epoch(&self) -> u64 {
        self.lock().epoch
    }

    /// Keeps `tokens` under `key`; with `since`, only if no forget or clear ran after that
    /// epoch was read.
    pub(super) fn store(&self, key: &CacheKey<'_>, tokens: &Arc<Tokens>, since: Option<u64>) {
        let Some(life) = tokens.expires_in.and_then(|e| e.checked_sub(Self::SKEW)) else {
            return;
        };
        if life.is_zero() {
            return;
        }
        let now = (self.clock)();
        let Some(fresh_until) = now.checked_add(life) else {
            return;
        };
        let mut state = self.lock();
        if since.is_some_and(|epoch| epoch != state.epoch) {
            return;
        }
        if state.entries.len() >= Self::CAPACITY && !state.entries.contains_key(&key.digest) {
            state.entries.retain(|_, e| e.fresh_until > now);
            if state.entries.len() >= Self::CAPACITY {
                let soonest = state
                    .entries
                    .iter()
                    .min_by_key(|(_, e)| e.fresh_until)
                    .map(|(digest, _)| *digest);
                if let Some(digest) = soonest {
                    state.entries.remove(&digest);
                }
            }
        }
        state.entries.insert(
            key.digest,
            Entry {
                principal: key.principal.into(),
                tokens: Arc::clone(tokens),
                fresh_until,
            },
        );
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(access: &str, secs: u64) -> Tokens {
        Tokens {
            access: SecretString::from(access),
            refresh: None,
            expires_in: Some(Duration::from_secs(secs)),
            scope: None,
            issued_token_type: None,
        }
    }

    fn key<'a>(principal: &'a str, subject: &SecretString) -> CacheKey<'a> {
        CacheKey::new(principal, "aud", &["s".to_owned()], subject)
    }

    /// Full: expired entries go first, then the one closest to expiry; never more than the
    /// capacity.
    #[test]
    fn a_full_cache_evicts_the_soonest_to_expire() {
        let cache = ExchangeCache::new();
        let subjects: Vec<SecretString> = (0..=ExchangeCache::CAPACITY)
            .map(|i| SecretString::from(format!("subject-{i}")))
            .collect();
        // The first one lives shortest; every other lives an hour.
        cache.insert(&key("p", &subjects[0]), tokens("short", 60));
        for s in &subjects[1..ExchangeCache::CAPACITY] {
            cache.insert(&key("p", s), tokens("long", 3_600));
        }
        assert_eq!(cache.len(), ExchangeCache::CAPACITY);
        let last = subjects.last().unwrap();
        cache.insert(&key("p", last), tokens("newest", 3_600));
        assert_eq!(cache.len(), ExchangeCache::CAPACITY);
        assert!(cache.get(&key("p", &subjects[0])).is_none());
        assert!(cache.get(&key("p", &subjects[1])).is_some());
        assert!(cache.get(&key("p", last)).is_some());
    }

    /// A forget that runs while an exchange is under way keeps its result out.
    #[test]
    fn an_exchange_overtaken_by_a_revocation_is_not_kept() {
        let cache = ExchangeCache::new();
        let subject = SecretString::from("subject");
        let epoch = cache.epoch();
        cache.forget_principal("p");
        cache.store(
            &key("p", &subject),
            &Arc::new(tokens("t", 3_600)),
            Some(epoch),
        );
        assert!(cache.is_empty());
        cache.store(
            &key("p", &subject),
            &Arc::new(tokens("t", 3_600)),
            Some(cache.epoch()),
        );
        assert_eq!(cache.len(), 1);
    }

    /// A token without a stated lifetime, or one within the skew, is not kept.
    #[test]
    fn an_unknown_or_too_short_lifetime_is_not_kept() {
        let cache = ExchangeCache::new();
        let subject = SecretString::from("subject");
        let mut unknown = tokens("t", 0);
        unknown.expires_in = None;
        cache.insert(&key("p", &subject), unknown);
        cache.insert(&key("p", &subject), tokens("t", 30));
        assert!(cache.is_empty());
    }
}
