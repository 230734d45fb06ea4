//! The binary on its own (docs/rules.md OPS-78, docs/operations.md): copied out of the build
//! into an empty prefix and run with an empty environment, from a directory that is not the
//! source tree, it tells its version and serves — on a directory holding only an empty
//! `airlock.toml`, and in the layout of `examples/systemd/airlock.service` (declarations in a
//! configuration directory it never writes to, the ledger and its key file in a state
//! directory).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::Server;

/// `airlock` copied to `<prefix>/bin/airlock`, as `cargo install --root <prefix>` puts it.
fn installed(prefix: &Path) -> PathBuf {
    let bin = prefix.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let airlock = bin.join("airlock");
    std::fs::copy(env!("CARGO_BIN_EXE_airlock"), &airlock).unwrap();
    airlock
}

/// `airlock ARGS…` from `prefix`, with nothing in its environment.
fn alone(airlock: &Path, prefix: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(airlock);
    command.args(args).current_dir(prefix).env_clear();
    command
}

/// `/healthz` and `/readyz` of `server` both answer 200.
async fn healthy(server: &Server) {
    for path in ["/healthz", "/readyz"] {
        let url = format!("http://{}{path}", server.addr);
        let status = reqwest::get(&url).await.unwrap().status();
        assert_eq!(status.as_u16(), 200, "{path}");
    }
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_alone_tells_its_version_and_serves_an_empty_deployment() {
    // OPS-78: migrations compiled in; every airlock.toml key has a default.
    let prefix = tempfile::tempdir().unwrap();
    let airlock = installed(prefix.path());
    let version = alone(&airlock, prefix.path(), &["--version"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&version.stdout);
    assert_eq!(
        said.trim(),
        format!("airlock {}", env!("CARGO_PKG_VERSION"))
    );
    let deployment = prefix.path().join("deployment");
    std::fs::create_dir(&deployment).unwrap();
    std::fs::write(deployment.join("airlock.toml"), "").unwrap();
    let dir = deployment.to_str().unwrap();
    let serve = ["serve", "--dir", dir, "--listen", "127.0.0.1:0"];
    let server = Server::spawn(alone(&airlock, prefix.path(), &serve));
    healthy(&server).await;
    let made = names(&deployment);
    assert!(made.contains(&"airlock.sqlite".to_owned()), "{made:?}");
    assert!(made.contains(&"request_state.key".to_owned()), "{made:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_systemd_layout_keeps_the_configuration_directory_unwritten() {
    // OPS-78: `--dir` is read-only under ProtectSystem=strict; the state directory holds
    // what serve writes.
    let prefix = tempfile::tempdir().unwrap();
    let airlock = installed(prefix.path());
    let (config, state) = (prefix.path().join("etc"), prefix.path().join("state"));
    std::fs::create_dir(&config).unwrap();
    std::fs::create_dir(&state).unwrap();
    let ledger = state.join("airlock.sqlite");
    let toml = format!("database_url = \"sqlite://{}\"\n", ledger.display());
    std::fs::write(config.join("airlock.toml"), toml).unwrap();
    let dir = config.to_str().unwrap();
    let serve = ["serve", "--dir", dir, "--listen", "127.0.0.1:0"];
    let server = Server::spawn(alone(&airlock, prefix.path(), &serve));
    healthy(&server).await;
    assert_eq!(names(&config), ["airlock.toml"]);
    let written = names(&state);
    for file in ["airlock.sqlite", "request_state.key"] {
        assert!(written.contains(&file.to_owned()), "{written:?}");
    }
}
