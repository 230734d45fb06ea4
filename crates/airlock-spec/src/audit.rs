//! `[audit.export]` of `airlock.toml`: where `airlock audit export` appends the audit events,
//! and whether they carry what the calls were given and gave back (docs/rules.md DECL-90,
//! OPS-83 … OPS-85). Absent: the command needs `--to`, and no argument, result, answer or
//! reason is ever exported. Unknown keys are errors.

use std::path::{Path, PathBuf};

use crate::diag::Diag;
use crate::fields::Fields;
use crate::tree::Node;

/// `[audit.export]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditExport {
    /// `file`: the JSON-lines file events are appended to (relative to the deployment
    /// directory); `None`: `airlock audit export` needs `--to`.
    pub file: Option<PathBuf>,
    /// `include_arguments`: whether events carry arguments, results, answers, reasons and
    /// tool errors' messages (default `false`: they are the calls' content).
    pub include_arguments: bool,
}

/// Reads `[audit]` (its one table, `export`); the defaults when absent or invalid (errors in
/// `d`).
pub(crate) fn read_audit(node: Option<&Node>, root: &Path, d: &mut Diag) -> AuditExport {
    let Some(audit) = node.and_then(|n| Fields::open(n, "audit", &["export"], d)) else {
        return AuditExport::default();
    };
    let keys = ["file", "include_arguments"];
    let Some(f) = audit
        .get("export")
        .and_then(|n| Fields::open(n, "audit.export", &keys, d))
    else {
        return AuditExport::default();
    };
    let file = f.opt_str("file", d).map(|file| {
        if file.trim().is_empty() {
            d.push(f.key_at("file"), "audit.export.file", "must not be empty");
        }
        root.join(file)
    });
    let include_arguments = f
        .opt_bool("include_arguments", d)
        .ok()
        .flatten()
        .unwrap_or(false);
    AuditExport {
        file,
        include_arguments,
    }
}
