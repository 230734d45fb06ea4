//! Diagnostics: every problem of a load, each with file, line:column, key path and reason.
//!
//! Validation never stops at the first problem: each step pushes onto one [`Diag`] and the
//! load fails at the end with all of them, sorted by file and position. A warning has the same
//! shape but never fails the load: it names a key that is accepted and not read.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::refs::{Reference, Referenced};
use crate::tree::Pos;

/// One problem in one declaration file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SpecIssue {
    /// The file, relative to the deployment directory when it is inside it.
    pub file: PathBuf,
    /// 1-based line of the offending key (or value, when there is no key).
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// Key path, e.g. `spec.tools[2].operations[0].request.path`; empty for the whole file.
    pub key: String,
    /// What is wrong and, where it helps, what to write instead.
    pub reason: String,
}

impl fmt::Display for SpecIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file.display(), self.line, self.column)?;
        if !self.key.is_empty() {
            write!(f, "{}: ", self.key)?;
        }
        f.write_str(&self.reason)
    }
}

/// Every problem found by one load. Never empty.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct SpecErrors(pub Vec<SpecIssue>);

impl fmt::Display for SpecErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        writeln!(
            f,
            "{n} problem{} in declarations:",
            if n == 1 { "" } else { "s" }
        )?;
        for issue in &self.0 {
            writeln!(f, "  {issue}")?;
        }
        Ok(())
    }
}

/// Collects the problems and warnings of one file while it is validated.
pub(crate) struct Diag {
    file: PathBuf,
    issues: Vec<SpecIssue>,
    warnings: Vec<SpecIssue>,
    references: Vec<Reference>,
}

impl Diag {
    pub(crate) fn new(file: &Path) -> Self {
        Self {
            file: file.to_path_buf(),
            issues: Vec::new(),
            warnings: Vec::new(),
            references: Vec::new(),
        }
    }

    /// Records a problem at `at` for `key`.
    pub(crate) fn push(&mut self, at: Pos, key: &str, reason: impl Into<String>) {
        let issue = self.issue(at, key, reason.into());
        self.issues.push(issue);
    }

    /// Records a warning at `at` for `key`; the load still succeeds.
    pub(crate) fn warn(&mut self, at: Pos, key: &str, reason: impl Into<String>) {
        let issue = self.issue(at, key, reason.into());
        self.warnings.push(issue);
    }

    fn issue(&self, at: Pos, key: &str, reason: String) -> SpecIssue {
        SpecIssue {
            file: self.file.clone(),
            line: at.line,
            column: at.column,
            key: key.to_owned(),
            reason,
        }
    }

    /// Moves this file's warnings onto `warnings`.
    pub(crate) fn drain_warnings(&mut self, warnings: &mut Vec<SpecIssue>) {
        warnings.append(&mut self.warnings);
    }

    /// Records a credential path or URL at `at` for `key`, for the offline checks after load.
    pub(crate) fn refer(&mut self, at: Pos, key: &str, target: Referenced) {
        self.references.push(Reference {
            file: self.file.clone(),
            line: at.line,
            column: at.column,
            key: key.to_owned(),
            target,
        });
    }

    /// Moves this file's references onto `references`.
    pub(crate) fn drain_references(&mut self, references: &mut Vec<Reference>) {
        references.append(&mut self.references);
    }

    /// A scratch diagnostic for the same file, whose problems [`Diag::demote`] turns into
    /// warnings: how a mis-declared integration reference warns and skips (DECL-46).
    pub(crate) fn scratch(&self) -> Self {
        Self::new(&self.file)
    }

    /// Records every problem of `scratch` as a warning, each ending with `consequence`.
    pub(crate) fn demote(&mut self, scratch: Self, consequence: &str) {
        let demoted = scratch.issues.into_iter().map(|mut issue| {
            issue.reason = format!("{}; {consequence}", issue.reason);
            issue
        });
        self.warnings.extend(demoted);
        self.warnings.extend(scratch.warnings);
    }

    pub(crate) fn is_clean(&self) -> bool {
        self.issues.is_empty()
    }

    pub(crate) fn file(&self) -> &Path {
        &self.file
    }

    pub(crate) fn into_issues(self) -> Vec<SpecIssue> {
        self.issues
    }
}

/// Joins a key path and a child key: `spec` + `tools` → `spec.tools`.
pub(crate) fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}
