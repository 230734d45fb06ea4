//! SQLite's cross-process wake-ups, the counterpart of PostgreSQL's `LISTEN`/`NOTIFY`: after
//! each commit a store sends its announcements (`wakeups::messages`: ids and markers) to every
//! listening store of the same database file, over Unix datagram sockets in the directory
//! `<database file>.wake`; a listening store feeds what it hears to its wakeups, the path a
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
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use tokio::net::UnixDatagram;

use crate::support::wakeups::Wakeups;

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
    /// The other listeners as last listed (only the announcer task sends, so the lock is
    /// never contended).
    listing: Mutex<Option<Listing>>,
}

/// The directory's sockets as listed when its modification time was `mtime`.
struct Listing {
    mtime: SystemTime,
    /// When the listing was read; see [`Listing::trusted`].
    read_at: SystemTime,
    peers: Vec<PathBuf>,
}

/// How long after a directory change a listing is read anew on every send: a file system
/// stamps modification times from a coarse clock (a few milliseconds), so a socket bound in
/// the same tick as the last change leaves the time unchanged.
const MTIME_TICK: Duration = Duration::from_millis(100);

impl Listing {
    /// Whether this listing still names every socket of a directory last changed at `mtime`
    /// (OPS-64): the directory has not changed since, and the listing was read more than a
    /// tick after that change.
    fn trusted(&self, mtime: SystemTime) -> bool {
        self.mtime == mtime
            && self
                .read_at
                .duration_since(mtime)
                .is_ok_and(|d| d > MTIME_TICK)
    }
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
            listing: Mutex::new(None),
        }
    }

    /// The other listening stores' sockets: the cached listing while the directory is
    /// unchanged (one `stat` per commit instead of reading the directory), else a new one.
    /// `None` if the directory does not exist: no store of this database has ever listened.
    fn peers(&self) -> Option<Vec<PathBuf>> {
        let mtime = std::fs::metadata(&self.dir).ok()?.modified().ok()?;
        let mut cached = self.listing.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(listing) = cached.as_ref().filter(|l| l.trusted(mtime)) {
            return Some(listing.peers.clone());
        }
        let read_at = SystemTime::now();
        let peers: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| self.own.as_ref() != Some(p))
            .collect();
        *cached = Some(Listing {
            mtime,
            read_at,
            peers: peers.clone(),
        });
        Some(peers)
    }

    /// Sends `messages` to every listening store but this one; never blocks, never fails.
    pub(crate) fn send(&self, messages: &[String]) {
        let Some(socket) = &self.socket else {
            return;
        };
        let Some(peers) = self.peers() else {
            return;
        };
        for path in &peers {
            for message in messages {
                match socket.send_to(message.as_bytes(), path) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                        remove_stale(path);
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

/// Feeds what other processes announce into `wakeups`, until the store goes away.
pub(crate) async fn listen(bound: Bound, wakeups: Arc<Wakeups>) {
    let _remove = RemoveOnDrop(bound.path.clone());
    let mut buf = vec![0; MAX_MESSAGE];
    loop {
        match bound.socket.recv(&mut buf).await {
            Ok(n) if n < buf.len() => match std::str::from_utf8(&buf[..n]) {
                Ok(message) => wakeups.hear(message),
                Err(_) => wakeups.notify_all(),
            },
            Ok(_) => wakeups.notify_all(),
            Err(error) => {
                tracing::warn!(%error, "ledger wake socket failed; retrying");
                wakeups.notify_all();
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

#[cfg(test)]
mod tests {
    use std::fs::{File, FileTimes};

    use super::*;

    fn set_mtime(dir: &Path, at: SystemTime) {
        let f = File::open(dir).unwrap();
        f.set_times(FileTimes::new().set_modified(at)).unwrap();
    }

    /// OPS-64: while the directory keeps its modification time the announcer sends from its
    /// listing without reading the directory; a change of that time makes it list anew.
    #[test]
    fn the_listing_is_kept_until_the_directory_changes() {
        let tmp = tempfile::tempdir().unwrap();
        let database = tmp.path().join("ledger.db");
        let dir = dir_of(&database);
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("a.sock"), "").unwrap();
        let past = SystemTime::now() - Duration::from_secs(10);
        set_mtime(&dir, past);
        let announcer = Announcer::new(&database, None);
        assert_eq!(announcer.peers().unwrap(), vec![dir.join("a.sock")]);
        // A file appears but the directory's time is put back: the listing is not read again.
        std::fs::write(dir.join("b.sock"), "").unwrap();
        set_mtime(&dir, past);
        assert_eq!(announcer.peers().unwrap(), vec![dir.join("a.sock")]);
        set_mtime(&dir, past + Duration::from_secs(1));
        let mut peers = announcer.peers().unwrap();
        peers.sort();
        assert_eq!(peers, vec![dir.join("a.sock"), dir.join("b.sock")]);
    }

    /// A listing read within a tick of the directory's last change may miss a socket bound in
    /// that tick, so it is not trusted; one read later is, until the time changes.
    #[test]
    fn a_listing_read_in_the_changes_tick_is_not_trusted() {
        let changed = SystemTime::now();
        let listing = |read_at| Listing {
            mtime: changed,
            read_at,
            peers: Vec::new(),
        };
        assert!(!listing(changed + MTIME_TICK / 2).trusted(changed));
        assert!(listing(changed + MTIME_TICK * 2).trusted(changed));
        assert!(!listing(changed + MTIME_TICK * 2).trusted(changed + MTIME_TICK));
    }
}
