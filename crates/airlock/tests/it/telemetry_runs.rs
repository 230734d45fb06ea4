//! Traces of agent runs, decisions and the workers of a real `airlock serve` (docs/rules.md
//! OPS-80 … OPS-82): the spans a loopback OTLP collector decodes, from the run API's request
//! through each step's model request and tool call down to the upstream's HTTP request.

use std::net::SocketAddr;
use std::time::Duration;

use airlock_testkit::{
    Collector, Cue, ExportedSpan, FAKE_INPUT_TOKENS, FAKE_OUTPUT_TOKENS, FAKE_RESPONSE_MODEL,
    FakeCall, FakeModel, ModelReply, RawServer, span_kind,
};
use serde_json::{Value, json};

use crate::runs::{CALLER, CAROL_GATEWAY, helper_deployment, until_status};
use crate::serve::ADMIN;
use crate::support::{Server, cli, mcp_request};

/// Words of the run's input no span may show.
const INPUT: &str = "input-marker-never-in-a-span";
/// An argument the model passes to a tool: no span may show it.
const ARGUMENT: &str = "argument-marker-never-in-a-span";
/// The model's answer: no span may show it.
const ANSWER: &str = "answer-marker-never-in-a-span";
/// The configured credential of connection `erp` (see `helper_deployment`).
const ERP_TOKEN: &str = "configured-erp-token";

/// `helper_deployment` traced to `collector`, served with the batch exporter flushing every
/// 50 ms.
fn serve(model: &FakeModel, erp: &RawServer, collector: &Collector) -> (tempfile::TempDir, Server) {
    serve_with(model, erp, collector, "")
}

/// [`serve`] with `extra` appended to `airlock.toml`.
fn serve_with(
    model: &FakeModel,
    erp: &RawServer,
    collector: &Collector,
    extra: &str,
) -> (tempfile::TempDir, Server) {
    let erp = format!("http://127.0.0.1:{}", erp.port);
    let dir = helper_deployment(&model.endpoint(), &erp);
    let toml = dir.path().join("airlock.toml");
    let mut text = std::fs::read_to_string(&toml).unwrap();
    text.push_str(&format!(
        "{extra}[telemetry]\nendpoint = \"{}\"\n",
        collector.endpoint()
    ));
    std::fs::write(&toml, text).unwrap();
    let mut command = Server::command(dir.path(), &[]);
    command
        .env("NO_COLOR", "1")
        .env("OTEL_BSP_SCHEDULE_DELAY", "50");
    let server = Server::spawn(command);
    (dir, server)
}

/// `POST path` with `token`, a JSON `body` and optionally a `traceparent`.
async fn post(
    addr: SocketAddr,
    path: &str,
    token: &str,
    body: &Value,
    traceparent: Option<&str>,
) -> Value {
    let mut request = reqwest::Client::new()
        .post(format!("http://{addr}{path}"))
        .bearer_auth(token)
        .json(body);
    if let Some(value) = traceparent {
        request = request.header("traceparent", value);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    response.json().await.unwrap()
}

fn one<'a>(spans: &'a [ExportedSpan], name: &str) -> &'a ExportedSpan {
    let found: Vec<_> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(found.len(), 1, "{name}: {spans:#?}");
    found[0]
}

fn children<'a>(spans: &'a [ExportedSpan], parent: &ExportedSpan) -> Vec<&'a ExportedSpan> {
    spans
        .iter()
        .filter(|s| s.parent_span_id == parent.span_id)
        .collect()
}

/// No attribute of any span holds one of `markers`.
fn assert_nothing_shown(spans: &[ExportedSpan], markers: &[&str]) {
    for span in spans {
        for value in span.attributes.values() {
            for marker in markers {
                assert!(!value.contains(marker), "{marker} in {span:#?}");
            }
        }
    }
}

/// OPS-80, OPS-81: one trace from `POST /v1/agents/{name}/run` (continuing the caller's
/// `traceparent`) through the run, its steps, the model requests (GenAI `chat` spans) and the
/// tool call, down to the upstream's HTTP request; nothing of the input, the arguments, the
/// answer or a credential in any attribute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traced_run_is_one_trace_from_the_request_to_the_upstream() {
    let collector = Collector::start().await;
    let erp = RawServer::start(Some("no-such-method"), Cue::Status(500)).await;
    let call = FakeCall::new("call_1", "erp_lookup", &json!({"id": ARGUMENT}));
    let model = FakeModel::openai(vec![
        ModelReply::calls(vec![call]),
        ModelReply::text(&[ANSWER]),
    ])
    .await;
    let (_dir, server) = serve(&model, &erp, &collector);
    let addr: SocketAddr = server.addr.parse().unwrap();

    let trace = "5bf92f3577b34da6a3ce929d0e0e4731";
    let parent = "10f067aa0ba902b7";
    let header = format!("00-{trace}-{parent}-01");
    let body = json!({"input": format!("Who is {INPUT}?")});
    let run = post(addr, "/v1/agents/helper/run", CALLER, &body, Some(&header)).await;
    assert_eq!(run["status"], "completed", "{run}");
    let spans = collector
        .trace(trace, Duration::from_secs(20), |spans| {
            spans.iter().any(|s| s.kind == span_kind::SERVER)
                && spans.iter().filter(|s| s.name.starts_with("step ")).count() >= 2
        })
        .await;

    let request = one(&spans, "POST /v1/agents/{name}/run");
    assert_eq!(request.kind, span_kind::SERVER);
    assert_eq!(request.parent_span_id, parent, "continued from the header");
    assert_eq!(request.attr("http.route"), Some("/v1/agents/{name}/run"));
    assert_eq!(request.attr("http.response.status_code"), Some("200"));

    let agent = one(&spans, "invoke_agent helper");
    assert_eq!(agent.parent_span_id, request.span_id);
    assert_eq!(agent.attr("gen_ai.operation.name"), Some("invoke_agent"));
    assert_eq!(agent.attr("gen_ai.agent.name"), Some("helper"));
    assert_eq!(agent.attr("airlock.run.id"), run["run_id"].as_str());
    assert_eq!(agent.attr("airlock.run.status"), Some("completed"));

    let first = one(&spans, "step 1");
    let second = one(&spans, "step 2");
    for step in [first, second] {
        assert_eq!(step.parent_span_id, agent.span_id);
    }
    let chats: Vec<_> = spans.iter().filter(|s| s.name == "chat gpt-test").collect();
    assert_eq!(chats.len(), 2, "{spans:#?}");
    for (chat, step, reason) in [(chats[0], first, "tool_calls"), (chats[1], second, "stop")] {
        let chat = if chat.parent_span_id == step.span_id {
            chat
        } else {
            chats
                .iter()
                .find(|c| c.parent_span_id == step.span_id)
                .unwrap()
        };
        assert_eq!(chat.kind, span_kind::CLIENT);
        assert_eq!(chat.attr("gen_ai.operation.name"), Some("chat"));
        assert_eq!(chat.attr("gen_ai.provider.name"), Some("openai"));
        assert_eq!(chat.attr("gen_ai.request.model"), Some("gpt-test"));
        assert_eq!(
            chat.attr("gen_ai.response.model"),
            Some(FAKE_RESPONSE_MODEL)
        );
        let tokens = |key| chat.attr(key).map(|v| v.parse::<u64>().unwrap());
        assert_eq!(tokens("gen_ai.usage.input_tokens"), Some(FAKE_INPUT_TOKENS));
        assert_eq!(
            tokens("gen_ai.usage.output_tokens"),
            Some(FAKE_OUTPUT_TOKENS)
        );
        let reasons = chat.attr("gen_ai.response.finish_reasons").unwrap();
        assert!(reasons.contains(reason), "{chat:#?}");
        // The provider's request is the chat span's child.
        let sent = children(&spans, chat);
        assert!(
            sent.iter().any(|s| s.kind == span_kind::CLIENT
                && s.attr("http.request.method") == Some("POST")
                && s.attr("url.full") == Some(&format!("{}/chat/completions", model.endpoint()))),
            "{sent:#?}"
        );
    }

    let tool = one(&spans, "execute_tool erp_lookup");
    assert_eq!(
        tool.parent_span_id, first.span_id,
        "the call is under its step"
    );
    assert_eq!(tool.attr("gen_ai.tool.name"), Some("erp_lookup"));
    assert_eq!(tool.attr("gen_ai.tool.call.id"), Some("call_1"));
    assert_eq!(tool.attr("airlock.outcome"), Some("succeeded"));
    assert!(tool.attr("airlock.invocation.id").is_some(), "{tool:#?}");
    let below = children(&spans, tool);
    let upstream = below
        .iter()
        .find(|s| s.kind == span_kind::CLIENT)
        .unwrap_or_else(|| panic!("{below:#?}"));
    assert_eq!(upstream.attr("http.request.method"), Some("GET"));
    let customers = format!("http://127.0.0.1:{}/customers", erp.port);
    assert_eq!(upstream.attr("url.full"), Some(customers.as_str()));
    assert!(
        below.iter().any(|s| s.name == "ledger commit"),
        "{below:#?}"
    );

    // Every span is of this one trace, and none shows what the run carried.
    assert!(spans.iter().all(|s| s.trace_id == trace));
    let others: Vec<_> = collector
        .spans()
        .into_iter()
        .filter(|s| s.trace_id != trace && s.name.contains("agent"))
        .collect();
    assert!(others.is_empty(), "{others:#?}");
    assert_nothing_shown(
        &collector.spans(),
        &[INPUT, ARGUMENT, ANSWER, ERP_TOKEN, FakeModel::KEY, CALLER],
    );
}

/// OPS-82: a decision on the API is a `decide approve` span naming its surface and decider,
/// continuing nobody's trace, and a refused one names the refusal; the resume worker's resumed
/// run is a trace of its own, one `invoke_agent` span per resume.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_and_the_resume_worker_are_spans() {
    let collector = Collector::start().await;
    let erp = RawServer::start(Some("no-such-method"), Cue::Status(500)).await;
    let url = format!("http://127.0.0.1:{}/page?secret={ARGUMENT}", erp.port);
    let fetch = FakeCall::new("call_1", "fetch", &json!({"url": url}));
    let model = FakeModel::openai(vec![
        ModelReply::calls(vec![fetch]),
        ModelReply::text(&[ANSWER]),
    ])
    .await;
    let (_dir, server) = serve(&model, &erp, &collector);
    let addr: SocketAddr = server.addr.parse().unwrap();

    let run = post(
        addr,
        "/v1/agents/helper/run",
        CALLER,
        &json!({"input": INPUT}),
        None,
    )
    .await;
    assert_eq!(run["status"], "parked", "{run}");
    let id = run["run_id"].as_str().unwrap();
    let parked = run["waiting"][0]
        .as_str()
        .unwrap_or_else(|| panic!("{run}"))
        .to_owned();
    let path = format!("/v1/invocations/{parked}/approve");
    post(addr, &path, ADMIN, &json!({}), None).await;
    until_status(addr, id, "completed").await;

    let find = |name: &'static str| {
        let collector = &collector;
        async move {
            for _ in 0..400 {
                let found: Vec<_> = collector
                    .spans()
                    .into_iter()
                    .filter(|s| s.name == name)
                    .collect();
                if !found.is_empty() {
                    return found;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            panic!("no span {name}: {:#?}", collector.spans());
        }
    };
    // A second decision is refused: its span names the ledger's refusal.
    let again = reqwest::Client::new()
        .post(format!("http://{addr}{path}"))
        .bearer_auth(ADMIN)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status().as_u16(), 409);
    let mut decided = Vec::new();
    for _ in 0..400 {
        decided = find("decide approve").await;
        if decided.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let refused = decided
        .iter()
        .find(|s| s.attr("error.type").is_some())
        .unwrap_or_else(|| panic!("{decided:#?}"));
    assert_eq!(refused.attr("error.type"), Some("already_decided"));
    assert_eq!(refused.status_code, 2);
    let decided = decided
        .iter()
        .find(|s| s.attr("error.type").is_none())
        .unwrap();
    assert_eq!(decided.parent_span_id, "", "a trace of its own");
    assert_eq!(decided.attr("airlock.decision.surface"), Some("api"));
    assert_eq!(decided.attr("airlock.decision.by"), Some("alice"));
    assert_eq!(decided.attr("airlock.invocation.id"), Some(parked.as_str()));

    let runs = find("invoke_agent helper").await;
    let resumed: Vec<_> = runs
        .iter()
        .filter(|s| s.attr("airlock.run.resumed") == Some("true"))
        .collect();
    assert_eq!(resumed.len(), 1, "{runs:#?}");
    let resumed = resumed[0];
    assert_eq!(
        resumed.parent_span_id, "",
        "the worker's unit of work begins a trace"
    );
    assert_eq!(resumed.attr("airlock.run.id"), Some(id));
    assert_eq!(resumed.attr("airlock.run.status"), Some("completed"));
    let resumed_trace: Vec<_> = collector
        .spans()
        .into_iter()
        .filter(|s| s.trace_id == resumed.trace_id)
        .collect();
    assert!(
        resumed_trace.iter().any(|s| s.name == "execute_tool fetch"),
        "{resumed_trace:#?}"
    );
    assert_nothing_shown(
        &collector.spans(),
        &[INPUT, ARGUMENT, ANSWER, FakeModel::KEY, CALLER, ADMIN],
    );
}

/// OPS-80: a run over the WebSocket is a server span `GET /v1/agents/{name}/ws`, continuing the
/// upgrade request's `traceparent`, with the run below it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_over_the_websocket_continues_the_upgrade_requests_trace() {
    use futures::{SinkExt as _, StreamExt as _};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

    let collector = Collector::start().await;
    let erp = RawServer::start(Some("no-such-method"), Cue::Status(500)).await;
    let model = FakeModel::openai(vec![ModelReply::text(&[ANSWER])]).await;
    let (_dir, server) = serve(&model, &erp, &collector);

    let trace = "6bf92f3577b34da6a3ce929d0e0e4732";
    let parent = "20f067aa0ba902b7";
    let mut request = format!("ws://{}/v1/agents/helper/ws", server.addr)
        .into_client_request()
        .unwrap();
    let headers = request.headers_mut();
    headers.insert("authorization", format!("Bearer {CALLER}").parse().unwrap());
    let traceparent = format!("00-{trace}-{parent}-01");
    headers.insert("traceparent", traceparent.parse().unwrap());
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let body = json!({"input": INPUT}).to_string();
    socket.send(Message::Text(body.into())).await.unwrap();
    // Until the server closes: the run is over.
    while let Some(Ok(message)) = socket.next().await {
        if let Message::Close(_) = message {
            break;
        }
    }

    let spans = collector
        .trace(trace, Duration::from_secs(20), |spans| {
            spans.iter().any(|s| s.kind == span_kind::SERVER)
                && spans.iter().any(|s| s.name == "invoke_agent helper")
        })
        .await;
    let request = one(&spans, "GET /v1/agents/{name}/ws");
    assert_eq!(request.kind, span_kind::SERVER);
    assert_eq!(request.parent_span_id, parent);
    assert_eq!(request.attr("http.response.status_code"), Some("101"));
    let agent = one(&spans, "invoke_agent helper");
    assert_eq!(agent.parent_span_id, request.span_id);
    assert_eq!(agent.attr("airlock.run.status"), Some("completed"));
    assert_nothing_shown(&spans, &[INPUT, ANSWER, FakeModel::KEY, CALLER]);
}

/// Parks a gated `fetch` of `erp`'s page in the gateway scope (JSON-RPC id `n`); its id.
async fn park_fetch(server: &Server, erp: &RawServer, n: u64) -> String {
    let url = format!("http://127.0.0.1:{}/page?secret={ARGUMENT}", erp.port);
    let body = json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
        "params": {"name": "fetch", "arguments": {"url": url}}});
    let parked: Value = mcp_request(&format!("http://{}", server.addr))
        .bearer_auth(CAROL_GATEWAY)
        .body(body.to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    parked["result"]["structuredContent"]["invocation_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{parked}"))
        .to_owned()
}

/// OPS-82: an approval taken in another process (the CLI, untraced) is run by the serving
/// process's decisions worker in a trace of its own: one `run approved call` span, the call's
/// upstream request below it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_decisions_worker_runs_each_approved_call_in_a_trace_of_its_own() {
    let collector = Collector::start().await;
    let erp = RawServer::start(Some("no-such-method"), Cue::Status(500)).await;
    let model = FakeModel::openai(Vec::new()).await;
    let gated = "[builtins.fetch]\napproval = \"always\"\n";
    let (dir, server) = serve_with(&model, &erp, &collector, gated);
    let id = park_fetch(&server, &erp, 1).await;
    let out = cli(dir.path(), &["approve", &id]);
    assert!(out.status.success(), "{}", crate::text(&out));

    let mut ran = Vec::new();
    for _ in 0..400 {
        ran = collector
            .spans()
            .into_iter()
            .filter(|s| s.name == "run approved call")
            .collect();
        if !ran.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(ran.len(), 1, "{:#?}", collector.spans());
    let ran = &ran[0];
    assert_eq!(ran.parent_span_id, "", "a trace of its own");
    assert_eq!(ran.attr("airlock.invocation.id"), Some(id.as_str()));
    let spans = collector
        .trace(&ran.trace_id, Duration::from_secs(20), |spans| {
            spans.iter().any(|s| s.kind == span_kind::CLIENT)
        })
        .await;
    let page = format!("http://127.0.0.1:{}/page", erp.port);
    let request = spans
        .iter()
        .find(|s| s.kind == span_kind::CLIENT)
        .unwrap_or_else(|| panic!("{spans:#?}"));
    assert_eq!(request.parent_span_id, ran.span_id);
    assert_eq!(request.attr("url.full"), Some(page.as_str()));
    // The CLI's decision is not traced: no `decide` span.
    assert!(
        !collector
            .spans()
            .iter()
            .any(|s| s.name.starts_with("decide "))
    );
    assert_nothing_shown(&collector.spans(), &[ARGUMENT, CAROL_GATEWAY]);
}

/// OPS-80, OPS-81: a provider's refusal is the chat span's `error.type` (the MODEL error kind)
/// and an error status; the failed run's span says so too; the provider's message is no
/// attribute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_model_request_is_an_error_span() {
    let collector = Collector::start().await;
    let erp = RawServer::start(Some("no-such-method"), Cue::Status(500)).await;
    let refusal = "refusal-marker-never-in-a-span";
    let model = FakeModel::openai(vec![ModelReply::error(400, refusal)]).await;
    let (_dir, server) = serve(&model, &erp, &collector);
    let addr: SocketAddr = server.addr.parse().unwrap();
    let trace = "7bf92f3577b34da6a3ce929d0e0e4733";
    let header = format!("00-{trace}-30f067aa0ba902b7-01");
    let body = json!({"input": INPUT});
    let run = post(addr, "/v1/agents/helper/run", CALLER, &body, Some(&header)).await;
    assert_eq!(run["status"], "failed", "{run}");
    let spans = collector
        .trace(trace, Duration::from_secs(20), |spans| {
            spans.iter().any(|s| s.kind == span_kind::SERVER)
        })
        .await;
    let chat = one(&spans, "chat gpt-test");
    assert_eq!(chat.attr("error.type"), Some("provider"));
    assert_eq!(chat.status_code, 2, "error status");
    let agent = one(&spans, "invoke_agent helper");
    assert_eq!(agent.attr("airlock.run.status"), Some("failed"));
    assert_eq!(agent.attr("error.type"), Some("run_failed"));
    assert_nothing_shown(&spans, &[refusal, INPUT]);
}

/// OPS-82: a batch decision (DECIDE-19) is one `decide approve` span without an invocation id;
/// the calls it approved run in its trace (or, claimed first by the worker, in the worker's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_decision_is_one_span_with_its_calls_under_it() {
    let collector = Collector::start().await;
    let erp = RawServer::start(Some("no-such-method"), Cue::Status(500)).await;
    let model = FakeModel::openai(Vec::new()).await;
    let gated = "[builtins.fetch]\napproval = \"always\"\n";
    let (_dir, server) = serve_with(&model, &erp, &collector, gated);
    let addr: SocketAddr = server.addr.parse().unwrap();
    let ids = [
        park_fetch(&server, &erp, 1).await,
        park_fetch(&server, &erp, 2).await,
    ];
    let body = json!({"ids": ids, "decision": "approve"});
    post(addr, "/v1/approvals/decisions", ADMIN, &body, None).await;

    let page = format!("http://127.0.0.1:{}/page", erp.port);
    // A span is exported when it ends: a worker's `run approved call` ends after the request it
    // made, so the look waits for each request's trace to be accounted for, not just for the
    // requests.
    let accounted = |spans: &[ExportedSpan]| {
        let roots: Vec<&str> = spans
            .iter()
            .filter(|s| s.name == "run approved call" || s.name == "decide approve")
            .map(|s| s.trace_id.as_str())
            .collect();
        let requests: Vec<_> = spans
            .iter()
            .filter(|s| s.attr("url.full") == Some(page.as_str()))
            .collect();
        requests.len() == 2
            && requests
                .iter()
                .all(|r| roots.contains(&r.trace_id.as_str()))
    };
    let mut spans = Vec::new();
    for _ in 0..400 {
        spans = collector.spans();
        if accounted(&spans) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let decided = one(&spans, "decide approve");
    assert_eq!(decided.attr("airlock.invocation.id"), None);
    assert_eq!(decided.attr("airlock.decision.surface"), Some("api"));
    // Each approved call runs once, under the decision — or under the worker's span when the
    // worker claimed it first (whoever claims first runs it, DECIDE-13).
    let worker_traces: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "run approved call")
        .map(|s| s.trace_id.clone())
        .collect();
    let requests: Vec<_> = spans
        .iter()
        .filter(|s| s.attr("url.full") == Some(page.as_str()))
        .collect();
    assert_eq!(requests.len(), 2, "{spans:#?}");
    for request in requests {
        let traced =
            request.trace_id == decided.trace_id || worker_traces.contains(&request.trace_id);
        assert!(traced, "{request:#?}");
    }
    assert_nothing_shown(&spans, &[ARGUMENT, ADMIN, CAROL_GATEWAY]);
}
