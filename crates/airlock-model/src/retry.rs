//! Retries of a provider request (docs/rules.md MODEL-4 to MODEL-6): exponential backoff with
//! full jitter on 429, 5xx and connection failures, honouring `Retry-After`, a bounded number of
//! attempts inside the call's deadline, and never once text went to the token sink.
//!
//! Guarantees: at most [`Retry::attempts`] requests per turn; a wait never passes the call's
//! deadline (the last error is returned instead); an honoured `Retry-After` is capped at
//! [`Retry::max_retry_after`]; sleeping goes through [`Sleep`], so tests wait no real time.

use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::future::BoxFuture;
use http::HeaderMap;
use http::header::RETRY_AFTER;
use tokio::time::Instant;

use crate::ModelError;

/// Waits between attempts; injectable so tests never sleep.
pub trait Sleep: Send + Sync + fmt::Debug {
    /// Waits `delay`.
    fn sleep(&self, delay: Duration) -> BoxFuture<'static, ()>;
}

/// The production [`Sleep`]: the tokio timer.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioSleep;

impl Sleep for TokioSleep {
    fn sleep(&self, delay: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(delay))
    }
}

/// How a provider request is retried.
#[derive(Debug, Clone)]
pub struct Retry {
    /// Requests per turn at most, the first included (default 4).
    pub attempts: u32,
    /// The backoff before the second attempt; doubled for each later one (default 500 ms).
    pub base: Duration,
    /// The most one backoff waits before jitter (default 8 s).
    pub max_backoff: Duration,
    /// The most an honoured `Retry-After` waits (default 30 s).
    pub max_retry_after: Duration,
    /// How waiting is done.
    pub sleep: Arc<dyn Sleep>,
}

impl Default for Retry {
    fn default() -> Self {
        Self {
            attempts: 4,
            base: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(30),
            sleep: Arc::new(TokioSleep),
        }
    }
}

/// How one attempt ended.
#[derive(Debug)]
pub(crate) enum Attempt<T> {
    /// It succeeded.
    Done(T),
    /// It failed in a way another attempt may fix; `after` is the provider's `Retry-After`.
    Again {
        error: ModelError,
        after: Option<Duration>,
    },
    /// It failed for good.
    Fail(ModelError),
}

impl Retry {
    /// Runs `attempt` until it is done, fails for good, the attempts are spent, or the next wait
    /// would pass `deadline`; returns the last error in the last three cases.
    pub(crate) async fn run<T, F, Fut>(
        &self,
        deadline: Instant,
        mut attempt: F,
    ) -> Result<T, ModelError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Attempt<T>>,
    {
        let mut number: u32 = 1;
        loop {
            let (error, after) = match attempt().await {
                Attempt::Done(value) => return Ok(value),
                Attempt::Fail(error) => return Err(error),
                Attempt::Again { error, after } => (error, after),
            };
            if number >= self.attempts.max(1) {
                return Err(error);
            }
            let delay = self.delay(number, after);
            if Instant::now() + delay >= deadline {
                return Err(error);
            }
            tracing::info!(
                attempt = number,
                delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                status = error.status,
                kind = %error.kind,
                "model provider request failed; retrying"
            );
            self.sleep.sleep(delay).await;
            number += 1;
        }
    }

    /// The wait after failed attempt `number` (1-based): the provider's `Retry-After` (capped),
    /// else full jitter over `base · 2^(number-1)` capped at `max_backoff`.
    pub(crate) fn delay(&self, number: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(after) = retry_after {
            return after.min(self.max_retry_after);
        }
        let exp = self
            .base
            .saturating_mul(2u32.saturating_pow(number.saturating_sub(1)))
            .min(self.max_backoff);
        exp.mul_f64(jitter())
    }
}

/// A fraction in [0, 1) for full jitter. Jitter spreads retries, it guards nothing, so the
/// process's randomly keyed hasher is source enough (no random-number crate for this).
fn jitter() -> f64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    // The top 53 bits make an exactly representable fraction.
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// `Retry-After` as a wait: delta-seconds or an HTTP date (a date in the past waits nothing).
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// True for the statuses another attempt may fix: 429 and every 5xx.
pub(crate) fn retryable_status(status: u16) -> bool {
    status == 429 || (500..600).contains(&status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, HeaderValue::from_str(value).unwrap());
        h
    }

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        assert_eq!(retry_after(&headers("7")), Some(Duration::from_secs(7)));
        assert_eq!(
            retry_after(&headers("Wed, 21 Oct 2015 07:28:00 GMT")),
            Some(Duration::ZERO)
        );
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(3600));
        let wait = retry_after(&headers(&later)).unwrap();
        assert!(wait > Duration::from_secs(3500) && wait <= Duration::from_secs(3600));
        assert_eq!(retry_after(&headers("soon")), None);
        assert_eq!(retry_after(&HeaderMap::new()), None);
    }

    #[test]
    fn backoff_grows_is_capped_and_retry_after_wins_up_to_its_cap() {
        let retry = Retry {
            max_retry_after: Duration::from_secs(10),
            ..Retry::default()
        };
        for number in 1..10 {
            let bound = Duration::from_millis(500)
                .saturating_mul(2u32.pow(number - 1))
                .min(Duration::from_secs(8));
            assert!(retry.delay(number, None) <= bound);
        }
        assert_eq!(
            retry.delay(1, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(
            retry.delay(1, Some(Duration::from_secs(3600))),
            Duration::from_secs(10)
        );
    }

    #[test]
    fn only_429_and_5xx_are_retried() {
        assert!(retryable_status(429) && retryable_status(500) && retryable_status(503));
        assert!(!retryable_status(400) && !retryable_status(401) && !retryable_status(404));
    }
}
