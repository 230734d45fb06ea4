//! Traces and metrics of a real `airlock serve` (docs/rules.md OPS-23 … OPS-31, EGRESS-35,
//! EGRESS-36, LEDGER-38, LEDGER-39): the spans a loopback OTLP collector decodes, the
//! `traceparent` a loopback MCP upstream receives, and the series `/metrics` serves.

use std::time::Duration;

use airlock_testkit::{Collector, ExportedSpan, Script, Server as Upstream, span_kind};
use serde_json::{Value, json};

use crate::support::{Server, deployment_with, mcp_request, metrics};

const ADMIN: &str = "admin-9b2c64e1d6a04f6c8f0e5d7a3b1c2d3e";
const CLIENT: &str = "mcp-1f0e2d3c4b5a69788796a5b4c3d2e1f0";
const UPSTREAM_KEY: &str = "crm-secret-77aa01";
const OTEL_KEY: &str = "otel-key-5e5e5e";
/// An argument value no span may show.
const ARGUMENT: &str = "argument-value-never-in-a-span";

/// A deployment with MCP and admin tokens, a `crm` connection to `upstream` (ungated), the
/// builtins `ask_human` and `fetch` (ungated), and `extra` appended to `airlock.toml`.
fn deployment(upstream: &str, extra: &str) -> tempfile::TempDir {
    let toml = format!(
        "[[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"alice\"\n[[mcp.tokens]]\ncredential = \"airlock.client\"\nprincipal = \"claude\"\n[egress]\nallow = [\"127.0.0.1/32\"]\nallow_fetch = true\n[credentials]\nfile = \"creds.yml\"\n[builtins.ask_human]\n[builtins.fetch]\napproval = \"never\"\n{extra}"
    );
    let creds = format!(
        "airlock:\n  admin: {ADMIN}\n  client: {CLIENT}\ncrm:\n  key: {UPSTREAM_KEY}\notel:\n  key: {OTEL_KEY}\n"
    );
    let dir = deployment_with(&toml, &creds);
    std::fs::create_dir(dir.path().join("connections")).unwrap();
    let crm = format!(
        "url: {upstream}\nauth:\n  type: bearer\n  credential: crm.key\napproval: never\neffect: idempotent\n"
    );
    std::fs::write(dir.path().join("connections/crm.yml"), crm).unwrap();
    dir
}

/// `airlock serve` with the batch exporter flushing every 50 ms (the SDK's own setting).
fn serve(dir: &std::path::Path) -> Server {
    let mut command = Server::command(dir, &[]);
    command
        .env("NO_COLOR", "1")
        .env("AIRLOCK_LOG", "info")
        .env("OTEL_BSP_SCHEDULE_DELAY", "50");
    Server::spawn(command)
}

/// The session id an `initialize` on `server` gives (docs/rules.md MCP-95).
async fn session(server: &Server) -> String {
    let hello = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    let reply = mcp_request(&format!("http://{}", server.addr))
        .header("authorization", format!("Bearer {CLIENT}"))
        .body(hello.to_string())
        .send()
        .await
        .unwrap();
    reply.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned()
}

/// One `tools/call` with JSON-RPC id `id`, optional `traceparent` header and `_meta`, in a
/// session of its own.
async fn call(
    server: &Server,
    id: u64,
    tool: &str,
    header: Option<&str>,
    meta: Option<Value>,
) -> Value {
    let mut params = json!({"name": tool, "arguments": {"q": ARGUMENT}});
    if let Some(meta) = meta {
        params["_meta"] = meta;
    }
    let mut request = mcp_request(&format!("http://{}", server.addr))
        .header("authorization", format!("Bearer {CLIENT}"))
        .header("mcp-session-id", session(server).await);
    if let Some(value) = header {
        request = request.header("traceparent", value);
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    let response = request.body(body.to_string()).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    response.json().await.unwrap()
}

fn one<'a>(
    spans: &'a [ExportedSpan],
    what: &str,
    pick: impl Fn(&ExportedSpan) -> bool,
) -> &'a ExportedSpan {
    let found: Vec<_> = spans.iter().filter(|s| pick(s)).collect();
    assert_eq!(found.len(), 1, "{what}: {spans:#?}");
    found[0]
}

/// OPS-23, OPS-24, OPS-25, EGRESS-35, EGRESS-36, LEDGER-38, DECL-62.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traced_call_exports_its_span_tree_and_continues_the_trace_upstream() {
    let collector = Collector::start().await;
    let upstream = Upstream::start(Script::default()).await;
    upstream.set_tools(vec![
        json!({"name": "echo", "description": "Echo."}),
        json!({"name": "fail", "description": "Fails."}),
    ]);
    let telemetry = format!(
        "[telemetry]\nendpoint = \"{}\"\nservice_name = \"airlock-test\"\n[telemetry.headers]\nx-otel-key = \"otel.key\"\n",
        collector.endpoint()
    );
    let dir = deployment(&upstream.loopback_url(), &telemetry);
    let server = serve(dir.path());

    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent = "00f067aa0ba902b7";
    let answer = call(
        &server,
        7,
        "crm__echo",
        Some(&format!("00-{trace}-{parent}-01")),
        None,
    )
    .await;
    assert!(answer["result"]["isError"] != json!(true), "{answer}");
    let spans = collector
        .trace(trace, Duration::from_secs(20), |spans| {
            spans.iter().any(|s| s.kind == span_kind::SERVER)
                && spans.iter().filter(|s| s.kind == span_kind::CLIENT).count() >= 2
        })
        .await;

    let root = one(&spans, "the server span", |s| s.kind == span_kind::SERVER);
    assert_eq!(root.name, "tools/call crm__echo");
    assert_eq!(root.parent_span_id, parent, "continued from the header");
    assert_eq!(root.service, "airlock-test");
    assert_eq!(root.attr("mcp.method.name"), Some("tools/call"));
    assert_eq!(root.attr("gen_ai.tool.name"), Some("crm__echo"));
    assert_eq!(root.attr("jsonrpc.request.id"), Some("7"));
    let session = root.attr("mcp.session.id");
    assert!(
        session.is_some_and(|id| id.starts_with("als1.")),
        "{session:?}"
    );
    assert_eq!(root.attr("airlock.policy.verdict"), Some("allowed"));
    assert_eq!(root.attr("airlock.policy.approval"), Some("never"));
    assert_eq!(root.attr("airlock.outcome"), Some("succeeded"));
    assert_eq!(root.attr("error.type"), None);
    let invocation = root.attr("airlock.invocation.id").unwrap();
    assert_eq!(invocation.len(), 36, "{invocation}");

    let commits: Vec<_> = spans.iter().filter(|s| s.name == "ledger commit").collect();
    assert!(!commits.is_empty(), "{spans:#?}");
    assert!(
        commits
            .iter()
            .all(|s| s.parent_span_id == root.span_id && s.kind == span_kind::INTERNAL)
    );

    let requests: Vec<_> = spans
        .iter()
        .filter(|s| s.kind == span_kind::CLIENT)
        .collect();
    for request in &requests {
        assert_eq!(request.parent_span_id, root.span_id);
        assert_eq!(request.attr("http.request.method"), Some("POST"));
        assert_eq!(
            request.attr("url.full"),
            Some(upstream.loopback_url().as_str())
        );
        assert_eq!(request.attr("server.address"), Some("127.0.0.1"));
        // 200 for requests, 202 for the `initialized` notification.
        let status = request.attr("http.response.status_code");
        assert!(matches!(status, Some("200" | "202")), "{request:#?}");
    }
    // The upstream's tools/call arrived with a traceparent naming one of those spans.
    let seen = upstream.seen();
    let tool_call = seen.iter().find(|s| s.method == "tools/call").unwrap();
    let sent = tool_call.headers["traceparent"].to_str().unwrap();
    let (prefix, rest) = sent.split_at(36);
    assert_eq!(prefix, format!("00-{trace}-"));
    assert!(
        requests.iter().any(|r| rest.starts_with(&r.span_id)),
        "{sent}"
    );

    // Nothing secret or caller-supplied as a value anywhere; the collector got its header.
    for span in &spans {
        for value in span.attributes.values() {
            for secret in [ARGUMENT, UPSTREAM_KEY, CLIENT, OTEL_KEY] {
                assert!(!value.contains(secret), "{span:#?}");
            }
        }
    }
    let headers = collector.headers();
    assert!(headers.iter().all(|h| h["x-otel-key"] == OTEL_KEY));
    assert_eq!(collector.refused(), 0);

    // A tool error, its parent from `params._meta.traceparent` (the header is malformed).
    let trace = "0af7651916cd43dd8448eb211c80319c";
    let parent = "b7ad6b7169203331";
    let meta = json!({"traceparent": format!("00-{trace}-{parent}-01")});
    let answer = call(&server, 8, "crm__fail", Some("00-zz-zz-01"), Some(meta)).await;
    assert_eq!(answer["result"]["isError"], json!(true), "{answer}");
    let spans = collector
        .trace(trace, Duration::from_secs(20), |spans| {
            spans.iter().any(|s| s.kind == span_kind::SERVER)
        })
        .await;
    let root = one(&spans, "the failed call's span", |s| {
        s.kind == span_kind::SERVER
    });
    assert_eq!(root.name, "tools/call crm__fail");
    assert_eq!(root.parent_span_id, parent, "continued from _meta");
    assert_eq!(root.attr("error.type"), Some("tool_error"));
    assert_eq!(root.status_code, 2, "error status");
    assert_eq!(root.attr("airlock.outcome"), Some("failed"));
    assert!(root.attr("airlock.error.kind").is_some(), "{root:#?}");
}

/// OPS-23: an unknown tool's name never becomes a span name; a JSON-RPC error is its code.
/// EGRESS-35: a request the guard refuses is a client span with the refusal as `error.type`,
/// and `url.full` without its query.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_spans_with_their_error_type() {
    let collector = Collector::start().await;
    let upstream = Upstream::start(Script::default()).await;
    let telemetry = format!("[telemetry]\nendpoint = \"{}\"\n", collector.endpoint());
    let dir = deployment(&upstream.loopback_url(), &telemetry);
    let server = serve(dir.path());

    let trace = "11111111111111111111111111111111";
    let header = format!("00-{trace}-2222222222222222-01");
    call(&server, 1, "no_such_tool_x9", Some(&header), None).await;
    let spans = collector
        .trace(trace, Duration::from_secs(20), |s| !s.is_empty())
        .await;
    let root = one(&spans, "the refused call", |s| s.kind == span_kind::SERVER);
    assert_eq!(root.name, "tools/call");
    assert_eq!(root.attr("gen_ai.tool.name"), None);
    assert!(
        root.attr("error.type").unwrap().starts_with('-'),
        "{root:#?}"
    );

    let trace = "33333333333333333333333333333333";
    let header = format!("00-{trace}-4444444444444444-01");
    let arguments = json!({"url": "http://10.0.0.1/private?token=abc"});
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "fetch", "arguments": arguments}});
    mcp_request(&format!("http://{}", server.addr))
        .header("authorization", format!("Bearer {CLIENT}"))
        .header("traceparent", header)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let spans = collector
        .trace(trace, Duration::from_secs(20), |s| {
            s.iter().any(|s| s.kind == span_kind::CLIENT)
                && s.iter().any(|s| s.kind == span_kind::SERVER)
        })
        .await;
    let request = one(&spans, "the refused request", |s| {
        s.kind == span_kind::CLIENT
    });
    assert_eq!(request.attr("error.type"), Some("blocked_address"));
    assert_eq!(request.attr("url.full"), Some("http://10.0.0.1/private"));
    assert_eq!(request.status_code, 2);
}

/// The value of the series `name{labels…}` (every label given must match), if served.
fn series(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| {
            let (head, _) = l.rsplit_once(' ').unwrap_or_default();
            let metric = head.split('{').next().unwrap_or_default();
            metric == name
                && labels
                    .iter()
                    .all(|(k, v)| head.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// OPS-27 … OPS-31, LEDGER-39: latency histograms per tool and outcome, parks, decisions by
/// surface, open calls by state, in doubt, commit latency and batch size, egress blocks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_serve_latency_histograms_parks_decisions_and_ledger_gauges() {
    let upstream = Upstream::start(Script::default()).await;
    upstream.set_tools(vec![json!({"name": "echo", "description": "Echo."})]);
    let dir = deployment(&upstream.loopback_url(), "");
    let server = serve(dir.path());
    let base = format!("http://{}", server.addr);
    let before = metrics(&base, ADMIN).await;
    let duration = "airlock_tool_call_duration_seconds_count";
    let echo = [
        ("channel", "mcp"),
        ("tool", "crm__echo"),
        ("outcome", "succeeded"),
    ];
    assert_eq!(series(&before, duration, &echo), None, "{before}");

    call(&server, 1, "crm__echo", None, None).await;
    call(&server, 2, "crm__echo", None, None).await;
    let asked = mcp_request(&base)
        .header("authorization", format!("Bearer {CLIENT}"))
        .body(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "ask_human", "arguments": {"question": "Which warehouse?"}}}).to_string())
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    let id = asked["result"]["structuredContent"]["invocation_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{asked}"))
        .to_owned();
    let blocked = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "fetch", "arguments": {"url": "http://10.0.0.1/"}}});
    mcp_request(&base)
        .header("authorization", format!("Bearer {CLIENT}"))
        .body(blocked.to_string())
        .send()
        .await
        .unwrap();

    let after = metrics(&base, ADMIN).await;
    assert_eq!(series(&after, duration, &echo), Some(2.0), "{after}");
    let le = [
        ("tool", "crm__echo"),
        ("outcome", "succeeded"),
        ("le", "30"),
    ];
    let within_30s = series(&after, "airlock_tool_call_duration_seconds_bucket", &le);
    assert_eq!(within_30s, Some(2.0), "{after}");
    let parked = [("tool", "ask_human"), ("outcome", "parked")];
    assert_eq!(series(&after, duration, &parked), Some(1.0), "{after}");
    let parks = [("tool", "ask_human"), ("state", "awaiting_answer")];
    assert_eq!(series(&after, "airlock_parks_total", &parks), Some(1.0));
    assert_eq!(
        series(
            &after,
            "airlock_open_calls",
            &[("state", "awaiting_answer")]
        ),
        Some(1.0),
        "{after}"
    );
    assert_eq!(series(&after, "airlock_in_doubt_calls", &[]), Some(0.0));
    let commits = series(&after, "airlock_ledger_commit_duration_seconds_count", &[]).unwrap();
    assert!(commits >= 4.0, "{after}");
    let batched = series(&after, "airlock_ledger_commit_batch_size_count", &[]);
    assert_eq!(batched, Some(commits), "one batch size per commit");
    let blocks = [("kind", "blocked_address")];
    assert_eq!(
        series(&after, "airlock_egress_blocked_total", &blocks),
        Some(1.0)
    );

    // A person answers on the API: a decision by surface, and the open call is gone.
    let answered = reqwest::Client::new()
        .post(format!("{base}/v1/invocations/{id}/answer"))
        .bearer_auth(ADMIN)
        .json(&json!({"text": "Leeds"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        answered.status().as_u16(),
        200,
        "{}",
        answered.text().await.unwrap()
    );
    let last = metrics(&base, ADMIN).await;
    let decided = [("surface", "api"), ("decision", "answer")];
    assert_eq!(
        series(&last, "airlock_decisions_total", &decided),
        Some(1.0),
        "{last}"
    );
    assert_eq!(
        series(&last, "airlock_open_calls", &[("state", "awaiting_answer")]),
        Some(0.0)
    );
}

/// Sends SIGTERM to `server` and waits (at most 20 s) for it to exit; returns whether it exited
/// cleanly.
fn stop(server: &mut Server) -> bool {
    crate::support::sigterm(server.child.id());
    for _ in 0..200 {
        if let Some(status) = server.child.try_wait().unwrap() {
            return status.success();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("serve did not exit within 20 s of SIGTERM");
}

/// OPS-26: spans still queued when `serve` stops are exported before it exits (the batch
/// exporter's own period, 5 s, has not come yet).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_queued_at_shutdown_are_exported() {
    let collector = Collector::start().await;
    let upstream = Upstream::start(Script::default()).await;
    upstream.set_tools(vec![json!({"name": "echo", "description": "Echo."})]);
    let telemetry = format!("[telemetry]\nendpoint = \"{}\"\n", collector.endpoint());
    let dir = deployment(&upstream.loopback_url(), &telemetry);
    let mut server = Server::start(dir.path(), &[]);
    let trace = "55555555555555555555555555555555";
    let header = format!("00-{trace}-6666666666666666-01");
    call(&server, 1, "crm__echo", Some(&header), None).await;
    assert!(stop(&mut server));
    let exported = collector.spans();
    assert!(
        exported
            .iter()
            .any(|s| s.trace_id == trace && s.kind == span_kind::SERVER),
        "{exported:#?}"
    );
}

/// EGRESS-35: the exporter's requests go through the egress guard: a `deny` naming the
/// collector wins over its implicit allowance, and nothing reaches it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exporter_obeys_the_egress_deny_list() {
    let collector = Collector::start().await;
    let upstream = Upstream::start(Script::default()).await;
    upstream.set_tools(vec![json!({"name": "echo", "description": "Echo."})]);
    let telemetry = format!(
        "[telemetry]\nendpoint = \"http://localhost:{}\"\n",
        collector.port
    );
    let dir = deployment(&upstream.loopback_url(), &telemetry);
    let toml = std::fs::read_to_string(dir.path().join("airlock.toml")).unwrap();
    let toml = toml.replace("[egress]\n", "[egress]\ndeny = [\"localhost\"]\n");
    std::fs::write(dir.path().join("airlock.toml"), toml).unwrap();
    let mut server = Server::start(dir.path(), &[]);
    let header = "00-77777777777777777777777777777777-8888888888888888-01";
    call(&server, 1, "crm__echo", Some(header), None).await;
    assert!(stop(&mut server));
    assert!(collector.spans().is_empty(), "{:#?}", collector.spans());
    assert!(collector.headers().is_empty());
}

/// DECL-62: a header whose credential does not resolve stops the boot, naming the header (as
/// `airlock check` names it, OPS-70: at its file, line and key).
#[test]
fn a_missing_header_credential_stops_the_boot() {
    let telemetry = "[telemetry]\nendpoint = \"http://127.0.0.1:4318\"\n[telemetry.headers]\nx-api-key = \"otel.missing\"\n";
    let dir = deployment("http://127.0.0.1:9/mcp", telemetry);
    // Discovery would fail first on a closed upstream: the connection file goes.
    std::fs::remove_dir_all(dir.path().join("connections")).unwrap();
    let out = crate::airlock()
        .arg("serve")
        .arg(dir.path())
        .args(["--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = crate::text(&out);
    assert!(text.contains("telemetry.headers.x-api-key"), "{text}");
    assert!(
        text.contains("credential `otel.missing` is missing"),
        "{text}"
    );
}
