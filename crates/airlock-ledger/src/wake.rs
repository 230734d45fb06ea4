//! SQLite's cross-process wake-ups, the counterpart of PostgreSQL's `LISTEN`/`NOTIFY`: after
//! each commit a store sends its announcements (`notify::messages`: ids and markers) to every
//! listening store of the same database file, over Unix datagram sockets in the directory
//! `<database file>.wake`; a listening store feeds what it hears to its notifier, the path a
//! `NOTIFY` takes on PostgreSQL.
//!
//! Guarantees. Only a store opened with `StoreConfig::listen` (what `airlock serve` opens)
//! binds a socket, each its own, so every serving process hears every other process's commits
//! and a short-lived CLI process takes nothing from them. The directory is created owner-only
//! (0700) and each socket 0600: only the deployment's user can send. A message is a hint — a
//! sender with no listener, a full socket buffer or a dead listener costs the hint and nothing
//! else (a waiter re-reads its row at its deadline, a worker at its safety-net poll), and
//! sending never blocks a commit. A socket left by a crashed listener refuses messages; the
//! first sender or listener that meets the refusal removes its file.

use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::UnixDatagram as StdDatagram;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::UnixDatagram;

use crate::notify::Notifier;

/// Largest message read whole. Announcements stay under 8 KiB (200 ids and a marker); a bigger
/// datagram is read truncated and taken as "anything may have changed".
const MAX_MESSAGE: usize = 16 * 1024;

/// The socket directory of the database at `database`.
fn dir_of(database: &Path) -> PathBuf {
    let mut dir = database.as_os_str().to_owned();
    dir.push(".wake");
    PathBuf::from(dir)
}

/// Sends a store's announcements to the other listening stores of its database.
pub(crate) struct Announcer {
    dir: PathBuf,
    /// This store's own socket, if it listens: its own commits already woke its waiters.
    own: Option<PathBuf>,
    socket: Option<StdDatagram>,
}

impl Announcer {
    pub(crate) fn new(database: &Path, own: Option<PathBuf>) -> Self {
        let socket = StdDatagram::unbound().and_then(|s| s.set_nonblocking(true).map(|()| s));
        if let Err(error) = &socket {
            tracing::warn!(%error, "no wake socket: other processes' waiters wake at their deadline");
        }
        Self {
            dir: dir_of(database),
            own,
            socket: socket.ok(),
        }
    }

    /// Sends `messages` to every listening store but this one; never blocks, never fails.
    pub(crate) fn send(&self, messages: &[String]) {
        let Some(socket) = &self.socket else {
            return;
        };
        // No directory: no store of this database has ever listened.
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let listeners = entries.filter_map(|e| e.ok().map(|e| e.path()));
        for path in listeners.filter(|p| self.own.as_ref() != Some(p)) {
            for message in messages {
                match socket.send_to(message.as_bytes(), &path) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                        remove_stale(&path);
                        break;
                    }
                    // A full buffer (the listener is behind) or a file gone since the listing.
                    Err(error) => {
                        tracing::debug!(%error, path = %path.display(), "wake message not sent");
                        break;
                    }
                }
            }
        }
    }
}

/// A listening store's socket; its file goes away when the listener stops.
pub(crate) struct Bound {
    socket: UnixDatagram,
    path: PathBuf,
}

impl Bound {
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// Binds a fresh socket for the database at `database`, clearing sockets of dead listeners.
pub(crate) fn bind(database: &Path) -> io::Result<Bound> {
    let dir = dir_of(database);
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    clear_stale(&dir)?;
    let unique = uuid::Uuid::new_v4().simple().to_string();
    let path = dir.join(format!("{}-{}.sock", std::process::id(), &unique[..8]));
    let socket = UnixDatagram::bind(&path)?;
    let bound = Bound { socket, path };
    // Bound before restricted, so a sender may meet it open for an instant: it can only wake.
    std::fs::set_permissions(&bound.path, std::fs::Permissions::from_mode(0o600))?;
    Ok(bound)
}

/// Feeds what other processes announce into `notifier`, until the store goes away.
pub(crate) async fn listen(bound: Bound, notifier: Arc<Notifier>) {
    let _remove = RemoveOnDrop(bound.path.clone());
    let mut buf = vec![0; MAX_MESSAGE];
    loop {
        match bound.socket.recv(&mut buf).await {
            Ok(n) if n < buf.len() => match std::str::from_utf8(&buf[..n]) {
                Ok(message) => notifier.hear(message),
                Err(_) => notifier.notify_all(),
            },
            Ok(_) => notifier.notify_all(),
            Err(error) => {
                tracing::warn!(%error, "ledger wake socket failed; retrying");
                notifier.notify_all();
                // Back off before reading again (waiters are already woken to re-read).
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

/// Removes every socket in `dir` that nobody listens on any more.
fn clear_stale(dir: &Path) -> io::Result<()> {
    let probe = StdDatagram::unbound()?;
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if let Err(e) = probe.connect(&path)
            && e.kind() == io::ErrorKind::ConnectionRefused
        {
            remove_stale(&path);
        }
    }
    Ok(())
}

fn remove_stale(path: &Path) {
    if std::fs::remove_file(path).is_ok() {
        tracing::debug!(path = %path.display(), "removed the wake socket of a stopped process");
    }
}

struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
