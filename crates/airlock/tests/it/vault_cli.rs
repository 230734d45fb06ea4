//! `airlock vault` (docs/rules.md CALL-13, CALL-15): a principal's own credential goes in
//! through stdin, is sealed in the ledger under the deployment's vault key (the key file is
//! created on first use), is listed by its digest only, and is revoked; a connect link is made
//! only for a connection that connects accounts.

use std::io::Write as _;
use std::process::{Output, Stdio};

use crate::{airlock, text};

const SECRET: &str = "crm-token-4f1d9c0b7e2a";

fn deployment() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("airlock.toml"),
        "[server]\npublic_url = \"https://airlock.example.com\"\n\
         [connections.crm]\nbase_url = \"https://crm.example.com\"\nper_principal = true\n\
         [connections.mail]\nbase_url = \"https://mail.example.com\"\nper_principal = true\n\
         [connections.mail.oauth]\nauthorization_endpoint = \"https://id.example.com/authorize\"\n\
         token_endpoint = \"https://id.example.com/token\"\nclient_id = \"airlock\"\n",
    )
    .unwrap();
    dir
}

fn vault(dir: &std::path::Path, args: &[&str], stdin: &str) -> Output {
    let mut child = airlock()
        .arg("vault")
        .args(args)
        .arg("--dir")
        .arg(dir)
        .args(["--as", "ops"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

fn list(dir: &std::path::Path) -> Output {
    airlock()
        .args(["vault", "list", "--json", "--dir"])
        .arg(dir)
        .output()
        .unwrap()
}

#[test]
fn a_credential_is_set_listed_by_digest_and_revoked() {
    let dir = deployment();
    let set = vault(dir.path(), &["set", "crm", "--principal", "alice"], SECRET);
    assert!(set.status.success(), "{}", text(&set));
    assert!(
        text(&set).contains("alice's credential for crm is set"),
        "{}",
        text(&set)
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("vault.key"))
            .unwrap()
            .trim()
            .len(),
        64
    );

    let listed = list(dir.path());
    assert!(listed.status.success(), "{}", text(&listed));
    let json: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let rows = json["credentials"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["principal"], "alice");
    assert_eq!(rows[0]["set_by"], "ops");
    assert_eq!(rows[0]["digest"].as_str().unwrap().len(), 16);
    let ledger = std::fs::read(dir.path().join("airlock.sqlite")).unwrap();
    let everything = format!(
        "{}{}{}",
        text(&set),
        text(&listed),
        String::from_utf8_lossy(&ledger)
    );
    assert!(
        !everything.contains(SECRET),
        "the secret is never shown nor stored in the clear"
    );

    let revoked = vault(dir.path(), &["revoke", "--principal", "alice"], "");
    assert!(revoked.status.success(), "{}", text(&revoked));
    assert!(
        text(&revoked).contains("1 credential(s) of alice revoked"),
        "{}",
        text(&revoked)
    );
    let json: serde_json::Value = serde_json::from_slice(&list(dir.path()).stdout).unwrap();
    assert_eq!(json["credentials"].as_array().unwrap().len(), 0);
}

#[test]
fn refusals_name_what_is_wrong() {
    let dir = deployment();
    let empty = vault(dir.path(), &["set", "crm", "--principal", "alice"], "");
    assert!(!empty.status.success());
    assert!(
        text(&empty).contains("no secret on standard input"),
        "{}",
        text(&empty)
    );
    let unknown = vault(dir.path(), &["set", "erp", "--principal", "alice"], SECRET);
    assert!(!unknown.status.success());
    assert!(
        text(&unknown).contains("connection `erp` does not take each principal's own credential"),
        "{}",
        text(&unknown)
    );

    let no_oauth = airlock()
        .args([
            "vault",
            "connect-link",
            "crm",
            "--principal",
            "alice",
            "--dir",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!no_oauth.status.success());
    assert!(
        text(&no_oauth).contains("does not connect accounts"),
        "{}",
        text(&no_oauth)
    );
    let link = airlock()
        .args([
            "vault",
            "connect-link",
            "mail",
            "--principal",
            "alice",
            "--dir",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(link.status.success(), "{}", text(&link));
    let url = String::from_utf8(link.stdout).unwrap();
    assert!(
        url.starts_with("https://airlock.example.com/v1/connect/mail?ticket=v1."),
        "{url}"
    );
}
