//! A real `airlock serve` process for the bench binaries that measure the process itself (its
//! resident memory, connections it holds): started on a deployment directory, killed when
//! dropped. Shared by the `memory` and `scale` benches (`#[path]`).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A resident-memory reading of process `pid` (`/proc/<pid>/status`, `field` such as
/// `VmRSS:`), in MiB; 0 when it cannot be read.
pub(crate) fn status_mib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// The serve process; killed when dropped.
pub(crate) struct Serve(Child);

impl Serve {
    pub(crate) fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `airlock serve dir` (logging at `warn`, output discarded) and waits until
/// `/healthz` on `port` answers, at most 120 s: boot discovers every connection's tools first.
pub(crate) async fn start_serve(dir: &Path, port: u16) -> Serve {
    let child = Command::new(env!("CARGO_BIN_EXE_airlock"))
        .arg("serve")
        .arg(dir)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let serve = Serve(child);
    let health = format!("http://127.0.0.1:{port}/healthz");
    for _ in 0..1200 {
        if reqwest::get(&health)
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            return serve;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("airlock serve did not become healthy within 120 s");
}
