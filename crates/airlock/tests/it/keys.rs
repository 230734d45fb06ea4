//! Rotating the key that seals input-request states (docs/rules.md OPS-76, DECL-89), on real
//! `serve` processes: after `airlock keys rotate` and a restart, a state sealed before still
//! opens and new ones are sealed under the new key; a state whose key is no longer listed is
//! refused as `tampered`. With the key as a credential, retired keys are listed in
//! `[mcp] request_state_previous_keys`, and the command points to that procedure instead. The
//! inbox's session cookie has no key at all: a restart ends every session (OPS-77).

use std::path::Path;

use serde_json::{Value, json};

use crate::mcp::{ADMIN, CLAUDE, OTHER};
use crate::mcp_mrtr::{asked, deployment, reason, retry};
use crate::support::inbox_client::InboxClient;
use crate::support::{Server, cli, deployment_with};
use crate::text;

fn question(n: u64) -> Value {
    json!({"question": format!("Question {n}?")})
}

/// A served deployment's `ask_human` call, answered with `state`; the JSON-RPC reply.
async fn answer(server: &Server, n: u64, state: &str) -> Value {
    let base = format!("http://{}", server.addr);
    let content = json!({"answer": format!("answer {n}")});
    retry(&base, CLAUDE, "ask_human", &question(n), state, content).await
}

/// The `requestState` of a new `ask_human` call `n` through `server`.
async fn state(server: &Server, n: u64) -> String {
    asked(
        &format!("http://{}", server.addr),
        "ask_human",
        &question(n),
    )
    .await
    .1
}

fn answered(reply: &Value, n: u64) {
    let got = &reply["result"]["structuredContent"]["answer"];
    assert_eq!(*got, format!("answer {n}"), "{reply}");
}

fn rotate(dir: &Path) -> String {
    let out = cli(dir, &["keys", "rotate"]);
    assert!(out.status.success(), "{}", text(&out));
    text(&out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_key_file_keeps_opening_earlier_states_and_seals_with_the_new_key() {
    // OPS-76: K1 → rotate (K2, K1 retired) → rotate (K3, K2 retired; K1 dropped).
    let dir = deployment();
    let first = Server::start(dir.path(), &[]);
    let (one, two) = (state(&first, 1).await, state(&first, 2).await);
    drop(first);
    assert!(rotate(dir.path()).contains("previous key still opens"));
    let keys = std::fs::read_to_string(dir.path().join("request_state.key")).unwrap();
    assert_eq!(keys.lines().count(), 2, "the new key, then the retired one");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let meta = std::fs::metadata(dir.path().join("request_state.key")).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    }
    let second = Server::start(dir.path(), &[]);
    answered(&answer(&second, 1, &one).await, 1);
    let three = state(&second, 3).await;
    drop(second);
    rotate(dir.path());
    let third = Server::start(dir.path(), &[]);
    // Sealed under K2, which is now the retired key: still open. Sealed under K1: unknown.
    answered(&answer(&third, 3, &three).await, 3);
    assert_eq!(reason(&answer(&third, 2, &two).await), "tampered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credential_key_rotates_through_request_state_previous_keys() {
    // DECL-89, OPS-76: the key from a credential; the retired one listed as previous.
    let (old, new) = ("11".repeat(32), "22".repeat(32));
    let creds = format!(
        "airlock:\n  admin: {ADMIN}\n  claude: {CLAUDE}\n  other: {OTHER}\n  old_key: \"{old}\"\n  new_key: \"{new}\"\n"
    );
    let toml = |mcp: &str| {
        format!(
            "[mcp]\n{mcp}\n[[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"alice\"\n\
             [[mcp.tokens]]\ncredential = \"airlock.claude\"\nprincipal = \"claude\"\n\
             [credentials]\nfile = \"creds.yml\"\n[builtins.ask_human]\n"
        )
    };
    let dir = deployment_with(&toml("request_state_key = \"airlock.old_key\""), &creds);
    let write = |mcp: &str| std::fs::write(dir.path().join("airlock.toml"), toml(mcp)).unwrap();
    let refused = cli(dir.path(), &["keys", "rotate"]);
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    assert!(
        text(&refused).contains("docs/operations.md"),
        "{}",
        text(&refused)
    );
    let first = Server::start(dir.path(), &[]);
    let (one, two) = (state(&first, 1).await, state(&first, 2).await);
    drop(first);
    write(
        "request_state_key = \"airlock.new_key\"\nrequest_state_previous_keys = [\"airlock.old_key\", \"airlock.gone\"]",
    );
    let check = cli(dir.path(), &["check"]);
    assert_eq!(check.status.code(), Some(1), "{}", text(&check));
    assert!(
        text(&check).contains("request_state_previous_keys[1]"),
        "{}",
        text(&check)
    );
    write(
        "request_state_key = \"airlock.new_key\"\nrequest_state_previous_keys = [\"airlock.old_key\"]",
    );
    let second = Server::start(dir.path(), &[]);
    answered(&answer(&second, 1, &one).await, 1);
    drop(second);
    write("request_state_key = \"airlock.new_key\"");
    let third = Server::start(dir.path(), &[]);
    assert_eq!(reason(&answer(&third, 2, &two).await), "tampered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_cookie_is_a_random_id_that_a_restart_forgets() {
    // OPS-77: nothing sealed to rotate; the session lives in the serving process only.
    let dir = crate::inbox::deployment();
    let first = Server::start(dir.path(), &[]);
    let base = format!("http://{}", first.addr);
    let mut alice = InboxClient::signed_in(&base, crate::inbox::ALICE).await;
    assert_eq!(alice.get("/inbox").await.status, 200);
    let cookie = alice.session().unwrap().to_owned();
    assert!(
        cookie.len() == 64 && cookie.bytes().all(|b| b.is_ascii_hexdigit()),
        "a 256-bit random id, nothing sealed: {cookie}"
    );
    drop(first);
    let second = Server::start(dir.path(), &[]);
    let mut again = InboxClient::new(&format!("http://{}", second.addr));
    again.set_session(&cookie);
    let page = again.get("/inbox").await;
    assert_eq!((page.status, page.location()), (303, "/inbox/sign-in"));
}
