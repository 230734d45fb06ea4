//! Wall-clock time for the ledger, injectable so expiry and leases are testable without sleeping.
//!
//! Timestamps are stored as whole microseconds since the Unix epoch on both backends; values
//! from a clock are truncated to microseconds so what is written is exactly what is read back.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use time::OffsetDateTime;

/// A source of the current time.
pub trait Clock: Send + Sync + 'static {
    /// Now, in UTC.
    fn now(&self) -> OffsetDateTime;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }
}

/// A clock that only moves when told to (for tests and simulations).
#[derive(Debug, Clone)]
pub struct ManualClock {
    now: Arc<Mutex<OffsetDateTime>>,
}

impl ManualClock {
    /// A clock stopped at `start`.
    #[must_use]
    pub fn new(start: OffsetDateTime) -> Self {
        Self {
            now: Arc::new(Mutex::new(start)),
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let mut now = self
            .now
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *now += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> OffsetDateTime {
        *self
            .now
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Microseconds since the Unix epoch, saturating far outside the representable range.
pub(crate) fn to_micros(t: OffsetDateTime) -> i64 {
    i64::try_from(t.unix_timestamp_nanos() / 1_000).unwrap_or(i64::MAX)
}

/// The inverse of [`to_micros`].
pub(crate) fn from_micros(micros: i64) -> Option<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(micros) * 1_000).ok()
}

/// `t` truncated to whole microseconds (what the database keeps).
pub(crate) fn truncate(t: OffsetDateTime) -> OffsetDateTime {
    from_micros(to_micros(t)).unwrap_or(t)
}
