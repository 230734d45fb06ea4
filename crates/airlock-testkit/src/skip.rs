//! Tests that need something beyond Rust and a C compiler (PostgreSQL, Node, Python, Chromium)
//! skip on a bare machine and fail under `CI`, where `.ci/run` installs everything — so CI can
//! never pass by skipping (docs/rules.md TEST-6).
//!
//! Guarantees: a skip is said on standard error, written to the stream itself rather than through
//! `eprintln!`, which the test harness captures and hides for a passing test: it is seen in a
//! plain `cargo test` run, once per test binary and group, with the command that enables it.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::sync::{Mutex, PoisonError};

/// Groups already reported by this test binary.
static SAID: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Skips the calling test, or — under `CI` — fails it: `what` is missing, `enable` says how to
/// get it.
///
/// # Panics
/// When `CI` is set.
pub fn skip(what: &str, enable: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set and {what} is missing: {enable}"
    );
    let first = SAID
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(what.to_owned());
    if first {
        let line = format!(
            "skipped (here and in this binary's other tests): {what} is missing; {enable}\n"
        );
        let _ = std::io::stderr().write_all(line.as_bytes());
    }
}

/// The PostgreSQL server the tests use (`AIRLOCK_TEST_DATABASE_URL`), or `None` after
/// [`skip`]ping.
#[must_use]
pub fn postgres_url() -> Option<String> {
    match std::env::var("AIRLOCK_TEST_DATABASE_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            skip(
                "PostgreSQL (AIRLOCK_TEST_DATABASE_URL) for the PostgreSQL half of the tests",
                "run `bash .ci/postgres.sh` (it starts PostgreSQL and creates the test database) and \
                 export AIRLOCK_TEST_DATABASE_URL=postgres://airlock:airlock@127.0.0.1:5432/airlock_test",
            );
            None
        }
    }
}
