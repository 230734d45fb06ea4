//! The summary `cargo test --workspace` ends with: the test groups this run skipped, how many
//! tests each, and what enables each (docs/testing.md).
//!
//! Why it is last: cargo runs test binaries package by package in name order, and
//! `airlock-testkit` sorts last; no crate runs doc tests (they would come after every binary).
//! Why it is seen: it is a plain program (`harness = false`), so no test harness captures its
//! output. It reads the records the run's test binaries left ([`skipped_this_run`]), not an
//! earlier run's. Under `CI`, where `.ci/run` installs everything, it fails when anything was
//! skipped, listing all of it in one place.

use std::fmt::Write as _;
use std::io::Write as _;
use std::process::ExitCode;

use airlock_testkit::skipped_this_run;

fn main() -> ExitCode {
    // A runner listing the tests of every binary (`--list`) finds none here, and no summary.
    if std::env::args().any(|arg| arg == "--list") {
        return ExitCode::SUCCESS;
    }
    let (text, code) = match skipped_this_run() {
        Err(e) => (
            format!("skip summary: cannot read this run's records: {e}\n"),
            ExitCode::FAILURE,
        ),
        Ok(groups) if groups.is_empty() => (
            "skip summary: no test was skipped in this run\n".to_owned(),
            ExitCode::SUCCESS,
        ),
        Ok(groups) => {
            let total: usize = groups.iter().map(|group| group.tests).sum();
            let ci = std::env::var_os("CI").is_some();
            let mut text = if ci {
                format!(
                    "skip summary: FAILED: CI is set, and {total} tests lacked what they need (under \
                     CI they fail instead of skipping); each group is enabled by the command after it:\n"
                )
            } else {
                format!(
                    "skip summary: {total} tests skipped in this run, as this machine lacks what \
                     they need; each group is enabled by the command after it (from the \
                     repository's root):\n"
                )
            };
            for group in &groups {
                let tests = if group.tests == 1 { "test" } else { "tests" };
                let _ = writeln!(
                    text,
                    "  {}: {} {tests}; enable: {}",
                    group.needs.what(),
                    group.tests,
                    group.needs.enable()
                );
            }
            let code = if ci {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            };
            (text, code)
        }
    };
    let _ = std::io::stderr().write_all(text.as_bytes());
    code
}
