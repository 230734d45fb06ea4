//! SIGKILL while an at-most-once call is in flight: after a restart the sweeper finds its
//! lease run out and marks it in doubt (never a silent re-run); it shows in
//! `airlock approvals list` and `airlock resolve` settles it.

use std::time::Duration;

use serde_json::json;
use tokio::net::TcpListener;

use crate::support::{Server, cli, deployment_with, mcp_request};
use crate::text;

const ADMIN: &str = "admin-5d41402abc4b2a76b9719d911017c592";
const CLIENT: &str = "mcp-7d793037a0760186574b0282f2f435e7";

fn deployment() -> tempfile::TempDir {
    let toml = "[[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"alice\"\n[[mcp.tokens]]\ncredential = \"airlock.client\"\nprincipal = \"claude\"\n[egress]\nallow = [\"127.0.0.1/32\"]\nallow_fetch = true\n[credentials]\nfile = \"creds.yml\"\n[builtins.fetch]\napproval = \"never\"\n";
    deployment_with(
        toml,
        &format!("airlock:\n  admin: {ADMIN}\n  client: {CLIENT}\n"),
    )
}

/// An upstream that accepts, says so, and never answers.
async fn silent() -> (std::net::SocketAddr, tokio::sync::oneshot::Receiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (socket, _) = listener.accept().await.unwrap();
        let _ = tx.send(());
        std::future::pending::<()>().await;
        drop(socket);
    });
    (addr, rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_call_leaves_it_in_doubt_until_resolved() {
    let dir = deployment();
    let d = dir.path();
    let mut first = Server::start(d, &["--lease", "2"]);
    let (upstream, asked) = silent().await;
    let base = format!("http://{}", first.addr);
    // The MCP client's call: it hangs on the upstream, then loses its server.
    let call = tokio::spawn(async move {
        mcp_request(&base)
            .header("authorization", format!("Bearer {CLIENT}"))
            .body(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "fetch", "arguments": {"url": format!("http://{upstream}/slow")}}}).to_string())
            .send()
            .await
    });
    tokio::time::timeout(Duration::from_secs(20), asked)
        .await
        .unwrap()
        .unwrap();
    first.child.kill().unwrap(); // SIGKILL: no drain, no finish, the row stays `running`.
    first.child.wait().unwrap();
    assert!(call.await.unwrap().is_err(), "the client lost its server");

    let second = Server::start(d, &["--lease", "2"]);
    let line = second.await_log(&["in doubt"], Duration::from_secs(30));
    let id = line
        .split("id=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("{line}"))
        .to_owned();

    let out = cli(d, &["approvals", "list"]);
    let listing = String::from_utf8(out.stdout).unwrap();
    assert!(
        listing.contains(&id) && listing.contains("in_doubt"),
        "{listing}"
    );
    assert!(
        listing.contains("claude") && listing.contains("/slow"),
        "{listing}"
    );

    let out = cli(
        d,
        &[
            "resolve",
            &id,
            "--outcome",
            "ran",
            "--note",
            "the upstream log shows the request",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let out = cli(d, &["invocations", "show", &id]);
    let shown = String::from_utf8(out.stdout).unwrap();
    assert!(shown.contains("state       resolved"), "{shown}");
    assert!(shown.contains("resolution  ran by alice"), "{shown}");
    assert!(
        String::from_utf8(cli(d, &["approvals", "list"]).stdout)
            .unwrap()
            .contains("nothing waits")
    );
    drop(second);
}
