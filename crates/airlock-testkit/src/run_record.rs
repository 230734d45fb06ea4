//! The run's record of skipped tests, read by the summary that `cargo test --workspace` ends with
//! (`crates/airlock-testkit/tests/skipped.rs`, docs/testing.md).
//!
//! Each test binary appends one line per [`skip`](crate::skip) to `<its pid>.tsv` in a directory
//! for this run under the build's profile directory (`target/debug/airlock-skipped/<run>/`).
//! Why a run is named by its `cargo test` process: cargo starts every test binary of one
//! `cargo test` itself, one after another, so their parent process is the one thing they all
//! share and no earlier run shares. `<run>` is that process's pid and start time (a pid alone
//! can come back for a later process). So a summary counts this run's skips only, whatever an
//! earlier run left; and no step has to clear records first, which no test binary could do
//! reliably (none is sure to run first: `cargo test -p`, a filter, or a failure changes which
//! binaries run). The summary removes this run's records once read, and any earlier run's whose
//! process is gone. Linux only, as it reads `/proc`, like the rest of the test tooling.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write as _;
use std::path::PathBuf;

use crate::needs::Needs;

/// The records' directory under the profile directory.
const DIR: &str = "airlock-skipped";

/// One group of tests skipped in this run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// What the tests needed.
    pub needs: Needs,
    /// How many tests skipped for it.
    pub tests: usize,
}

/// This run's skipped groups, in [`Needs::ALL`]'s order, with how many tests each: the records
/// of this `cargo test` process's test binaries. Removes them once read, and the records of
/// earlier runs whose process is gone.
///
/// # Errors
/// When the run cannot be named (no `/proc`) or a record cannot be read or parsed: the summary
/// would be wrong, so it says so instead.
pub fn skipped_this_run() -> Result<Vec<Skipped>, String> {
    let root = root().ok_or("no profile directory above this test binary")?;
    let key = run_key().ok_or("cannot name this run: no /proc/<parent pid>/stat")?;
    let run = root.join(&key);
    // One test can skip more than once (a helper called twice): count each test once.
    let mut tests = BTreeSet::new();
    match fs::read_dir(&run) {
        Ok(entries) => {
            for entry in entries {
                let path = entry.map_err(|e| format!("{}: {e}", run.display()))?.path();
                let text =
                    fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                for line in text.lines() {
                    let (group, test) = line.split_once('\t').unwrap_or((line, "?"));
                    let needs = Needs::from_key(group)
                        .ok_or_else(|| format!("{}: unknown group {group:?}", path.display()))?;
                    tests.insert((needs, path.clone(), test.to_owned()));
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("{}: {e}", run.display())),
    }
    let mut counts = BTreeMap::new();
    for (needs, _, _) in &tests {
        *counts.entry(*needs).or_insert(0) += 1;
    }
    remove_finished_runs(&root, &key);
    Ok(Needs::ALL
        .into_iter()
        .filter_map(|needs| counts.get(&needs).map(|&tests| Skipped { needs, tests }))
        .collect())
}

/// Appends a record of the calling test's skip for `needs`; says on standard error when it
/// cannot, as the summary will then be short.
pub(crate) fn write(needs: Needs) {
    let Some(dir) = root().zip(run_key()).map(|(root, key)| root.join(key)) else {
        return;
    };
    // libtest runs each test on a thread named after it.
    let test = std::thread::current()
        .name()
        .unwrap_or("?")
        .replace(['\t', '\n'], " ");
    let line = format!("{}\t{test}\n", needs.key());
    let file = dir.join(format!("{}.tsv", std::process::id()));
    let written = fs::create_dir_all(&dir).and_then(|()| {
        fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&file)?
            .write_all(line.as_bytes())
    });
    if let Err(e) = written {
        let line = format!("could not record a skip in {}: {e}\n", file.display());
        let _ = std::io::stderr().write_all(line.as_bytes());
    }
}

/// `target/<profile>/airlock-skipped`: test binaries live in `target/<profile>/deps`.
fn root() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.join(DIR))
}

/// This run's name: the parent process's pid and start time.
fn run_key() -> Option<String> {
    #[cfg(unix)]
    {
        let parent = std::os::unix::process::parent_id();
        Some(format!("{parent}-{}", start_time(parent)?))
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// A process's start time (field 22 of `/proc/PID/stat`, in clock ticks after boot), or `None`
/// when it is gone.
fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after its end.
    let fields = &stat[stat.rfind(')')? + 1..];
    fields.split_whitespace().nth(19)?.parse().ok()
}

/// Removes this run's records and those of every earlier run whose process is gone (a run still
/// going, such as a `cargo test` in another terminal, keeps its records).
fn remove_finished_runs(root: &std::path::Path, this: &str) {
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let alive = name != this
            && name.split_once('-').is_some_and(|(pid, start)| {
                pid.parse()
                    .ok()
                    .and_then(start_time)
                    .is_some_and(|now| now.to_string() == start)
            });
        if !alive {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_group_is_read_back_from_its_key() {
        for needs in Needs::ALL {
            assert_eq!(Needs::from_key(needs.key()), Some(needs));
        }
        assert_eq!(Needs::from_key("no-such-group"), None);
    }

    #[test]
    fn a_live_process_has_a_start_time_and_a_gone_one_none() {
        assert!(start_time(std::process::id()).is_some());
        assert!(start_time(u32::MAX).is_none());
    }

    #[cfg(unix)]
    #[test]
    fn a_run_is_named_by_the_process_that_started_this_binary() {
        let parent = std::os::unix::process::parent_id();
        let key = run_key().unwrap();
        assert_eq!(key, format!("{parent}-{}", start_time(parent).unwrap()));
        assert_eq!(
            run_key().unwrap(),
            key,
            "the same for every skip of the run"
        );
    }

    /// This run's records and a finished run's go; a run still going keeps its records.
    #[test]
    fn only_records_of_runs_still_going_are_kept() {
        let root =
            std::env::temp_dir().join(format!("airlock-skipped-test-{}", std::process::id()));
        let me = std::process::id();
        let alive = format!("{me}-{}", start_time(me).unwrap());
        let restarted = format!("{me}-{}", start_time(me).unwrap() + 1);
        let gone = format!("{}-1", u32::MAX);
        let this = "1-1".to_owned();
        for run in [&alive, &restarted, &gone, &this] {
            fs::create_dir_all(root.join(run)).unwrap();
        }
        remove_finished_runs(&root, &this);
        let mut left: Vec<String> = fs::read_dir(&root)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        fs::remove_dir_all(&root).unwrap();
        assert_eq!(left, vec![alive]);
    }
}
