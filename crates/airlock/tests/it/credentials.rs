//! `airlock credentials`: values go in through stdin and never come out.

use std::io::Write as _;
use std::process::Stdio;

use crate::{airlock, text};

const SECRET: &str = "sk-live-5d41402abc4b2a76b9719d911017c592";

fn deployment() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("airlock.toml"),
        "[[mcp.tokens]]\ncredential = \"airlock.mcp_token\"\nprincipal = \"ci\"\n",
    )
    .unwrap();
    dir
}

fn set(dir: &std::path::Path, path: &str, value: &str) -> std::process::Output {
    let mut child = airlock()
        .args(["credentials", "set", "--dir"])
        .arg(dir)
        .arg(path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(value.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn set_encrypts_and_no_output_shows_the_value() {
    let dir = deployment();
    let mut outputs = String::new();
    let out = set(dir.path(), "crm.mcp_token", SECRET);
    assert!(out.status.success(), "{}", text(&out));
    outputs += &text(&out);
    let out = set(dir.path(), "airlock.mcp_token", "second-secret-value");
    assert!(out.status.success(), "{}", text(&out));
    outputs += &text(&out);

    let sealed = std::fs::read_to_string(dir.path().join("credentials.yml.enc")).unwrap();
    assert!(!sealed.contains(SECRET) && sealed.starts_with("airlock-credentials-v1:"));
    let key = std::fs::read_to_string(dir.path().join("master.key")).unwrap();
    assert_eq!(key.trim().len(), 64);

    let out = airlock()
        .args(["credentials", "show-paths", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "airlock.mcp_token\ncrm.mcp_token\n"
    );
    outputs += &text(&out);

    let out = airlock().args(["check"]).arg(dir.path()).output().unwrap();
    outputs += &text(&out);
    assert!(
        !outputs.contains(SECRET),
        "a credential value leaked into output"
    );
}

#[test]
fn wrong_master_key_is_refused_without_leaking() {
    let dir = deployment();
    assert!(set(dir.path(), "crm.mcp_token", SECRET).status.success());
    let out = airlock()
        .args(["credentials", "show-paths", "--dir"])
        .arg(dir.path())
        .env("AIRLOCK_MASTER_KEY", "00".repeat(32))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let all = text(&out);
    assert!(
        all.contains("the master key does not open this file"),
        "{all}"
    );
    assert!(!all.contains(SECRET));
}
