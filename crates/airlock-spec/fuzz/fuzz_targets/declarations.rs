//! Fuzzes the declaration loader end to end: the input is a small deployment directory, and
//! [`Deployment::load`] must answer with a model or a list of problems, never a panic, a stack
//! overflow or unbounded memory (run with `-rss_limit_mb`). Invariants checked as well:
//! - a refusal names at least one problem, each at line and column ≥ 1 of a file of the input;
//! - an accepted deployment builds its gateway scope and every agent's scope.
//!
//! Input format (seeds: `seed-corpus.sh`): sections, each a header line `==> <path>` followed
//! by the file's bytes, where `<path>` is `airlock.toml` or `<dir>/<name>.yml` with `<dir>` one
//! of `agents`, `connections`, `apis`. Other headers are ignored with their section, so the
//! fuzzer can only write inside the deployment directory.
#![no_main]

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use airlock_spec::Deployment;
use libfuzzer_sys::fuzz_target;

const HEADER: &[u8] = b"==> ";
const DIRS: [&str; 3] = ["agents", "connections", "apis"];
/// More files add nothing the loader does not already do per file.
const MAX_FILES: usize = 8;

/// One directory per process, emptied before every input.
fn root() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("airlock-fuzz-decl-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("fuzz directory");
        dir
    })
}

/// The relative path a header names, when it is one the loader reads.
fn allowed_path(header: &[u8]) -> Option<PathBuf> {
    let name = std::str::from_utf8(header).ok()?.trim_end_matches('\r');
    if name == "airlock.toml" {
        return Some(PathBuf::from(name));
    }
    let (dir, file) = name.split_once('/')?;
    let stem = file.strip_suffix(".yml")?;
    let plain = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    let ok = DIRS.contains(&dir) && !stem.is_empty() && stem.len() <= 64 && stem.chars().all(plain);
    ok.then(|| PathBuf::from(name))
}

/// Splits the input into (path, contents) sections.
fn sections(data: &[u8]) -> Vec<(PathBuf, &[u8])> {
    let mut out = Vec::new();
    let mut rest = data;
    while let Some(after) = rest.strip_prefix(HEADER) {
        let line_end = after
            .iter()
            .position(|&b| b == b'\n')
            .unwrap_or(after.len());
        let body = &after[(line_end + 1).min(after.len())..];
        let body_end = find(body, b"\n==> ").map_or(body.len(), |i| i + 1);
        if let Some(path) = allowed_path(&after[..line_end]) {
            out.push((path, &body[..body_end]));
        }
        rest = &body[body_end..];
    }
    if out.is_empty() && !data.starts_with(HEADER) {
        // Raw bytes: try them as every kind of file, so unstructured mutations still reach
        // both parsers.
        out.push((PathBuf::from("airlock.toml"), data));
        out.push((PathBuf::from("agents/fuzz.yml"), data));
    }
    out.truncate(MAX_FILES);
    out
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn write_directory(root: &Path, files: &[(PathBuf, &[u8])]) {
    for dir in DIRS {
        let _ = fs::remove_dir_all(root.join(dir));
        fs::create_dir_all(root.join(dir)).expect("fuzz subdirectory");
    }
    let _ = fs::remove_file(root.join("airlock.toml"));
    for (path, contents) in files {
        fs::write(root.join(path), contents).expect("fuzz file");
    }
}

fuzz_target!(|data: &[u8]| {
    let files = sections(data);
    let root = root();
    write_directory(root, &files);
    match Deployment::load(root) {
        Ok(deployment) => {
            let _ = deployment.gateway_scope();
            for name in deployment.agents.keys() {
                assert!(deployment.agent_scope(name).is_some(), "agent {name}");
            }
        }
        Err(errors) => {
            assert!(!errors.0.is_empty(), "a refusal without a problem");
            let _ = errors.to_string();
            for issue in &errors.0 {
                assert!(issue.line >= 1 && issue.column >= 1, "{issue:?}");
                assert!(issue.file.is_relative(), "{issue:?}");
            }
        }
    }
});
