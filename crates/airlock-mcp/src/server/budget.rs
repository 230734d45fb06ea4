//! The body budget (docs/rules.md OPS-54): the request bodies the endpoint processes at once add
//! up to at most [`BODY_BUDGET_BYTES`], so the memory large calls take is bounded however many
//! arrive together.
//!
//! Guarantees: an authorized request whose declared body is over [`SMALL_BODY_BYTES`] (or that
//! declares no length) takes its share of the budget before a byte of its body is read, and
//! holds it until its answer is built; while the budget is spent, the next one waits, first come
//! first served, its body left unread in the socket (the client's send window, not this
//! process's memory). It waits at most [`MAX_WAIT`]: then `admit` reads its body to the end
//! without keeping it and answers `503` with `Retry-After`, so the client gets an answer rather
//! than a connection its own send timeout cut. A body of at most [`SMALL_BODY_BYTES`] never
//! waits: ordinary calls are not queued behind large ones. A share is never more than the
//! endpoint's body cap, so one request can always pass on its own.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, header};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The request bodies processed at once: eight bodies at the cap. Each byte of a body costs
/// a few more while its call runs (the parsed arguments, the ledger row, the upstream request;
/// docs/benchmarks.md "The memory bench"), which this bounds with it.
/// The largest request body read; bigger is a 413. Tool arguments are small, and this caps the
/// memory one request can pin before it is authenticated.
pub(super) const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
pub(super) const BODY_BUDGET_BYTES: usize = 8 * MAX_BODY_BYTES;

/// Bodies up to this size are not counted: a tool call's arguments are usually far smaller.
pub(super) const SMALL_BODY_BYTES: usize = 64 * 1024;

/// The longest a request waits for its share. Clients give up on a send that makes no progress
/// (reqwest's default TCP user timeout is 30 s); this answers them before that.
pub(super) const MAX_WAIT: Duration = Duration::from_secs(20);

/// The shared budget of one endpoint.
#[derive(Clone)]
pub(super) struct BodyBudget {
    bytes: Arc<Semaphore>,
    max_wait: Duration,
}

/// A request's share of the budget, given back when dropped.
#[must_use = "the share is given back when dropped"]
pub(super) struct BodyShare {
    _permit: Option<OwnedSemaphorePermit>,
}

impl BodyBudget {
    /// `bytes` of bodies at once, each request waiting at most `max_wait` ([`MAX_WAIT`]).
    pub(super) fn new(bytes: usize, max_wait: Duration) -> Self {
        Self {
            bytes: Arc::new(Semaphore::new(bytes.min(Semaphore::MAX_PERMITS))),
            max_wait,
        }
    }

    /// The share of a request with these headers, waiting at most `max_wait` for it; `None`
    /// when it did not come in time.
    pub(super) async fn share_within(&self, headers: &HeaderMap) -> Option<BodyShare> {
        tokio::time::timeout(self.max_wait, self.share(headers))
            .await
            .ok()
    }

    /// Waits for the share of a request with these headers: its declared length, or the body
    /// cap when it declares none; nothing for a small body.
    async fn share(&self, headers: &HeaderMap) -> BodyShare {
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        if declared.is_some_and(|n| n <= SMALL_BODY_BYTES) {
            return BodyShare { _permit: None };
        }
        let bytes = declared.unwrap_or(MAX_BODY_BYTES).min(MAX_BODY_BYTES);
        let bytes = u32::try_from(bytes).unwrap_or(u32::MAX);
        // The semaphore is never closed, so acquiring only fails if it were; then nothing waits.
        BodyShare {
            _permit: self.bytes.clone().acquire_many_owned(bytes).await.ok(),
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt as _;

    use super::*;

    fn length(n: usize) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_LENGTH, n.into());
        headers
    }

    /// OPS-54: with the budget spent, a large body waits until a share is given back; a small
    /// one passes at once.
    #[tokio::test]
    async fn a_large_body_waits_for_the_budget_and_a_small_one_does_not() {
        let budget = BodyBudget::new(2 * MAX_BODY_BYTES, MAX_WAIT);
        let first = budget
            .share(&length(MAX_BODY_BYTES))
            .now_or_never()
            .unwrap();
        let second = budget.share(&length(3_000_000)).now_or_never().unwrap();
        let big = length(3_000_000);
        let mut third = Box::pin(budget.share(&big));
        assert!((&mut third).now_or_never().is_none(), "the budget is spent");
        assert!(budget.share(&length(1_000)).now_or_never().is_some());
        drop(second);
        assert!((&mut third).now_or_never().is_some(), "a share came back");
        drop(first);
    }

    /// OPS-54: a request does not wait for its share longer than the budget's bound.
    #[tokio::test]
    async fn the_wait_for_a_share_is_bounded() {
        let wait = Duration::from_millis(20);
        let budget = BodyBudget::new(MAX_BODY_BYTES, wait);
        let held = budget.share(&length(MAX_BODY_BYTES)).await;
        let started = tokio::time::Instant::now();
        assert!(budget.share_within(&length(MAX_BODY_BYTES)).await.is_none());
        assert!(started.elapsed() >= wait);
        drop(held);
        assert!(budget.share_within(&length(MAX_BODY_BYTES)).await.is_some());
    }

    /// OPS-54: a body of unknown length counts as the cap, and a share never exceeds it, so a
    /// request declaring more than the cap (refused 413 later) cannot wait forever.
    #[tokio::test]
    async fn a_share_is_at_most_the_body_cap() {
        let budget = BodyBudget::new(MAX_BODY_BYTES, MAX_WAIT);
        let unknown = budget.share(&HeaderMap::new()).now_or_never().unwrap();
        assert!(budget.share(&length(100_000)).now_or_never().is_none());
        drop(unknown);
        let oversized = budget.share(&length(usize::MAX)).now_or_never();
        assert!(oversized.is_some());
    }
}
