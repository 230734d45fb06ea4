//! A PostgreSQL cluster of the harness's own: `initdb` into a temporary directory and
//! `pg_ctl` on a free loopback port (sockets in that directory too), so restarting it under
//! `airlock serve` never disturbs another test's server. As root, the server programs run as
//! the `postgres` user (PostgreSQL refuses to run as root), which then owns the directory.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A running cluster; stopped (immediately) when dropped.
pub(crate) struct Cluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    as_postgres: bool,
}

impl Cluster {
    /// Initialises and starts a cluster with trust authentication for user `postgres`.
    pub(crate) fn start() -> Self {
        let bin = newest_bin();
        let dir = tempfile::tempdir().unwrap();
        let as_postgres = is_root();
        if as_postgres {
            run(Command::new("chown").arg("postgres").arg(dir.path()));
        }
        let cluster = Self {
            dir,
            bin,
            port: airlock_testkit::free_port(),
            as_postgres,
        };
        let data = cluster.data();
        run(cluster
            .program("initdb")
            .args([
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
                "-D",
            ])
            .arg(&data));
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=200",
            cluster.port,
            cluster.dir.path().display()
        );
        run(cluster
            .program("pg_ctl")
            .args(["-w", "-l"])
            .arg(cluster.dir.path().join("server.log"))
            .args(["-o", &options, "-D"])
            .arg(&data)
            .arg("start"));
        cluster
    }

    /// The URL of its `postgres` database.
    pub(crate) fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// `pg_ctl restart -m immediate`: the server stops as if it crashed (no checkpoint, every
    /// connection cut), then starts again with the same options and recovers from its WAL.
    pub(crate) async fn restart(&self) {
        let mut command = tokio::process::Command::from(self.program("pg_ctl"));
        command
            // Recovery under a loaded machine can pass pg_ctl's default 60 s wait.
            .args(["-w", "-t", "600", "-m", "immediate", "-l"])
            .arg(self.dir.path().join("server.log"))
            .arg("-D")
            .arg(self.data())
            .arg("restart")
            .stdout(std::process::Stdio::null());
        let status = command.status().await.unwrap();
        assert!(status.success(), "pg_ctl restart failed");
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// A program of the server's `bin` directory, run as `postgres` when we are root.
    fn program(&self, name: &str) -> Command {
        let path = self.bin.join(name);
        if self.as_postgres {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(path);
            command
        } else {
            Command::new(path)
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self
            .program("pg_ctl")
            .args(["-m", "immediate", "-D"])
            .arg(self.data())
            .arg("stop")
            .stdout(std::process::Stdio::null())
            .status();
    }
}

/// The `bin` directory of the newest PostgreSQL under `/usr/lib/postgresql`.
fn newest_bin() -> PathBuf {
    let root = Path::new("/usr/lib/postgresql");
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir(root)
        .unwrap_or_else(|e| panic!("{}: {e} (install PostgreSQL)", root.display()))
        .filter_map(Result::ok)
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path())))
        .collect();
    versions.sort();
    let (_, newest) = versions
        .pop()
        .expect("no PostgreSQL under /usr/lib/postgresql");
    newest.join("bin")
}

fn is_root() -> bool {
    let out = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim() == "0"
}

fn run(command: &mut Command) {
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{command:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
