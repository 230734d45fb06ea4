//! p50 and p99 of timed samples, the figures the benches print. Shared by the `inbox` and
//! `scale` benches (`#[path]`).

use std::time::Duration;

/// (p50, p99) of `samples` (nearest rank: of 50 samples or fewer, p99 is the slowest).
pub(crate) fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    (at(0.50), at(0.99))
}
