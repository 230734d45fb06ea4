//! The process's memory: the allocator, and freed memory given back to the kernel once the
//! process goes quiet (docs/rules.md OPS-61).
//!
//! Guarantees: after requests were served, the first full [`QUIET`] period in which none was
//! answered ends with one forced collection of the allocator, which returns the pages freed
//! calls left behind; under steady traffic, or with nothing served since the last collection,
//! nothing is collected, so a busy process never re-faults pages it is about to reuse.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// mimalloc instead of the system allocator for everything linked with this crate (the binary,
/// its tests and benches). A request allocates and frees many small buffers on several threads;
/// glibc's malloc spent 12–13 % of the MCP endpoint benchmark's CPU in allocation and, by
/// returning memory to the kernel and faulting it back, 6 % more in clearing fresh pages.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// How long no request may be answered before freed memory is returned. mimalloc itself purges
/// freed pages only from within later allocations, so a process that goes idle after a burst of
/// large calls would otherwise keep them resident for ever.
pub const QUIET: Duration = Duration::from_millis(500);

/// Requests answered since the process started.
static ANSWERED: AtomicU64 = AtomicU64::new(0);

/// Counts one answered request (or one dropped before its answer).
pub fn answered() {
    ANSWERED.fetch_add(1, Ordering::Relaxed);
}

/// Watches the answered count every [`QUIET`] and calls `collect` once per quiet period that
/// follows activity. Runs until dropped.
pub async fn give_back_when_quiet(collect: impl Fn() + Send + Sync + Clone + 'static) {
    watch(&ANSWERED, collect).await;
}

async fn watch(answered: &AtomicU64, collect: impl Fn() + Send + Sync + Clone + 'static) {
    let mut ticks = tokio::time::interval(QUIET);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut quiet = Quiet::new(answered.load(Ordering::Relaxed));
    loop {
        ticks.tick().await;
        if quiet.collect_now(answered.load(Ordering::Relaxed)) {
            let collect = collect.clone();
            // Collecting walks the heap and returns pages with system calls: off the workers.
            drop(tokio::task::spawn_blocking(collect).await);
        }
    }
}

/// Forces mimalloc to collect: freed pages go back to the kernel now, not at its next purge.
#[allow(unsafe_code)]
pub fn collect_allocator() {
    // SAFETY: `mi_collect` takes no pointers and may be called from any thread at any time.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

/// The decision rule, apart from the clock and the counter.
#[derive(Debug)]
struct Quiet {
    /// The count at the previous tick.
    last_tick: u64,
    /// The count at the last collection (or the start).
    last_collect: u64,
}

impl Quiet {
    fn new(now: u64) -> Self {
        Self {
            last_tick: now,
            last_collect: now,
        }
    }

    /// Whether to collect at a tick that reads `now`: nothing answered since the previous tick,
    /// something since the last collection.
    fn collect_now(&mut self, now: u64) -> bool {
        let quiet = now == self.last_tick;
        self.last_tick = now;
        if quiet && now != self.last_collect {
            self.last_collect = now;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// OPS-61: one collection after activity, none while traffic continues or nothing happened.
    #[test]
    fn collects_once_after_activity_when_a_period_passes_quietly() {
        let mut quiet = Quiet::new(0);
        assert!(!quiet.collect_now(0), "nothing was ever served");
        assert!(!quiet.collect_now(5), "still serving");
        assert!(!quiet.collect_now(9), "still serving");
        assert!(quiet.collect_now(9), "a quiet period after activity");
        assert!(!quiet.collect_now(9), "already collected");
        assert!(!quiet.collect_now(10), "serving again");
        assert!(quiet.collect_now(10));
    }

    /// OPS-61: the watcher calls the collection on the clock, once per quiet period.
    #[tokio::test(start_paused = true)]
    async fn the_watcher_collects_after_a_quiet_period() {
        static SERVED: AtomicU64 = AtomicU64::new(0);
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let watcher = tokio::spawn(watch(&SERVED, move || {
            counted.fetch_add(1, Ordering::SeqCst);
        }));
        tokio::time::sleep(QUIET * 3).await;
        assert_eq!(calls.load(Ordering::SeqCst), 0, "nothing answered yet");
        SERVED.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(QUIET * 3).await;
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        tokio::time::sleep(QUIET * 3).await;
        assert_eq!(calls.load(Ordering::SeqCst), 1, "once per quiet period");
        watcher.abort();
    }
}
