//! `airlock serve` replicas of one deployment, each on a port of its own that it keeps across
//! restarts (clients find it again), its standard error appended to a log file. A replica is
//! up once it printed its banner; one that cannot start (its database restarting) is tried
//! again, bounded.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

/// How long one start may take before it counts as failed.
const START_WITHIN: Duration = Duration::from_secs(30);
/// How many failed starts in a row end the harness.
const START_ATTEMPTS: usize = 60;

struct Replica {
    port: u16,
    child: Option<Child>,
}

/// The replicas of one deployment.
pub(crate) struct Fleet {
    dir: PathBuf,
    logs: PathBuf,
    extra: Vec<String>,
    replicas: Vec<Replica>,
    /// Every start, restarts included.
    pub(crate) starts: usize,
}

impl Fleet {
    /// Starts `n` replicas of `dir` one after the other (the first migrates the ledger), with
    /// `extra` serve options; their logs go to `logs`.
    pub(crate) async fn start(dir: &Path, logs: &Path, n: usize, extra: &[&str]) -> Self {
        let mut fleet = Self {
            dir: dir.to_owned(),
            logs: logs.to_owned(),
            extra: extra.iter().map(|s| (*s).to_owned()).collect(),
            replicas: (0..n)
                .map(|_| Replica {
                    port: airlock_testkit::free_port(),
                    child: None,
                })
                .collect(),
            starts: 0,
        };
        for i in 0..n {
            fleet.spawn(i).await;
        }
        fleet
    }

    /// How many replicas there are.
    pub(crate) fn len(&self) -> usize {
        self.replicas.len()
    }

    /// `127.0.0.1:PORT` of every replica, in order.
    pub(crate) fn addrs(&self) -> Vec<String> {
        self.replicas
            .iter()
            .map(|r| format!("127.0.0.1:{}", r.port))
            .collect()
    }

    /// The process id of replica `i`.
    pub(crate) fn pid(&self, i: usize) -> u32 {
        self.replicas[i]
            .child
            .as_ref()
            .and_then(Child::id)
            .expect("a running replica")
    }

    /// SIGKILL replica `i` (no drain, no finish: rows stay as they are), then start it again.
    pub(crate) async fn kill_and_restart(&mut self, i: usize) {
        self.kill(i).await;
        self.spawn(i).await;
    }

    /// SIGKILLs replica `i` and reaps it.
    pub(crate) async fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.replicas[i].child.take() {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }

    /// SIGKILLs every replica.
    pub(crate) async fn kill_all(&mut self) {
        for i in 0..self.replicas.len() {
            self.kill(i).await;
        }
    }

    /// Starts replica `i` and waits for its banner, retrying a failed start.
    async fn spawn(&mut self, i: usize) {
        for _ in 0..START_ATTEMPTS {
            self.starts += 1;
            if let Some(child) = self.try_spawn(i).await {
                self.replicas[i].child = Some(child);
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let log = std::fs::read_to_string(self.logs.join(format!("replica-{i}.log")));
        let log = log.unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(20).collect();
        panic!(
            "replica {i} did not start {START_ATTEMPTS} times; its log ends:\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }

    async fn try_spawn(&self, i: usize) -> Option<Child> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.logs.join(format!("replica-{i}.log")))
            .unwrap();
        let listen = format!("127.0.0.1:{}", self.replicas[i].port);
        let mut child = Command::new(env!("CARGO_BIN_EXE_airlock"))
            .arg("serve")
            .arg(&self.dir)
            .args(["--listen", &listen])
            .args(&self.extra)
            .env("NO_COLOR", "1")
            .env("AIRLOCK_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let banner = tokio::time::timeout(START_WITHIN, lines.next_line()).await;
        if let Ok(Ok(Some(line))) = banner
            && line.starts_with("airlock listening on")
        {
            // Kept reading: a closed pipe would fail the server's next line of output.
            tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
            return Some(child);
        }
        let _ = child.start_kill();
        let _ = child.wait().await;
        None
    }
}

/// Sends `signal` (`STOP`, `CONT`) to process `pid`.
pub(crate) async fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .await
        .unwrap();
    assert!(status.success(), "kill -{signal} {pid}");
}
