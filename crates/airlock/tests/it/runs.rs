//! The run API, its WebSocket and `airlock run` against real parts (docs/rules.md AGENT-40 …
//! AGENT-52, AGENT-67 … AGENT-70, MODEL-14, OPS-20): a fake OpenAI-compatible provider and a
//! loopback tenant API that count what they are asked, `airlock serve` as a child process where a
//! restart or the logs matter.

mod access;
mod confirm;
mod outcome;
mod owner;
mod ws;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use airlock_testkit::{Cue, FakeCall, FakeModel, ModelReply, RawServer};
use serde_json::{Value, json};

use crate::serve::ADMIN;
use crate::support::{Server, cli, deployment_with, http, serve_in_process};

/// A token of `[[mcp.tokens]]` granted `agent:helper` (principal `carol`).
pub(crate) const CALLER: &str = "caller-token-5f1d3c0e8a9b4c7d";
/// `carol`'s other token, granted only the gateway scope.
pub(crate) const CAROL_GATEWAY: &str = "carol-gateway-token-3e8d0c51";
/// A token granted only the gateway scope.
const GATEWAY_ONLY: &str = "gateway-token-2b7e151628aed2a6";
/// A token without `scopes`: every scope.
const EVERY_SCOPE: &str = "every-scope-token-9c4f1a7d";
/// The credential a run supplies for its `erp` connection: it must appear nowhere.
const SUPPLIED_SECRET: &str = "supplied-erp-secret-6d2f9a0b3e";

/// A deployment with agent `helper` on a fake OpenAI provider at `model`: tool `erp_lookup`
/// (a GET on connection `erp`, whose configured base URL is `erp`) and `fetch` (gated).
pub(crate) fn helper_deployment(model: &str, erp: &str) -> tempfile::TempDir {
    let toml = format!(
        "listen = \"127.0.0.1:0\"\n\
         [[mcp.tokens]]\ncredential = \"airlock.caller\"\nprincipal = \"carol\"\nscopes = [\"agent:helper\"]\n\
         [[mcp.tokens]]\ncredential = \"airlock.gateway\"\nprincipal = \"gus\"\nscopes = [\"gateway\"]\n\
         [[mcp.tokens]]\ncredential = \"airlock.carol_gateway\"\nprincipal = \"carol\"\nscopes = [\"gateway\"]\n\
         [[mcp.tokens]]\ncredential = \"airlock.every\"\nprincipal = \"root\"\n\
         [[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"alice\"\n\
         [egress]\nallow = [\"127.0.0.1/32\"]\nallow_fetch = true\n\
         [credentials]\nfile = \"creds.yml\"\n\
         [connections.erp]\nuse_egress_allow = true\nbase_url = \"{erp}\"\ncredential = \"erp.token\"\n"
    );
    let creds = format!(
        "airlock:\n  caller: {CALLER}\n  carol_gateway: {CAROL_GATEWAY}\n  gateway: {GATEWAY_ONLY}\n  every: {EVERY_SCOPE}\n  admin: {ADMIN}\nopenai:\n  key: {}\nerp:\n  token: configured-erp-token\n",
        FakeModel::KEY
    );
    let dir = deployment_with(&toml, &creds);
    let agents = dir.path().join("agents");
    std::fs::create_dir(&agents).unwrap();
    let manifest = format!(
        "apiVersion: airlock/v1\nkind: Agent\nmetadata:\n  name: helper\n  description: Looks customers up.\n\
         spec:\n  model:\n    provider: openai\n    model: gpt-test\n    endpoint: {model}\n    credential: openai.key\n\
         \x20 prompts:\n    system: Help.\n  tools:\n\
         \x20   - name: erp\n      type: api\n      connection: erp\n      auth: {{ scheme: bearer }}\n      operations:\n\
         \x20       - name: lookup\n          description: Find a customer.\n          writes: false\n\
         \x20         parameters:\n            id: {{ type: string, required: true }}\n\
         \x20         request: {{ method: GET, path: /customers, query: {{ id: \"{{id}}\" }} }}\n\
         \x20   - type: builtin\n      name: fetch\n      approval: always\n"
    );
    std::fs::write(agents.join("helper.yml"), manifest).unwrap();
    dir
}

/// A turn calling `erp_lookup` for customer 7.
fn lookup() -> ModelReply {
    ModelReply::calls(vec![FakeCall::new(
        "call_1",
        "erp_lookup",
        &json!({"id": "7"}),
    )])
}

/// An upstream answering every request `{"done": true}` and remembering its path.
async fn upstream() -> RawServer {
    RawServer::start(Some("no-such-method"), Cue::Status(500)).await
}

/// `POST /v1/agents/{agent}/run` with `token`.
async fn start_run(addr: SocketAddr, agent: &str, token: &str, body: Value) -> (u16, Value) {
    let path = format!("/v1/agents/{agent}/run");
    let (status, body, _) = http(addr, "POST", &path, Some(token), Some(body)).await;
    (status, body)
}

/// `GET /v1/runs/{id}` with `token`.
async fn read_run(addr: SocketAddr, id: &str, token: &str) -> (u16, Value) {
    let (status, body, _) = http(addr, "GET", &format!("/v1/runs/{id}"), Some(token), None).await;
    (status, body)
}

/// Waits (bounded) until run `id` has `status`; the run as read last.
pub(crate) async fn until_status(addr: SocketAddr, id: &str, status: &str) -> Value {
    let mut run = Value::Null;
    for _ in 0..500 {
        run = read_run(addr, id, CALLER).await.1;
        if run["status"] == status {
            return run;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("run {id} never became {status}: {run}");
}

/// Every byte of the SQLite ledger's files in `dir` (database, WAL, shared memory).
fn ledger_bytes(dir: &Path) -> Vec<u8> {
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("airlock.sqlite") && path.is_file() {
            bytes.extend(std::fs::read(&path).unwrap());
        }
    }
    assert!(!bytes.is_empty(), "no ledger in {}", dir.display());
    bytes
}

#[tokio::test]
async fn a_run_answers_its_report_and_its_supplied_credential_is_nowhere() {
    // AGENT-42, AGENT-43, AGENT-44, against a real `serve` logging at debug.
    let model = FakeModel::openai(vec![
        lookup(),
        ModelReply::text(&["Customer 7 ", "is Ada."]),
    ])
    .await;
    let erp = upstream().await;
    // airlock.toml's `erp` (vouched for) is the same destination under another path: a caller
    // may re-point a vouched connection's path and credential, never its destination (EGRESS-38).
    let configured = format!("http://127.0.0.1:{}/configured", erp.port);
    let dir = helper_deployment(&model.endpoint(), &configured);
    let mut command = Server::command(dir.path(), &[]);
    command.env("NO_COLOR", "1").env("AIRLOCK_LOG", "debug");
    let server = Server::spawn(command);
    let addr: SocketAddr = server.addr.parse().unwrap();

    let supplied = format!("http://127.0.0.1:{}", erp.port);
    let body = json!({
        "input": "Who is customer 7?",
        "context": {"channel": "test"},
        "connections": {"erp": {"base_url": supplied, "credential": SUPPLIED_SECRET}},
    });
    let (status, run) = start_run(addr, "helper", CALLER, body).await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["answer"], "Customer 7 is Ada.");
    assert_eq!(run["proposals"], json!([]), "always present (AGENT-44)");
    assert_eq!(run["steps"], 2);
    assert_eq!(run["usage"]["output_tokens"], 10, "{run}");
    assert_eq!(run["invocations"].as_array().unwrap().len(), 1, "{run}");
    for key in ["run_id", "session_id"] {
        assert!(run[key].is_string(), "{key}: {run}");
    }
    // The supplied connection was used (the configured one's path is `/configured`).
    assert_eq!(erp.seen(), ["/customers?id=7"]);
    assert_eq!(model.requests(), 2);

    // The credential is in no ledger file, no log line, no answer, nothing the model saw.
    let ledger = String::from_utf8_lossy(&ledger_bytes(dir.path())).into_owned();
    assert!(
        !ledger.contains(SUPPLIED_SECRET),
        "the ledger holds the credential"
    );
    let (_, read) = read_run(addr, run["run_id"].as_str().unwrap(), CALLER).await;
    assert_eq!(read, run, "GET answers what the run answered");
    let log = server.log().join("\n");
    assert!(log.contains("run started"), "{log}");
    assert!(
        !log.contains(SUPPLIED_SECRET),
        "a log line holds the credential"
    );
    let seen_by_model = serde_json::to_string(&model.bodies()).unwrap();
    assert!(!seen_by_model.contains(SUPPLIED_SECRET));
    assert!(!run.to_string().contains(SUPPLIED_SECRET));
}

#[tokio::test]
async fn a_provider_refusal_keeps_its_status_in_the_report_and_the_log() {
    // MODEL-14: a 401 from the provider (a wrong key) is not retried, and the run's report and
    // the operator's log both say 401 beside the provider's message.
    let model = FakeModel::openai(vec![ModelReply::error(401, "invalid x-api-key")]).await;
    let dir = helper_deployment(&model.endpoint(), "http://127.0.0.1:9");
    let server = Server::start(dir.path(), &[]);
    let addr: SocketAddr = server.addr.parse().unwrap();
    let (status, run) = start_run(addr, "helper", CALLER, json!({"input": "hi"})).await;
    assert_eq!((status, &run["status"]), (200, &json!("failed")), "{run}");
    assert_eq!(
        run["error"], "model: provider answered 401: invalid x-api-key",
        "{run}"
    );
    let (_, read) = read_run(addr, run["run_id"].as_str().unwrap(), CALLER).await;
    assert_eq!(read["error"], run["error"], "{read}");
    let line = server.await_log(&["the model's turn failed"], Duration::from_secs(10));
    assert!(
        line.contains("401") && line.contains("invalid x-api-key"),
        "{line}"
    );
    assert_eq!(model.requests(), 1, "a refusal is not retried");
}

#[tokio::test]
async fn bad_requests_are_refused_with_precise_statuses() {
    // AGENT-40, AGENT-41, AGENT-45, AGENT-48: nothing reaches the model.
    let model = FakeModel::openai(Vec::new()).await;
    let dir = helper_deployment(&model.endpoint(), "http://127.0.0.1:9");
    let (addr, _) = serve_in_process(dir.path()).await;
    let input = json!({"input": "hi"});

    let (status, _, head) = http(
        addr,
        "POST",
        "/v1/agents/helper/run",
        None,
        Some(input.clone()),
    )
    .await;
    assert_eq!(status, 401);
    assert!(head.contains("www-authenticate: bearer"), "{head}");
    assert_eq!(
        start_run(addr, "helper", "wrong", input.clone()).await.0,
        401
    );
    let (status, body) = start_run(addr, "helper", GATEWAY_ONLY, input.clone()).await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("\"agent:helper\""),
        "{body}"
    );
    // A token granted `agent:helper` is not granted another agent; one with every scope is
    // told the agent does not exist.
    assert_eq!(
        start_run(addr, "nobody", CALLER, input.clone()).await.0,
        403
    );
    let (status, body) = start_run(addr, "nobody", EVERY_SCOPE, input.clone()).await;
    assert_eq!(
        (status, &body["error"]),
        (404, &json!("not_found")),
        "{body}"
    );

    for (bad, field) in [
        (json!({}), "missing field `input`"),
        (json!({"input": "  "}), "`input` is empty"),
        (
            json!({"input": "x", "model": "gpt-5"}),
            "unknown field `model`",
        ),
        (json!({"input": "x", "session_id": "s-1"}), "`session_id`"),
        (json!({"input": SUPPLIED_SECRET, "context": 5}), "`context`"),
    ] {
        let (status, body) = start_run(addr, "helper", CALLER, bad.clone()).await;
        assert_eq!(
            (status, &body["error"]),
            (400, &json!("bad_body")),
            "{bad}: {body}"
        );
        let message = body["message"].as_str().unwrap();
        assert!(message.contains(field), "{bad}: {message}");
        assert!(!message.contains(SUPPLIED_SECRET), "{message}");
    }
    let url = format!("http://{addr}/v1/agents/helper/run");
    let client = reqwest::Client::new();
    let plain = client
        .post(&url)
        .bearer_auth(CALLER)
        .header("content-type", "text/plain")
        .body(input.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status().as_u16(), 415);
    let huge = json!({"input": "x".repeat(2 * 1024 * 1024)}).to_string();
    let big = client
        .post(&url)
        .bearer_auth(CALLER)
        .header("content-type", "application/json")
        .body(huge)
        .send()
        .await
        .unwrap();
    assert_eq!(big.status().as_u16(), 413);

    // Runs: 401 before anything is looked up, 400 for a malformed id, 404 for an unknown one.
    let unknown = airlock_ledger::RunId::new().to_string();
    let (status, _, _) = http(addr, "GET", &format!("/v1/runs/{unknown}"), None, None).await;
    assert_eq!(status, 401);
    assert_eq!(read_run(addr, "not-a-run", CALLER).await.0, 400);
    assert_eq!(read_run(addr, &unknown, CALLER).await.0, 404);
    assert_eq!(model.requests(), 0, "no bad request reached the model");
}

#[tokio::test]
async fn a_busy_session_is_409_naming_its_run_and_a_parked_run_can_be_cancelled() {
    // AGENT-46, AGENT-47 (and AGENT-9: the waiting call expires).
    let fetch = FakeCall::new("call_1", "fetch", &json!({"url": "http://127.0.0.1:9/"}));
    let model = FakeModel::openai(vec![ModelReply::calls(vec![fetch])]).await;
    let dir = helper_deployment(&model.endpoint(), "http://127.0.0.1:9");
    let (addr, _) = serve_in_process(dir.path()).await;

    let (status, parked) = start_run(addr, "helper", CALLER, json!({"input": "fetch it"})).await;
    assert_eq!(
        (status, &parked["status"]),
        (200, &json!("parked")),
        "{parked}"
    );
    let run_id = parked["run_id"].as_str().unwrap();
    let waiting = parked["waiting"][0].as_str().unwrap();

    let again = json!({"input": "and again", "session_id": parked["session_id"]});
    let (status, busy) = start_run(addr, "helper", CALLER, again).await;
    assert_eq!(
        (status, &busy["error"]),
        (409, &json!("session_busy")),
        "{busy}"
    );
    assert_eq!(busy["run_id"], run_id);
    assert!(busy["message"].as_str().unwrap().contains(run_id), "{busy}");

    // Reading and cancelling are the run's principal's (or an admin's, AGENT-67).
    let cancel = format!("/v1/runs/{run_id}/cancel");
    let (status, _, _) = http(addr, "POST", &cancel, Some(GATEWAY_ONLY), None).await;
    assert_eq!(status, 404);
    assert_eq!(read_run(addr, run_id, ADMIN).await.0, 200);
    let (status, cancelled, _) = http(addr, "POST", &cancel, Some(CALLER), None).await;
    assert_eq!(
        (status, &cancelled["status"]),
        (200, &json!("cancelled")),
        "{cancelled}"
    );
    let (_, row, _) = http(
        addr,
        "GET",
        &format!("/v1/invocations/{waiting}"),
        Some(ADMIN),
        None,
    )
    .await;
    assert_eq!(row["state"], "expired", "{row}");
    let (status, ended, _) = http(addr, "POST", &cancel, Some(CALLER), None).await;
    assert_eq!(
        (status, &ended["error"]),
        (409, &json!("run_ended")),
        "{ended}"
    );
    // The session is free again.
    model.push(ModelReply::text(&["Hello."]));
    let next = json!({"input": "hello", "session_id": parked["session_id"]});
    let (status, done) = start_run(addr, "helper", CALLER, next).await;
    assert_eq!(
        (status, &done["status"]),
        (200, &json!("completed")),
        "{done}"
    );
}

#[tokio::test]
async fn a_run_reads_back_after_a_restart() {
    // AGENT-45: the report comes from the ledger, in a new process, without asking anyone.
    let model = FakeModel::openai(vec![ModelReply::text(&["Hello."])]).await;
    let dir = helper_deployment(&model.endpoint(), "http://127.0.0.1:9");
    let server = Server::start(dir.path(), &[]);
    let (status, run) = start_run(
        server.addr.parse().unwrap(),
        "helper",
        CALLER,
        json!({"input": "hi"}),
    )
    .await;
    assert_eq!(
        (status, &run["status"]),
        (200, &json!("completed")),
        "{run}"
    );
    drop(server);

    let server = Server::start(dir.path(), &[]);
    let (status, read) = read_run(
        server.addr.parse().unwrap(),
        run["run_id"].as_str().unwrap(),
        CALLER,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(read, run);
    assert_eq!(model.requests(), 1);
}

#[tokio::test]
async fn a_parked_run_resumes_once_after_a_restart_and_an_approval_from_the_cli() {
    // AGENT-5, AGENT-7 through the surfaces: run over HTTP, park, kill `serve`, approve from the
    // CLI, start `serve` again: the run completes, and neither the provider nor the upstream
    // was asked anything twice.
    let erp = upstream().await;
    let page = format!("http://127.0.0.1:{}/page", erp.port);
    let first = ModelReply::calls(vec![
        FakeCall::new("call_1", "erp_lookup", &json!({"id": "7"})),
        FakeCall::new("call_2", "fetch", &json!({"url": page})),
    ]);
    let model = FakeModel::openai(vec![first, ModelReply::text(&["Both done."])]).await;
    let dir = helper_deployment(&model.endpoint(), &format!("http://127.0.0.1:{}", erp.port));
    let mut server = Server::start(dir.path(), &[]);
    let (status, parked) = start_run(
        server.addr.parse().unwrap(),
        "helper",
        CALLER,
        json!({"input": "look up 7 and read the page"}),
    )
    .await;
    assert_eq!(
        (status, &parked["status"]),
        (200, &json!("parked")),
        "{parked}"
    );
    assert_eq!(
        erp.seen(),
        ["/customers?id=7"],
        "the ungated call ran, the gated one waits"
    );
    server.child.kill().unwrap();
    server.child.wait().unwrap();

    let waiting = parked["waiting"][0].as_str().unwrap();
    let approved = cli(dir.path(), &["approve", waiting]);
    assert!(approved.status.success(), "{}", crate::text(&approved));

    let server = Server::start(dir.path(), &[]);
    let addr = server.addr.parse().unwrap();
    let done = until_status(addr, parked["run_id"].as_str().unwrap(), "completed").await;
    assert_eq!(done["answer"], "Both done.", "{done}");
    assert_eq!(done["steps"], 2);
    assert_eq!(model.requests(), 2, "one request per step, none repeated");
    assert_eq!(
        erp.seen(),
        ["/customers?id=7", "/page"],
        "each call ran once"
    );
}

#[test]
fn airlock_run_shows_the_quickstart_agent_at_work() {
    // AGENT-52, OPS-20: offline, on the bundled scripted model.
    let dir = tempfile::tempdir().unwrap();
    crate::quickstart::copy_dir(&crate::examples().join("quickstart"), dir.path());
    let run = |input: &str| cli(dir.path(), &["run", "concierge", input]);

    let drafted = run("Draft an order for me");
    let out = String::from_utf8_lossy(&drafted.stdout);
    assert_eq!(drafted.status.code(), Some(0), "{}", crate::text(&drafted));
    // OPS-5: the progress tells each step once; the log does not repeat it on stderr.
    let said = String::from_utf8_lossy(&drafted.stderr);
    assert!(
        !said.contains("run started") && !said.contains("recorded"),
        "{said}"
    );
    assert!(
        out.contains("→ orders_create_order {\"customer\":\"30-12345678-9\""),
        "{out}"
    );
    assert!(out.contains("It was NOT executed"), "{out}");
    assert!(out.contains("proposals (1; nothing executed"), "{out}");
    assert!(out.contains("\ncompleted (run "), "{out}");

    let parked = run("fetch the example page");
    let out = String::from_utf8_lossy(&parked.stdout);
    assert_eq!(parked.status.code(), Some(4), "{}", crate::text(&parked));
    let id = out
        .split("waits for a person (")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .unwrap_or_else(|| panic!("{out}"));
    let dir_word = std::path::absolute(dir.path()).unwrap();
    assert!(
        out.contains(&format!(
            "decide: airlock approve {id} --dir {}",
            dir_word.display()
        )),
        "{out}"
    );
    assert!(out.contains("\nparked (run "), "{out}");

    let json = cli(dir.path(), &["run", "concierge", "hello", "--json"]);
    let lines: Vec<Value> = String::from_utf8_lossy(&json.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(json.status.code(), Some(0));
    let last = lines.last().unwrap();
    assert_eq!(last["status"], "completed", "the report comes last: {last}");
    assert_eq!(lines[lines.len() - 2]["type"], "done");
    assert!(
        last["answer"].as_str().unwrap().contains("scripted model"),
        "{last}"
    );

    let unknown = cli(dir.path(), &["run", "nobody", "hi"]);
    assert_eq!(unknown.status.code(), Some(1), "{}", crate::text(&unknown));
}
