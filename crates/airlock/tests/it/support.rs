//! Shared scaffolding of the end-to-end tests: a temporary deployment, the app served in-process
//! on a free port, the `airlock serve` binary as a child, parked calls, loopback upstreams and
//! plain HTTP requests, and a proxy adding a bearer token for clients that cannot. Each test keeps
//! its own TOML, credentials and tokens.

pub(crate) mod bearer_proxy;
pub(crate) mod browser;
pub(crate) mod inbox_client;

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use airlock::boot::boot;
use airlock::http::{AppState, app, serve};
use airlock_ledger::Invocation;
use airlock_runtime::{CallContext, Gateway};
use airlock_spec::ScopeId;
use airlock_testkit::Needs;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

use crate::airlock;

/// What an upstream page answers: `hello` as plain text.
const HELLO: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello";

/// A temporary deployment directory holding `airlock.toml` and `creds.yml` as given.
pub(crate) fn deployment_with(toml: &str, creds: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("airlock.toml"), toml).unwrap();
    std::fs::write(dir.path().join("creds.yml"), creds).unwrap();
    dir
}

/// Boots `dir` and serves it on 127.0.0.1:0 in the background; returns the address and the
/// gateway.
pub(crate) async fn serve_in_process(dir: &Path) -> (SocketAddr, Arc<Gateway>) {
    let booted = boot(dir).await.unwrap();
    let gateway = booted.gateway.clone();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = AppState {
        gateway: gateway.clone(),
        agents: booted.agents,
        admin: booted.admin,
        mcp: booted.mcp,
        limits: booted.deployment.config.server,
        slack: booted.slack.clone(),
        max_grant: booted.deployment.config.max_grant,
    };
    let limits = state.limits;
    let never = tokio_util::sync::CancellationToken::new();
    tokio::spawn(serve(listener, app(state), limits, never));
    (addr, gateway)
}

/// The context of call `call_id` by `principal` in `scope`, in a fresh session.
pub(crate) async fn call_context(
    gateway: &Gateway,
    scope: ScopeId,
    principal: Option<&str>,
    call_id: &str,
) -> CallContext {
    let session = gateway
        .open_session("test", principal.map(Into::into), &scope)
        .await
        .unwrap();
    CallContext {
        scope,
        session,
        call_id: call_id.into(),
        principal: principal.map(Into::into),
        groups: None,
        channel: "test",
        downstream: Default::default(),
    }
}

/// A parked call of `tool` in `scope` by `principal`.
pub(crate) async fn park(
    gateway: &Gateway,
    scope: ScopeId,
    principal: &str,
    tool: &str,
    arguments: Value,
) -> Invocation {
    let ctx = call_context(gateway, scope, Some(principal), "1").await;
    let row = gateway
        .call(&ctx, tool, arguments)
        .await
        .unwrap()
        .invocation()
        .clone();
    assert!(row.state.is_parked(), "{row:?}");
    row
}

/// The address in `airlock serve`'s first stdout line, `airlock listening on http://ADDR`.
pub(crate) fn listening_addr(banner: &str) -> String {
    banner
        .strip_prefix("airlock listening on http://")
        .unwrap_or_else(|| panic!("{banner}"))
        .to_owned()
}

/// A running `airlock serve`, its stderr lines on a channel; killed when dropped.
pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) addr: String,
    stderr: mpsc::Receiver<String>,
    /// Every stderr line read so far, in order.
    read: std::sync::Mutex<Vec<String>>,
}

impl Server {
    /// Starts `airlock serve DIR --listen 127.0.0.1:0 EXTRA…` and waits for its banner.
    pub(crate) fn start(dir: &Path, extra: &[&str]) -> Self {
        let mut command = Self::command(dir, extra);
        command.env("NO_COLOR", "1").env("AIRLOCK_LOG", "info");
        Self::spawn(command)
    }

    /// `airlock serve DIR --listen 127.0.0.1:0 EXTRA…`, to be configured and [`Server::spawn`]ed.
    pub(crate) fn command(dir: &Path, extra: &[&str]) -> std::process::Command {
        let mut command = airlock();
        command
            .arg("serve")
            .arg(dir)
            .args(["--listen", "127.0.0.1:0"])
            .args(extra);
        command
    }

    /// Starts `command` (an `airlock serve`) and waits for its banner.
    pub(crate) fn spawn(mut command: std::process::Command) -> Self {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, stderr) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let addr = listening_addr(&lines.next().unwrap().unwrap());
        std::thread::spawn(move || lines.for_each(drop));
        Self {
            child,
            addr,
            stderr,
            read: std::sync::Mutex::default(),
        }
    }

    /// Waits (bounded) for a log line containing every one of `needles`.
    pub(crate) fn await_log(&self, needles: &[&str], within: Duration) -> String {
        let deadline = std::time::Instant::now() + within;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(line) => {
                    self.read.lock().unwrap().push(line.clone());
                    if needles.iter().all(|n| line.contains(n)) {
                        return line;
                    }
                    seen.push(line);
                }
                Err(_) => panic!("no log line with {needles:?} within {within:?}; saw {seen:#?}"),
            }
        }
    }

    /// Every stderr line so far: those [`Server::await_log`] read and those not read yet.
    pub(crate) fn log(&self) -> Vec<String> {
        let mut read = self.read.lock().unwrap();
        read.extend(self.stderr.try_iter());
        read.clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends SIGTERM to the process `pid`, as an operator stopping `airlock serve` would.
pub(crate) fn sigterm(pid: u32) {
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// `airlock ARGS… --dir DIR` (decisions as `alice`).
pub(crate) fn cli(dir: &Path, args: &[&str]) -> Output {
    airlock()
        .args(args)
        .arg("--dir")
        .arg(dir)
        .env("USER", "alice")
        .output()
        .unwrap()
}

/// An upstream that answers every request with a small text page, `hello`.
pub(crate) async fn hello_upstream() -> SocketAddr {
    upstream_answering(HELLO).await
}

/// An upstream that answers every request with the raw HTTP response `reply`.
pub(crate) async fn upstream_answering(reply: &'static [u8]) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut buf = [0u8; 2048];
            let _ = socket.read(&mut buf).await;
            let _ = socket.write_all(reply).await;
        }
    });
    addr
}

/// An upstream that answers one request with `hello`, and says when it was asked.
pub(crate) async fn hello_once() -> (SocketAddr, tokio::sync::oneshot::Receiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 2048];
        let _ = socket.read(&mut buf).await;
        let _ = tx.send(());
        let _ = socket.write_all(HELLO).await;
    });
    (addr, rx)
}

/// A blocking upstream on 127.0.0.1 that answers one request with `body` as JSON; returns the
/// port and the request head.
pub(crate) fn json_once(body: &'static str) -> (u16, std::thread::JoinHandle<String>) {
    use std::io::{Read as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        let (mut socket, _) = listener.accept().unwrap();
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = socket.read(&mut buf).unwrap();
            head.extend_from_slice(&buf[..n]);
        }
        write!(socket, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len()).unwrap();
        String::from_utf8_lossy(&head).into_owned()
    });
    (port, handle)
}

/// `GET {base}/metrics` with the bearer `token`; the exposition text.
pub(crate) async fn metrics(base: &str, token: &str) -> String {
    reqwest::Client::new()
        .get(format!("{base}/metrics"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// A plain HTTP/1.1 request to the server; returns (status, JSON body or Null, lower-cased head).
pub(crate) async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, Value, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let auth = token
        .map(|t| format!("authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: localhost\r\n{auth}content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head[9..12].parse().unwrap();
    (
        status,
        serde_json::from_str(body).unwrap_or(Value::Null),
        head.to_ascii_lowercase(),
    )
}

/// A JSON-RPC POST to `{base}/mcp` with the streamable-HTTP headers; the caller adds its token
/// and body.
pub(crate) fn mcp_request(base: &str) -> reqwest::RequestBuilder {
    mcp_request_on(&reqwest::Client::new(), base)
}

/// [`mcp_request`] on `client`, whose connections many requests share.
pub(crate) fn mcp_request_on(client: &reqwest::Client, base: &str) -> reqwest::RequestBuilder {
    client
        .post(format!("{base}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-11-25")
}

/// Whether a client that `.ci/run` installs (`installed` is one of its files) is here. Missing
/// under `CI` is a failure, never a skip, so CI cannot pass by skipping; locally the test says
/// how to install it and is skipped.
pub(crate) fn installed(installed: &Path, needs: Needs) -> bool {
    if installed.exists() {
        return true;
    }
    airlock_testkit::skip(needs);
    false
}

/// Starts `crates/airlock-mcp/tests/sdk/fixture.mjs`, an MCP upstream built with the official
/// TypeScript SDK that returns every content block type; its port, or `None` when the SDK is not
/// installed (outside CI). The upstream lives as long as the child handle.
pub(crate) async fn sdk_fixture() -> Option<(tokio::process::Child, u16)> {
    sdk_script("fixture.mjs").await
}

/// Starts `crates/airlock-mcp/tests/sdk/asking.mjs`, a session-era MCP upstream built with the
/// official TypeScript SDK whose tools ask their client (sampling, elicitation, roots) on the
/// call's stream; as [`sdk_fixture`].
pub(crate) async fn asking_fixture() -> Option<(tokio::process::Child, u16)> {
    sdk_script("asking.mjs").await
}

/// Starts `script` of `crates/airlock-mcp/tests/sdk`, built with the official TypeScript SDK.
async fn sdk_script(script: &str) -> Option<(tokio::process::Child, u16)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../airlock-mcp/tests/sdk");
    node_fixture(
        &dir,
        "@modelcontextprotocol/sdk",
        Needs::TypeScriptSdk,
        script,
    )
    .await
}

/// Starts `crates/airlock/tests/upstream-v2/tasks.mjs`, a 2026-07-28 MCP upstream built with the
/// official TypeScript SDK v2 that runs the conformance suite's task tools as tasks; as
/// [`sdk_fixture`].
pub(crate) async fn tasks_fixture() -> Option<(tokio::process::Child, u16)> {
    node_fixture(
        &upstream_v2(),
        "@modelcontextprotocol/server",
        Needs::TypeScriptSdkV2,
        "tasks.mjs",
    )
    .await
}

/// Starts `crates/airlock/tests/upstream-v2/mrtr.mjs`, a 2026-07-28 upstream built with the
/// official TypeScript SDK v2 that asks its client for input (the conformance suite's
/// input-required tools); as [`sdk_fixture`].
pub(crate) async fn mrtr_fixture() -> Option<(tokio::process::Child, u16)> {
    node_fixture(
        &upstream_v2(),
        "@modelcontextprotocol/server",
        Needs::TypeScriptSdkV2,
        "mrtr.mjs",
    )
    .await
}

/// The npm package directory of the upstreams built with the TypeScript SDK v2.
fn upstream_v2() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/upstream-v2")
}

/// Starts `script` of the npm package directory `dir` (which must have `package` installed, as
/// `needs` says how) and reads the port it prints first.
async fn node_fixture(
    dir: &Path,
    package: &str,
    needs: Needs,
    script: &str,
) -> Option<(tokio::process::Child, u16)> {
    if !installed(&dir.join("node_modules").join(package), needs) {
        return None;
    }
    let mut child = tokio::process::Command::new("node")
        .arg(dir.join(script))
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node must be on PATH");
    let stdout = child.stdout.take().unwrap();
    let port = tokio::io::BufReader::new(stdout)
        .lines()
        .next_line()
        .await
        .unwrap();
    let port = port.unwrap_or_else(|| panic!("{script} printed no port"));
    Some((child, port.parse().unwrap()))
}

/// POSTs a 2026-07-28 `tools/call` with `params` to `url` as `token`: the client's context in
/// `_meta` declaring `capabilities`, and the routing headers that revision requires; the
/// JSON-RPC reply.
pub(crate) async fn modern_tools_call(
    url: &str,
    token: &str,
    params: serde_json::Value,
    capabilities: serde_json::Value,
) -> serde_json::Value {
    modern_tools_call_status(url, token, params, capabilities)
        .await
        .1
}

/// [`modern_tools_call`] with the reply's HTTP status.
pub(crate) async fn modern_tools_call_status(
    url: &str,
    token: &str,
    params: serde_json::Value,
    capabilities: serde_json::Value,
) -> (u16, serde_json::Value) {
    modern_request(url, token, "tools/call", params, capabilities).await
}

/// A 2026-07-28 `method` request (`tools/call`, `prompts/get` or `resources/read`, whose
/// `params.name` or `params.uri` goes in `Mcp-Name`) as [`modern_tools_call`] sends it; the reply's HTTP status and JSON-RPC reply.
pub(crate) async fn modern_request(
    url: &str,
    token: &str,
    method: &str,
    mut params: serde_json::Value,
    capabilities: serde_json::Value,
) -> (u16, serde_json::Value) {
    params["_meta"] = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}
    });
    let name = params["name"].as_str().or(params["uri"].as_str());
    let name = name.unwrap_or_default().to_owned();
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let response = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {token}"))
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method)
        .header("mcp-name", name)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (
        status,
        serde_json::from_str(&response.text().await.unwrap()).unwrap(),
    )
}
