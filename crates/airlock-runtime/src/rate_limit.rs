//! Rate limits of `type: api` and `type: mcp` declarations (`rate_limit: {requests, per}`):
//! one token bucket per (scope, declaration, principal), shared by every tool the declaration
//! makes, so one caller cannot spend another's budget. A call over the limit is refused before
//! it runs, as `rate_limited` with a retry-after.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use airlock_spec::{RateLimit, ScopeId, ToolSource, ToolSpec};
use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

use crate::ToolError;

/// The buckets of every declaration that has a rate limit.
#[derive(Default)]
pub(crate) struct RateLimits {
    buckets: Mutex<HashMap<(ScopeId, String, String), Arc<DefaultDirectRateLimiter>>>,
}

impl RateLimits {
    /// `None` when `spec` may run now; otherwise the refusal.
    pub(crate) fn check(
        &self,
        scope: &ScopeId,
        spec: &ToolSpec,
        principal: Option<&str>,
    ) -> Option<ToolError> {
        let limit = spec.policy.rate_limit?;
        let key = (
            scope.clone(),
            declaration(spec),
            principal.unwrap_or_default().to_owned(),
        );
        let bucket = {
            let mut buckets = self
                .buckets
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            Arc::clone(
                buckets
                    .entry(key.clone())
                    .or_insert_with(|| Arc::new(RateLimiter::direct(quota(limit)))),
            )
        };
        let not_until = bucket.check().err()?;
        let wait = not_until.wait_time_from(DefaultClock::default().now());
        Some(ToolError::rate_limited(
            format!(
                "`{}` allows {} calls per {} s; try again in {} s",
                key.1,
                limit.requests,
                limit.per.as_secs(),
                wait.as_secs().max(1)
            ),
            Some(wait.max(Duration::from_secs(1))),
        ))
    }
}

/// The declaration a tool came from: its limit is shared by all its tools.
fn declaration(spec: &ToolSpec) -> String {
    match &spec.source {
        ToolSource::Api(op) => op.slug.clone(),
        ToolSource::McpInline(tool) => tool.slug.clone(),
        _ => spec.definition.name.to_string(),
    }
}

/// `requests` per `per`, as a bucket that refills evenly and holds at most `requests`.
pub(crate) fn quota(limit: RateLimit) -> Quota {
    let burst = NonZeroU32::new(limit.requests).unwrap_or(NonZeroU32::MIN);
    let period = limit
        .per
        .checked_div(limit.requests)
        .unwrap_or(limit.per)
        .max(Duration::from_nanos(1));
    Quota::with_period(period)
        .unwrap_or_else(|| Quota::per_second(burst))
        .allow_burst(burst)
}

#[cfg(test)]
mod tests {
    use governor::clock::FakeRelativeClock;

    use super::*;

    #[test]
    fn n_pass_then_refused_then_the_bucket_refills() {
        let clock = FakeRelativeClock::default();
        let limit = RateLimit {
            requests: 3,
            per: Duration::from_secs(60),
        };
        let bucket = RateLimiter::direct_with_clock(quota(limit), clock.clone());
        for _ in 0..3 {
            assert!(bucket.check().is_ok());
        }
        let refused = bucket.check().unwrap_err();
        assert_eq!(refused.wait_time_from(clock.now()), Duration::from_secs(20));
        clock.advance(Duration::from_secs(20));
        assert!(
            bucket.check().is_ok(),
            "one request refills every per/requests"
        );
        assert!(bucket.check().is_err());
    }
}
