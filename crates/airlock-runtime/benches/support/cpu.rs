//! The process's CPU time, for the benches that report what a feature adds to a call.

use std::time::Duration;

/// The process's CPU time (Linux), in nanoseconds: the sum over its threads of the time each
/// spent running (`/proc/self/task/*/schedstat`), which `/proc/self/stat`'s 10 ms ticks are too
/// coarse for. The bench's threads (the runtime, SQLite's) live through every round.
pub(crate) fn cpu() -> Duration {
    let mut total = 0u64;
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let path = task.unwrap().path().join("schedstat");
        if let Ok(stat) = std::fs::read_to_string(path) {
            total += stat
                .split_whitespace()
                .next()
                .unwrap()
                .parse::<u64>()
                .unwrap();
        }
    }
    Duration::from_nanos(total)
}
