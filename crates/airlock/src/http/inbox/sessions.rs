//! The inbox's sign-in sessions, kept in this process's memory (docs/rules.md INBOX-2): a
//! session is a random 256-bit id in a cookie, looked up by its SHA-256 (the map never holds
//! the cookie itself, and a lookup's timing depends on the hash, not on the secret's bytes).
//! Each session holds its principal, its CSRF token and one flash message. It ends after
//! [`IDLE`] without a request or [`ABSOLUTE`] after sign-in, whichever comes first, or at
//! sign-out; a restart signs everyone out. Failed sign-ins are counted: beyond
//! [`MAX_FAILURES`] in [`FAILURE_WINDOW`] every sign-in is refused until the window moves on.
//!
//! Time is passed in (`now`), so expiry is tested without waiting.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

/// A session ends this long after its last request.
pub(crate) const IDLE: Duration = Duration::from_secs(60 * 60);
/// A session ends this long after sign-in, however busy.
pub(crate) const ABSOLUTE: Duration = Duration::from_secs(12 * 60 * 60);
/// Failed sign-ins allowed per [`FAILURE_WINDOW`] (the whole process, not per address: the
/// server may sit behind a proxy, and a token is guessed from anywhere).
pub(crate) const MAX_FAILURES: usize = 20;
/// The window failed sign-ins are counted in.
pub(crate) const FAILURE_WINDOW: Duration = Duration::from_secs(60);

/// What a request learns of its session (no `Debug`: it holds the session's secrets).
#[derive(Clone)]
pub(crate) struct Signed {
    /// The admin token's principal: the decider of every decision taken in this session.
    pub(crate) principal: String,
    /// The per-session CSRF token every form carries.
    pub(crate) csrf: String,
    /// The session's cookie value (to sign it out).
    pub(crate) cookie: String,
}

impl Signed {
    /// Whether `supplied` is this session's CSRF token (constant-time).
    pub(crate) fn csrf_matches(&self, supplied: &str) -> bool {
        same_secret(&self.csrf, supplied)
    }
}

/// Whether two secrets are equal, in time independent of where they differ.
pub(crate) fn same_secret(expected: &str, supplied: &str) -> bool {
    bool::from(expected.as_bytes().ct_eq(supplied.as_bytes()))
}

struct Entry {
    principal: String,
    csrf: String,
    started: Instant,
    seen: Instant,
    flash: Option<String>,
}

impl Entry {
    fn live(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.seen) < IDLE
            && now.saturating_duration_since(self.started) < ABSOLUTE
    }
}

#[derive(Default)]
struct Inner {
    sessions: HashMap<[u8; 32], Entry>,
    failures: VecDeque<Instant>,
}

/// Every signed-in session of this process.
#[derive(Default)]
pub(crate) struct Sessions {
    inner: Mutex<Inner>,
}

/// A fresh random secret, hex-encoded (256 bits).
pub(crate) fn random_secret() -> String {
    hex::encode(rand::random::<[u8; 32]>())
}

fn key(cookie: &str) -> [u8; 32] {
    Sha256::digest(cookie.as_bytes()).into()
}

impl Sessions {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The map holds no invariant a panicking holder could break half-way.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts a session for `principal`; returns it (its cookie value included).
    pub(crate) fn start(&self, principal: String, now: Instant) -> Signed {
        let cookie = random_secret();
        let csrf = random_secret();
        let mut inner = self.lock();
        // Ended sessions go when a new one starts, so the map holds live ones only.
        inner.sessions.retain(|_, entry| entry.live(now));
        inner.sessions.insert(
            key(&cookie),
            Entry {
                principal: principal.clone(),
                csrf: csrf.clone(),
                started: now,
                seen: now,
                flash: None,
            },
        );
        Signed {
            principal,
            csrf,
            cookie,
        }
    }

    /// The live session of `cookie`, marked as seen at `now`; an ended one is removed.
    pub(crate) fn find(&self, cookie: &str, now: Instant) -> Option<Signed> {
        let mut inner = self.lock();
        let key = key(cookie);
        let entry = inner.sessions.get_mut(&key)?;
        if !entry.live(now) {
            inner.sessions.remove(&key);
            return None;
        }
        entry.seen = now;
        Some(Signed {
            principal: entry.principal.clone(),
            csrf: entry.csrf.clone(),
            cookie: cookie.to_owned(),
        })
    }

    /// Ends the session of `cookie`.
    pub(crate) fn end(&self, cookie: &str) {
        self.lock().sessions.remove(&key(cookie));
    }

    /// Leaves `message` for the session's next page.
    pub(crate) fn flash(&self, cookie: &str, message: String) {
        if let Some(entry) = self.lock().sessions.get_mut(&key(cookie)) {
            entry.flash = Some(message);
        }
    }

    /// Takes the message left for this page, if any.
    pub(crate) fn take_flash(&self, cookie: &str) -> Option<String> {
        self.lock().sessions.get_mut(&key(cookie))?.flash.take()
    }

    /// Whether a sign-in may be tried at `now` (fewer than [`MAX_FAILURES`] failures in the
    /// last [`FAILURE_WINDOW`]).
    pub(crate) fn may_try(&self, now: Instant) -> bool {
        let mut inner = self.lock();
        while inner
            .failures
            .front()
            .is_some_and(|at| now.saturating_duration_since(*at) >= FAILURE_WINDOW)
        {
            inner.failures.pop_front();
        }
        inner.failures.len() < MAX_FAILURES
    }

    /// Counts a failed sign-in at `now`.
    pub(crate) fn failed(&self, now: Instant) {
        self.lock().failures.push_back(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// INBOX-2: a session ends after its idle time and after its absolute time, whichever
    /// comes first; an ended session is gone for good.
    #[test]
    fn sessions_end_when_idle_and_at_their_absolute_limit() {
        let sessions = Sessions::default();
        let t0 = Instant::now();
        let s = sessions.start("alice".into(), t0);
        assert_eq!(
            sessions.find(&s.cookie, t0).map(|s| s.principal).as_deref(),
            Some("alice")
        );
        assert!(sessions.find("not-a-session", t0).is_none());
        // Kept alive by requests, it still ends at the absolute limit.
        let mut now = t0;
        while now + IDLE / 2 < t0 + ABSOLUTE {
            now += IDLE / 2;
            assert!(sessions.find(&s.cookie, now).is_some(), "{:?}", now - t0);
        }
        assert!(sessions.find(&s.cookie, t0 + ABSOLUTE).is_none());
        assert!(
            sessions.find(&s.cookie, t0).is_none(),
            "removed, not just hidden"
        );
        // Left alone, it ends after the idle time.
        let s = sessions.start("bob".into(), t0);
        assert!(
            sessions
                .find(&s.cookie, t0 + IDLE - Duration::from_secs(1))
                .is_some()
        );
        assert!(sessions.find(&s.cookie, t0 + 2 * IDLE).is_none());
    }

    /// INBOX-2: sign-out ends a session; flash messages are read once.
    #[test]
    fn sign_out_ends_a_session_and_a_flash_is_read_once() {
        let sessions = Sessions::default();
        let now = Instant::now();
        let s = sessions.start("alice".into(), now);
        sessions.flash(&s.cookie, "Approved.".into());
        assert_eq!(sessions.take_flash(&s.cookie).as_deref(), Some("Approved."));
        assert_eq!(sessions.take_flash(&s.cookie), None);
        sessions.end(&s.cookie);
        assert!(sessions.find(&s.cookie, now).is_none());
    }

    /// INBOX-3: CSRF tokens are per session and compared whole.
    #[test]
    fn csrf_tokens_are_per_session() {
        let sessions = Sessions::default();
        let now = Instant::now();
        let a = sessions.start("alice".into(), now);
        let b = sessions.start("alice".into(), now);
        assert_ne!(a.csrf, b.csrf);
        assert!(a.csrf_matches(&a.csrf));
        assert!(!a.csrf_matches(&b.csrf));
        assert!(!a.csrf_matches(&a.csrf[..10]));
        assert!(!a.csrf_matches(""));
    }

    /// INBOX-2: failed sign-ins beyond the limit refuse every sign-in until the window moves.
    #[test]
    fn failed_sign_ins_are_limited_per_window() {
        let sessions = Sessions::default();
        let t0 = Instant::now();
        for _ in 0..MAX_FAILURES {
            assert!(sessions.may_try(t0));
            sessions.failed(t0);
        }
        assert!(!sessions.may_try(t0 + FAILURE_WINDOW / 2));
        assert!(sessions.may_try(t0 + FAILURE_WINDOW));
    }
}
