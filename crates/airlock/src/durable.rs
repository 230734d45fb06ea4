//! Putting a file written under a temporary name in place durably (docs/rules.md OPS-74,
//! OPS-76): the file is synced before it gets its name and the directory after, so a power cut
//! leaves either what the name held before or the whole new file, never a torn one under the
//! name.

use std::path::Path;

use anyhow::Context as _;
use tempfile::NamedTempFile;

/// Whether [`put_in_place`] may replace a file already at the destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Replace {
    /// Fail if the destination exists (a backup never overwrites one).
    Never,
    /// Replace it whole (a reader sees the old file or the new one).
    Whole,
}

/// Syncs `file`, names it `dest` (in the same directory), and syncs that directory.
pub(crate) fn put_in_place(
    file: NamedTempFile,
    dest: &Path,
    replace: Replace,
) -> anyhow::Result<()> {
    file.as_file()
        .sync_all()
        .with_context(|| format!("writing {}", file.path().display()))?;
    let named = match replace {
        Replace::Never => file.persist_noclobber(dest),
        Replace::Whole => file.persist(dest),
    };
    named
        .map_err(|e| e.error)
        .with_context(|| format!("naming {}", dest.display()))?;
    let dir = parent(dest);
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing {}", dir.display()))
}

/// The directory `path` is in (`.` for a bare file name).
pub(crate) fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}
