//! The process's memory: the allocator, and freed memory given back to the kernel once the
//! process goes quiet (docs/rules.md OPS-61, OPS-62).
//!
//! Guarantees: after requests were served, the first full [`QUIET`] period in which none was
//! answered ends with one forced collection of the allocator, which returns the pages freed
//! calls left behind; under steady traffic, or with nothing served since the last collection,
//! nothing is collected, so a busy process never re-faults pages it is about to reuse. Each
//! runtime worker thread collects its own heap once per such quiet period, at its first park
//! after it (the workers are woken for it), because mimalloc frees a thread's pages only on
//! that thread.

use std::cell::Cell;
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

/// Quiet periods that ended in a collection: the epoch each worker's own collection catches up
/// with.
static QUIET_PERIODS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The quiet period this thread last collected its own heap for.
    static COLLECTED_FOR: Cell<u64> = const { Cell::new(0) };
}

/// Counts one answered request (or one dropped before its answer).
pub fn answered() {
    ANSWERED.fetch_add(1, Ordering::Relaxed);
}

/// Watches the answered count every [`QUIET`] and, once per quiet period that follows activity,
/// calls `collect` on a blocking thread and has every runtime worker collect its own heap
/// (with [`worker_parks`] installed as the runtime's `on_thread_park`). Runs until dropped.
pub async fn give_back_when_quiet(collect: impl Fn() + Send + Sync + Clone + 'static) {
    watch(&ANSWERED, &QUIET_PERIODS, collect).await;
}

/// The runtime's `on_thread_park` hook: a worker about to park collects its own heap if a quiet
/// period ended since it last did. On the way to every park, so it costs one atomic load and
/// one thread-local read when there is nothing to do.
pub fn worker_parks() {
    collect_if_behind(&QUIET_PERIODS, collect_thread_heap);
}

async fn watch(
    answered: &AtomicU64,
    periods: &'static AtomicU64,
    collect: impl Fn() + Send + Sync + Clone + 'static,
) {
    let mut ticks = tokio::time::interval(QUIET);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut quiet = Quiet::new(answered.load(Ordering::Relaxed));
    loop {
        ticks.tick().await;
        if quiet.collect_now(answered.load(Ordering::Relaxed)) {
            periods.fetch_add(1, Ordering::Relaxed);
            let (collect, runtime) = (collect.clone(), tokio::runtime::Handle::current());
            // Collecting walks the heap and returns pages with system calls: off the workers.
            drop(
                tokio::task::spawn_blocking(move || {
                    collect();
                    wake_workers(&runtime);
                })
                .await,
            );
        }
    }
}

/// Wakes the runtime's parked workers so that each parks again, and so collects, now rather
/// than at the next request: a task spawned from outside the workers wakes a parked one, which
/// on finding it wakes the next.
fn wake_workers(runtime: &tokio::runtime::Handle) {
    for _ in 0..runtime.metrics().num_workers() {
        drop(runtime.spawn(async {}));
    }
}

/// Runs `collect` on this thread if `periods` moved since this thread last did.
fn collect_if_behind(periods: &AtomicU64, collect: impl FnOnce()) {
    let period = periods.load(Ordering::Relaxed);
    if COLLECTED_FOR.with(|done| done.replace(period)) != period {
        collect();
    }
}

/// Forces mimalloc to collect the calling thread's heap and purge every freed page of the
/// process now, not at its next purge; then glibc's malloc, which SQLite allocates from, gives
/// back its free pages too (once a period, on the blocking thread: it walks every arena).
#[allow(unsafe_code)]
pub fn collect_allocator() {
    collect_thread_heap();
    // SAFETY: `malloc_trim` takes no pointers and only walks glibc's own arenas under their
    // locks.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        malloc_trim(0);
    }
}

/// mimalloc's collection of the calling thread's heap, with a forced purge of the freed pages.
#[allow(unsafe_code)]
fn collect_thread_heap() {
    // SAFETY: `mi_collect` takes no pointers and may be called from any thread at any time.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
unsafe extern "C" {
    /// glibc: returns the free memory of every malloc arena to the kernel (`0`: keep no pad).
    fn malloc_trim(pad: usize) -> std::ffi::c_int;
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
    use std::collections::HashMap;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;
    use std::sync::mpsc;
    use std::thread::ThreadId;

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

    /// OPS-61, OPS-62: the watcher collects on the clock once per quiet period, and counts the
    /// period for the workers.
    #[tokio::test(start_paused = true)]
    async fn the_watcher_collects_after_a_quiet_period() {
        static SERVED: AtomicU64 = AtomicU64::new(0);
        static PERIODS: AtomicU64 = AtomicU64::new(0);
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let watcher = tokio::spawn(watch(&SERVED, &PERIODS, move || {
            counted.fetch_add(1, Ordering::SeqCst);
        }));
        tokio::time::sleep(QUIET * 3).await;
        assert_eq!(calls.load(Ordering::SeqCst), 0, "nothing answered yet");
        assert_eq!(PERIODS.load(Ordering::SeqCst), 0);
        SERVED.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(QUIET * 3).await;
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(PERIODS.load(Ordering::SeqCst), 1);
        tokio::time::sleep(QUIET * 3).await;
        assert_eq!(calls.load(Ordering::SeqCst), 1, "once per quiet period");
        assert_eq!(PERIODS.load(Ordering::SeqCst), 1);
        watcher.abort();
    }

    /// OPS-62: a thread collects once for each quiet period it has not collected for, and not
    /// before the first.
    #[test]
    fn a_thread_collects_once_per_quiet_period() {
        let periods = AtomicU64::new(0);
        let collected = Cell::new(0);
        let park = || collect_if_behind(&periods, || collected.set(collected.get() + 1));
        park();
        assert_eq!(collected.get(), 0, "no quiet period yet");
        periods.fetch_add(1, Ordering::Relaxed);
        park();
        park();
        assert_eq!(collected.get(), 1, "once for the period");
        periods.fetch_add(2, Ordering::Relaxed);
        park();
        park();
        assert_eq!(
            collected.get(),
            2,
            "periods missed while busy need one collection"
        );
    }

    /// OPS-62: after a quiet period every worker of an idle runtime is woken and collects its
    /// own heap, once.
    #[test]
    fn every_idle_worker_collects_once_after_a_quiet_period() {
        static PERIODS: AtomicU64 = AtomicU64::new(0);
        const WORKERS: usize = 2;
        let (tx, rx) = mpsc::channel::<ThreadId>();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKERS)
            .on_thread_park(move || {
                collect_if_behind(&PERIODS, || {
                    let _ = tx.send(std::thread::current().id());
                });
            })
            .build()
            .unwrap();
        // Every worker has started and parked idle before the period ends.
        runtime.block_on(async {
            let started = (0..WORKERS).map(|_| tokio::spawn(async {}));
            for task in started.collect::<Vec<_>>() {
                task.await.unwrap();
            }
        });
        PERIODS.fetch_add(1, Ordering::Relaxed);
        wake_workers(runtime.handle());
        let mut by_thread: HashMap<ThreadId, usize> = HashMap::new();
        while by_thread.len() < WORKERS {
            let worker = rx
                .recv_timeout(Duration::from_secs(10))
                .expect("every worker collects");
            *by_thread.entry(worker).or_default() += 1;
        }
        wake_workers(runtime.handle());
        runtime.block_on(async {});
        assert!(
            rx.try_recv().is_err(),
            "one collection per worker and period"
        );
        assert!(by_thread.values().all(|&n| n == 1), "{by_thread:?}");
    }
}
