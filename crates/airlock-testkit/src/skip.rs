//! Tests that need something beyond Rust and a C compiler (PostgreSQL, Node, Python, Chromium)
//! skip on a bare machine and fail under `CI`, where `.ci/run` installs everything — so CI can
//! never pass by skipping (docs/rules.md TEST-6).
//!
//! Guarantees: a skip is said on standard error, written to the stream itself rather than through
//! `eprintln!`, which the test harness captures and hides for a passing test: it is seen in a
//! plain `cargo test` run, once per test binary and group, with the command that enables it.
//! Every skip is also recorded for this run ([`crate::skipped_this_run`]), so `cargo test
//! --workspace` can end with one summary of what it skipped (docs/testing.md).

use std::collections::BTreeSet;
use std::io::Write as _;
use std::sync::{Mutex, PoisonError};

use crate::needs::Needs;

/// Groups already reported by this test binary.
static SAID: Mutex<BTreeSet<Needs>> = Mutex::new(BTreeSet::new());

/// Skips the calling test, or — under `CI` — fails it: what `needs` names is missing. Call it
/// once per skipped test, then return: the summary counts the tests that called it.
///
/// # Panics
/// When `CI` is set.
pub fn skip(needs: Needs) {
    // Recorded before the CI check, so that under CI the summary fails too and lists every
    // missing group in one place at the end of the run.
    crate::run_record::write(needs);
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set and {} is missing: run `{}`",
        needs.what(),
        needs.enable()
    );
    let first = SAID
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(needs);
    if first {
        let line = format!(
            "skipped (here and in this binary's other tests): {} is missing; run `{}`\n",
            needs.what(),
            needs.enable()
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
            skip(Needs::Postgres);
            None
        }
    }
}
