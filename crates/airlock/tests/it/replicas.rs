//! Two `airlock serve` processes on one PostgreSQL database (docs/rules.md OPS-35 … OPS-38,
//! DECIDE-15): a call parked through one replica is decided through the other's API or the CLI
//! and wakes its waiter on the first; an approved call runs once however many replicas race for
//! it; a replica killed mid-call is settled by the other's sweeper (in doubt, or re-run when
//! idempotent — never both); a parked agent run resumes once on whichever replica claims it;
//! a run whose replica is killed while it drives it is taken over and finished by the other,
//! repeating no model call and no completed tool call; and a rate limit is one budget for both. Each test has a database of its own.

use std::path::Path;
use std::time::{Duration, Instant};

use airlock_testkit::{Cue, FakeModel, ModelReply, RawServer, Script};
use serde_json::{Value, json};

use crate::support::{Server, cli, deployment_with, http, mcp_request};
use crate::text;

pub(crate) const ADMIN: &str = "admin-8f14e45fceea167a5a36dedd4bea2543";
pub(crate) const CLIENT: &str = "mcp-c9f0f895fb98ab9159f51fd0297e236d";
/// The token of `[[mcp.tokens]]` for agent `helper`'s runs, as the run tests use it.
const CALLER: &str = crate::runs::CALLER;

/// A fresh database on the test server (`AIRLOCK_TEST_DATABASE_URL`); `None` skips outside CI
/// when the variable is unset, and CI fails instead.
pub(crate) async fn fresh_database() -> Option<String> {
    let url = airlock_testkit::postgres_url()?;
    let name = format!("rep_{}", uuid_like());
    let admin = sqlx::PgPool::connect(&url).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
    let mut fresh = url::Url::parse(&url).unwrap();
    fresh.set_path(&name);
    Some(fresh.to_string())
}

/// 32 random hex digits: a database name no other test uses.
fn uuid_like() -> String {
    (0..4)
        .map(|_| format!("{:08x}", rand::random::<u32>()))
        .collect()
}

/// A deployment on `database`: connection files on the MCP `upstream` (`gated`: approval
/// always; `free`: never, at most once; `retry`: never, idempotent), api `tenant` on `api`
/// (3 calls an hour, shared), and agent `helper` on `model` with a gated `fetch` and, on the
/// upstream, `up_echo` (no approval), and `slow_wait` on `slow` (idempotent, no approval).
fn deployment(
    database: &str,
    upstream: u16,
    (api, slow): (u16, u16),
    model: &str,
) -> tempfile::TempDir {
    let toml = format!(
        "database_url = \"{database}\"\n\
         [[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"alice\"\n\
         [[mcp.tokens]]\ncredential = \"airlock.client\"\nprincipal = \"claude\"\n\
         [[mcp.tokens]]\ncredential = \"airlock.caller\"\nprincipal = \"carol\"\nscopes = [\"agent:helper\"]\n\
         [egress]\nallow = [\"127.0.0.1/32\"]\nallow_fetch = true\n[credentials]\nfile = \"creds.yml\"\n\
         [connections.tenant]\nuse_egress_allow = true\nbase_url = \"http://127.0.0.1:{api}\"\ncredential = \"tenant.token\"\n\
         [connections.up]\nuse_egress_allow = true\nbase_url = \"http://127.0.0.1:{upstream}\"\n\
         [connections.slow]\nuse_egress_allow = true\nbase_url = \"http://127.0.0.1:{slow}\"\n"
    );
    let creds = format!(
        "airlock:\n  admin: {ADMIN}\n  client: {CLIENT}\n  caller: {CALLER}\nopenai:\n  key: {}\ntenant:\n  token: tenant-token-3b5d\n",
        FakeModel::KEY
    );
    let dir = deployment_with(&toml, &creds);
    let d = dir.path();
    let url = format!("http://127.0.0.1:{upstream}/mcp");
    write(
        d,
        "connections/gated.yml",
        &format!("url: {url}\napproval: always\n"),
    );
    write(d, "connections/free.yml", &format!("url: {url}\n"));
    write(
        d,
        "connections/retry.yml",
        &format!("url: {url}\neffect: idempotent\n"),
    );
    write(
        d,
        "apis/tenant.yml",
        "name: tenant\nconnection: tenant\nauth: { scheme: bearer }\nrate_limit: { requests: 3, per: 1h }\noperations:\n  - name: ping\n    description: Ping.\n    writes: false\n    request: { method: GET, path: /ping }\n",
    );
    let manifest = format!(
        "apiVersion: airlock/v1\nkind: Agent\nmetadata:\n  name: helper\n  description: Reads pages.\n\
         spec:\n  model:\n    provider: openai\n    model: gpt-test\n    endpoint: {model}\n    credential: openai.key\n\
         \x20 prompts:\n    system: Help.\n  tools:\n    - type: builtin\n      name: fetch\n      approval: always\n\
         \x20   - name: up\n      type: mcp\n      connection: up\n      path: /mcp\n      tools:\n\
         \x20       - {{ name: echo, description: Echoes., writes: false, input_schema: {{ type: object }} }}\n\
         \x20   - name: slow\n      type: mcp\n      connection: slow\n      path: /mcp\n      effect: idempotent\n      tools:\n\
         \x20       - {{ name: wait, description: Waits., writes: false, input_schema: {{ type: object }} }}\n"
    );
    write(d, "agents/helper.yml", &manifest);
    dir
}

fn write(dir: &Path, file: &str, content: &str) {
    let path = dir.join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

/// Two replicas of one deployment, their upstreams and the model.
struct Pair {
    database: String,
    dir: tempfile::TempDir,
    a: Server,
    b: Server,
    upstream: airlock_testkit::Server,
    api: RawServer,
    page: RawServer,
    /// Holds every `tools/call` until released.
    slow: RawServer,
    model: FakeModel,
}

impl Pair {
    /// Both replicas started with `extra` serve options; `None` when PostgreSQL is not here.
    async fn start(extra: &[&str]) -> Option<Self> {
        let database = fresh_database().await?;
        let upstream = airlock_testkit::Server::start(Script::default()).await;
        upstream.set_tools(
            ["echo", "silent", "hold_first"]
                .map(|name| json!({"name": name, "inputSchema": {"type": "object"}}))
                .to_vec(),
        );
        let api = RawServer::start(Some("no-such-method"), Cue::Status(500)).await;
        let page = RawServer::start(Some("no-such-method"), Cue::Status(500)).await;
        let slow = RawServer::start(Some("tools/call"), Cue::Hold).await;
        let model = FakeModel::openai(vec![]).await;
        let ports = (api.port, slow.port);
        let dir = deployment(&database, upstream.port, ports, &model.endpoint());
        // One after the other: the first migrates the fresh database.
        let a = Server::start(dir.path(), extra);
        let b = Server::start(dir.path(), extra);
        Some(Self {
            database,
            dir,
            a,
            b,
            upstream,
            api,
            page,
            slow,
            model,
        })
    }

    /// How many `tools/call` requests carried idempotency key `id` (an invocation id).
    fn executions(&self, id: &str) -> usize {
        executions(&self.upstream, id)
    }

    /// The idempotency key of the first `tools/call` of `tool`, once the upstream has one.
    async fn asked(&self, tool: &str) -> String {
        for _ in 0..1000 {
            let seen = self.upstream.seen();
            let call = seen
                .iter()
                .find(|s| s.method == "tools/call" && s.body["params"]["name"] == tool);
            if let Some(call) = call {
                let key = &call.body["params"]["_meta"]["airlock/idempotency_key"];
                return key.as_str().unwrap().to_owned();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("the upstream was never asked {tool}");
    }
}

/// How many `tools/call` requests `upstream` saw with idempotency key `id` (an invocation id).
pub(crate) fn executions(upstream: &airlock_testkit::Server, id: &str) -> usize {
    upstream
        .seen()
        .iter()
        .filter(|s| s.method == "tools/call")
        .filter(|s| s.body["params"]["_meta"]["airlock/idempotency_key"] == id)
        .count()
}

/// `tools/call` of `tool` through the MCP endpoint of the replica at `addr`; the result.
pub(crate) async fn call(addr: &str, tool: &str, arguments: Value) -> Value {
    let reply = mcp_request(&format!("http://{addr}"))
        .bearer_auth(CLIENT)
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status().as_u16(), 200);
    let body: Value = reply.json().await.unwrap();
    body["result"].clone()
}

/// A parked call of `gated__echo` through `server`; its invocation id.
pub(crate) async fn park(server: &Server, n: u64) -> String {
    let parked = call(&server.addr, "gated__echo", json!({"n": n})).await;
    let status = &parked["structuredContent"];
    assert_eq!(status["status"], "awaiting_approval", "{parked}");
    status["invocation_id"].as_str().unwrap().to_owned()
}

/// `airlock_await_decision` on the replica at `addr` for `id`, waiting up to `wait` seconds.
pub(crate) async fn await_decision(addr: &str, id: &str, wait: u64) -> Value {
    let args = json!({"invocation_id": id, "wait_seconds": wait});
    call(addr, "airlock_await_decision", args).await["structuredContent"].clone()
}

/// An admin request to `server`; the status and JSON body.
pub(crate) async fn admin(
    server: &Server,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let addr = server.addr.parse().unwrap();
    let (status, body, _) = http(addr, method, path, Some(ADMIN), body).await;
    (status, body)
}

/// The row of invocation `id` as `server`'s API shows it.
async fn row(server: &Server, id: &str) -> Value {
    admin(server, "GET", &format!("/v1/invocations/{id}"), None)
        .await
        .1
}

/// Waits (bounded polling) until `id` is in `state` as `server` shows it; the row.
pub(crate) async fn until_state(server: &Server, id: &str, state: &str) -> Value {
    let mut last = Value::Null;
    for _ in 0..1500 {
        last = row(server, id).await;
        if last["state"] == state {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{id} never became {state}: {last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_parked_on_one_replica_is_decided_on_the_other_and_wakes_its_waiter() {
    // OPS-35, DECIDE-15: the API of B and the CLI both wake an await long-polling on A.
    let Some(pair) = Pair::start(&[]).await else {
        return;
    };
    for (n, surface) in [(1, "api"), (2, "cli")] {
        let id = park(&pair.a, n).await;
        let waiting = tokio::spawn({
            let (addr, id) = (pair.a.addr.clone(), id.clone());
            async move {
                let started = Instant::now();
                (await_decision(&addr, &id, 25).await, started.elapsed())
            }
        });
        // A round trip on A after the waiter's request went out, so it is (very likely)
        // waiting when the decision lands; if not, it finds the row decided, which passes too.
        let before = await_decision(&pair.a.addr, &id, 0).await;
        assert_eq!(before["status"], "awaiting_approval", "{before}");
        if surface == "api" {
            let path = format!("/v1/invocations/{id}/approve");
            let (status, body) = admin(&pair.b, "POST", &path, Some(json!({}))).await;
            assert_eq!(status, 200, "{body}");
        } else {
            let out = cli(pair.dir.path(), &["approve", &id]);
            assert!(out.status.success(), "{}", text(&out));
        }
        let (settled, took) = waiting.await.unwrap();
        assert_eq!(settled["status"], "completed", "{surface}: {settled}");
        assert_eq!(settled["decided_by"], "alice", "{settled}");
        assert_eq!(settled["result"]["received"]["n"], n, "{settled}");
        // Woken by the decision, not by its 25 s deadline (which would answer "still waiting"
        // had the row not changed; the bound is only there to name a missed wake-up).
        assert!(
            took < Duration::from_secs(20),
            "{surface}: woke after {took:?}"
        );
        assert_eq!(pair.executions(&id), 1, "{surface}: ran once");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_call_runs_once_however_many_replicas_race_for_it() {
    // OPS-36, DECIDE-16: each approval wakes both replicas' workers and an await on each; the
    // claim lets exactly one of the four run it.
    let Some(pair) = Pair::start(&[]).await else {
        return;
    };
    let mut ids = Vec::new();
    for n in 0..8 {
        let on = if n % 2 == 0 { &pair.a } else { &pair.b };
        ids.push(park(on, n).await);
    }
    let mut waiters = Vec::new();
    for id in &ids {
        for addr in [&pair.a.addr, &pair.b.addr] {
            let (addr, id) = (addr.clone(), id.clone());
            waiters.push(tokio::spawn(
                async move { await_decision(&addr, &id, 25).await },
            ));
        }
    }
    for (n, id) in ids.iter().enumerate() {
        let on = if n % 2 == 0 { &pair.b } else { &pair.a };
        let (status, body) = admin(
            on,
            "POST",
            &format!("/v1/invocations/{id}/approve"),
            Some(json!({})),
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }
    for waiter in waiters {
        let settled = waiter.await.unwrap();
        assert_eq!(settled["status"], "completed", "{settled}");
    }
    for id in &ids {
        until_state(&pair.b, id, "succeeded").await;
        assert_eq!(pair.executions(id), 1, "{id} ran once across replicas");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_mid_call_is_settled_by_the_others_sweeper() {
    // OPS-37, LEDGER-40: A is SIGKILLed while the upstream holds its requests; B's sweeper
    // finds both leases run out: the at-most-once call is in doubt and never sent again, the
    // idempotent one is re-run once with the same key and succeeds — never both.
    let fast = ["--lease", "1", "--sweep-every", "1"];
    let Some(mut pair) = Pair::start(&fast).await else {
        return;
    };
    let a = pair.a.addr.clone();
    let calls = ["free__silent", "retry__hold_first"].map(|tool| {
        tokio::spawn({
            let a = a.clone();
            async move {
                let _ = mcp_request(&format!("http://{a}"))
                    .bearer_auth(CLIENT)
                    .body(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": {}}}).to_string())
                    .send()
                    .await;
            }
        })
    });
    let once = pair.asked("silent").await;
    let again = pair.asked("hold_first").await;
    pair.a.child.kill().unwrap(); // SIGKILL: the rows stay `running` under A's lease.
    pair.a.child.wait().unwrap();
    for call in calls {
        call.await.unwrap();
    }

    until_state(&pair.b, &once, "in_doubt").await;
    until_state(&pair.b, &again, "succeeded").await;
    assert_eq!(
        pair.executions(&again),
        2,
        "sent again once, with the same key"
    );
    assert_eq!(
        pair.executions(&once),
        1,
        "an at-most-once call is never sent again"
    );
    // B's sweeper settled each one way: the log names the in-doubt one and the re-run one.
    let log = pair.b.log();
    let about = |id: &str, what: &str| log.iter().any(|l| l.contains(id) && l.contains(what));
    assert!(
        about(&once, "in doubt") && !about(&once, "re-run"),
        "{log:#?}"
    );
    assert!(
        about(&again, "re-run") && !about(&again, "in doubt"),
        "{log:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_run_resumes_once_on_whichever_replica_claims_it() {
    // OPS-38, AGENT-7 across replicas: a run started on A parks on its gated fetch; the CLI
    // approves; both replicas' resume workers race, the run completes once: the page is read
    // once and the model asked once per step.
    let page_call = |url: &str| {
        ModelReply::calls(vec![airlock_testkit::FakeCall::new(
            "call_1",
            "fetch",
            &json!({"url": url}),
        )])
    };
    let Some(pair) = Pair::start(&[]).await else {
        return;
    };
    pair.model.push(page_call(&format!(
        "http://127.0.0.1:{}/page",
        pair.page.port
    )));
    pair.model.push(ModelReply::text(&["Read it."]));
    let a = pair.a.addr.parse().unwrap();
    let body = json!({"input": "read the page"});
    let (status, parked, _) =
        http(a, "POST", "/v1/agents/helper/run", Some(CALLER), Some(body)).await;
    assert_eq!(
        (status, &parked["status"]),
        (200, &json!("parked")),
        "{parked}"
    );
    let run = parked["run_id"].as_str().unwrap();
    let waiting = parked["waiting"][0].as_str().unwrap();
    let out = cli(pair.dir.path(), &["approve", waiting]);
    assert!(out.status.success(), "{}", text(&out));
    for server in [&pair.b, &pair.a] {
        let done = crate::runs::until_status(server.addr.parse().unwrap(), run, "completed").await;
        assert_eq!(done["answer"], "Read it.", "{done}");
    }
    assert_eq!(pair.page.seen(), ["/page"], "the approved call ran once");
    assert_eq!(
        pair.model.requests(),
        2,
        "one request per step, none repeated"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_replica_dies_is_taken_over_and_finished_once() {
    // AGENT-59, AGENT-60, TEST-12: a run on A completes `up_echo`, then A is SIGKILLed while
    // `slow` holds its `slow_wait`. Once the run's lease ran out, B takes the run over and
    // replays it from the ledger: the model is asked once per step (three, none again), the
    // echo is not sent again, and the idempotent call cut off is re-run once.
    let fast = ["--lease", "2", "--sweep-every", "1"];
    let Some(mut pair) = Pair::start(&fast).await else {
        return;
    };
    let call = |id: &str, name: &str| {
        ModelReply::calls(vec![airlock_testkit::FakeCall::new(id, name, &json!({}))])
    };
    pair.model.push(call("call_1", "up_echo"));
    pair.model.push(call("call_2", "slow_wait"));
    pair.model.push(ModelReply::text(&["Both done."]));
    let a = pair.a.addr.parse().unwrap();
    let started = tokio::spawn(async move {
        let body = json!({"input": "do both"});
        http(a, "POST", "/v1/agents/helper/run", Some(CALLER), Some(body)).await
    });
    pair.slow.held().await;
    pair.a.child.kill().unwrap(); // SIGKILL: the run stays `running` under A's lease.
    pair.a.child.wait().unwrap();
    started.abort();
    // One answer for A's dead request, one for B's re-run.
    pair.slow.release();
    pair.slow.release();

    let db = sqlx::PgPool::connect(&pair.database).await.unwrap();
    let run: String = sqlx::query_scalar("SELECT id FROM runs")
        .fetch_one(&db)
        .await
        .unwrap();
    let b = pair.b.addr.parse().unwrap();
    let done = crate::runs::until_status(b, &run, "completed").await;
    assert_eq!(done["answer"], "Both done.", "{done}");
    assert_eq!(
        pair.model.requests(),
        3,
        "one model request per step, none repeated"
    );
    let sent = |tool: &str| {
        let seen = pair.upstream.seen();
        let calls = seen.iter().filter(|s| s.method == "tools/call");
        calls.filter(|s| s.body["params"]["name"] == tool).count()
    };
    assert_eq!(sent("echo"), 1, "the completed call is not sent again");
    let waits = pair
        .slow
        .seen()
        .iter()
        .filter(|m| *m == "tools/call")
        .count();
    assert_eq!(waits, 2, "the idempotent call cut off is re-run once");
    let owner: Option<String> = sqlx::query_scalar("SELECT lease_owner FROM runs")
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(owner, None, "an ended run holds no lease");
    let log = pair.b.log();
    let taken = log
        .iter()
        .any(|l| l.contains(&run) && l.contains("taken over"));
    assert!(taken, "{log:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_is_one_budget_for_every_replica() {
    // OPS-38, POLICY-19: 3 calls an hour, asked 8 times alternately through A and B: 3 run.
    let Some(pair) = Pair::start(&[]).await else {
        return;
    };
    let mut refused = 0;
    for n in 0..8 {
        let on = if n % 2 == 0 { &pair.a } else { &pair.b };
        let result = call(&on.addr, "tenant_ping", json!({})).await;
        if result["isError"] == true {
            let text = result.to_string();
            assert!(
                text.contains("rate_limited") || text.contains("rate limit"),
                "{text}"
            );
            refused += 1;
        }
    }
    assert_eq!(refused, 5, "8 asked, 3 allowed in all");
    assert_eq!(
        pair.api.seen(),
        ["/ping"; 3],
        "the tenant saw the declared rate"
    );
}

/// `free__echo` called on `server` until a freeze refuses it (bounded); the refusal's text.
async fn until_frozen(server: &Server, tool: &str) -> String {
    for n in 0..500 {
        let result = call(&server.addr, tool, json!({"n": n})).await;
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        if result["isError"] == true && text.contains("frozen") {
            return text.to_owned();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{tool} was never refused by the freeze on {}", server.addr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_freeze_on_one_replica_reaches_the_other_and_lifting_restores_it() {
    // POLICY-51 … POLICY-54: a freeze made through B's API refuses A's next calls (recorded
    // `denied` by the freeze) and A's approvals; lifting it through the CLI restores both.
    let Some(pair) = Pair::start(&[]).await else {
        return;
    };
    let parked = park(&pair.a, 1).await;
    let body = json!({"kind": "connection", "name": "free", "reason": "incident 9"});
    let (status, frozen) = admin(&pair.b, "POST", "/v1/freezes", Some(body.clone())).await;
    assert_eq!(status, 201, "{frozen}");
    assert_eq!(
        (frozen["by"].as_str(), frozen["kind"].as_str()),
        (Some("alice"), Some("connection"))
    );
    // A's copy may not hold it yet: what the ledger stored says it was frozen already.
    let (on_a, _) = admin(&pair.a, "POST", "/v1/freezes", Some(body.clone())).await;
    assert_eq!(on_a, 200, "the freeze made through B stands");
    let (again, _) = admin(&pair.b, "POST", "/v1/freezes", Some(body)).await;
    assert_eq!(again, 200, "a frozen target keeps its first freeze");
    let refusal = until_frozen(&pair.a, "free__echo").await;
    assert!(
        refusal.contains("connection `free` is frozen by alice (incident 9)"),
        "{refusal}"
    );
    // Another connection's calls still run on A.
    let gated_then = park(&pair.a, 2).await;
    assert_ne!(gated_then, parked);
    // Everything frozen through the CLI: A refuses an approval with 409, B too.
    let out = cli(
        pair.dir.path(),
        &["freeze", "everything", "--reason", "audit", "--as", "ops"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let approve = format!("/v1/invocations/{parked}/approve");
    let (status, body) = admin(&pair.a, "POST", &approve, Some(json!({}))).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body.to_string().contains("everything is frozen by ops"),
        "{body}"
    );
    let (_, listed) = admin(&pair.a, "GET", "/v1/freezes", None).await;
    assert_eq!(listed["freezes"].as_array().unwrap().len(), 2, "{listed}");
    let out = cli(pair.dir.path(), &["freezes", "--json"]);
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown, listed);
    // Lifted: the CLI lifts everything, B's API the connection; A approves, and the call runs.
    let out = cli(pair.dir.path(), &["unfreeze", "everything", "--as", "ops"]);
    assert!(out.status.success(), "{}", text(&out));
    let lift = json!({"kind": "connection", "name": "free"});
    let (status, lifted) = admin(&pair.b, "POST", "/v1/freezes/lift", Some(lift.clone())).await;
    assert_eq!(status, 200, "{lifted}");
    let (status, _) = admin(&pair.b, "POST", "/v1/freezes/lift", Some(lift)).await;
    assert_eq!(status, 404, "nothing left to lift");
    let (status, body) = admin(&pair.a, "POST", &approve, Some(json!({}))).await;
    assert_eq!(status, 200, "{body}");
    until_state(&pair.a, &parked, "succeeded").await;
    assert_eq!(pair.executions(&parked), 1);
    let out = cli(pair.dir.path(), &["unfreeze", "everything", "--as", "ops"]);
    assert!(!out.status.success(), "nothing is frozen any more");
}
