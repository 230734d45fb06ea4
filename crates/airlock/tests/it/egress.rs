//! `airlock egress check`: allow/block, reasons, addresses, offline answers, joins, policy.

use crate::{airlock, text};

fn check(args: &[&str]) -> (Option<i32>, String) {
    let out = airlock()
        .args(["egress", "check"])
        .args(args)
        .output()
        .unwrap();
    (out.status.code(), text(&out))
}

#[test]
fn a_public_answer_is_allowed_and_shows_where_it_would_connect() {
    let (code, out) = check(&[
        "https://api.tenant.example.com/v1",
        "--resolve",
        "api.tenant.example.com=93.184.215.14",
    ]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("allow https://api.tenant.example.com/v1"),
        "{out}"
    );
    assert!(out.contains("would connect to: 93.184.215.14:443"), "{out}");
}

#[test]
fn one_private_answer_blocks_the_name() {
    let (code, out) = check(&[
        "https://api.tenant.example.com/",
        "--resolve",
        "api.tenant.example.com=93.184.215.14,169.254.169.254",
    ]);
    assert_eq!(code, Some(3), "{out}");
    assert!(
        out.contains("block https://api.tenant.example.com/"),
        "{out}"
    );
    assert!(out.contains("(blocked_address)"), "{out}");
}

#[test]
fn internal_names_and_literals_are_blocked() {
    for url in [
        "https://kubernetes.default.svc/",
        "http://127.0.0.1:8080/",
        "http://[::ffff:10.0.0.1]/",
        "http://0x7f.1/",
    ] {
        let (code, out) = check(&[url, "--resolve", "unused.example.com=93.184.215.14"]);
        assert_eq!(code, Some(3), "{url}: {out}");
    }
}

#[test]
fn a_join_that_changes_the_host_is_blocked() {
    let (code, out) = check(&[
        "--base",
        "https://api.tenant.example.com",
        "--path",
        "@other.example.com/x",
        "--resolve",
        "api.tenant.example.com=93.184.215.14",
    ]);
    assert_eq!(code, Some(3), "{out}");
    let (code, out) = check(&[
        "--base",
        "https://api.tenant.example.com/v1",
        "--path",
        "/clientes",
        "--resolve",
        "api.tenant.example.com=93.184.215.14",
    ]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("allow https://api.tenant.example.com/v1/clientes"),
        "{out}"
    );
}

#[test]
fn the_deployment_policy_applies() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("airlock.toml"),
        "[egress]\nallow = [\"10.1.2.0/24\"]\nports = [443]\n",
    )
    .unwrap();
    let resolve = "erp.corp.example.com=10.1.2.3";
    let (code, out) = check(&["https://erp.corp.example.com/", "--resolve", resolve]);
    assert_eq!(code, Some(3), "without the deployment policy: {out}");
    let dir_arg = dir.path().to_str().unwrap();
    let (code, out) = check(&[
        "https://erp.corp.example.com/",
        "--resolve",
        resolve,
        "--dir",
        dir_arg,
    ]);
    assert_eq!(code, Some(0), "{out}");
    let (code, out) = check(&[
        "https://erp.corp.example.com:8443/",
        "--resolve",
        resolve,
        "--dir",
        dir_arg,
    ]);
    assert_eq!(code, Some(3), "port outside egress.ports: {out}");
}
