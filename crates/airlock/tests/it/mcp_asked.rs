//! An upstream that asks its client during a call, reached by a session-era client that takes
//! such requests (docs/rules.md MCP-94 to MCP-97, LEDGER-87): the `initialize` gives a sealed
//! session id, the call is answered as an event stream carrying the upstream's request under a
//! ledger row's id, and the client's answer — POSTed to the same `serve` process or to another
//! replica on the same PostgreSQL database — reaches the upstream, whose result ends the stream.
//! The upstream is built with the official TypeScript SDK (`crates/airlock-mcp/tests/sdk/
//! asking.mjs`, stateful, as session-era servers that ask are).

use std::time::Duration;

use serde_json::{Value, json};

use crate::replicas::{ADMIN, CLIENT, fresh_database};
use crate::support::{Server, asking_fixture, deployment_with, http, mcp_request};

/// A second principal's token on the same endpoint.
const OTHER: &str = "mcp-5d41402abc4b2a76b9719d911017c592";

/// A deployment whose connection file `ask` reaches the asking upstream at `port`, on
/// `database` (`None`: the embedded SQLite).
fn deployment(database: Option<&str>, port: u16) -> tempfile::TempDir {
    deployment_with_egress(database, port, "")
}

/// [`deployment`] with `egress` added to `[egress]`.
fn deployment_with_egress(database: Option<&str>, port: u16, egress: &str) -> tempfile::TempDir {
    let database = database
        .map(|url| format!("database_url = \"{url}\"\n"))
        .unwrap_or_default();
    let toml = format!(
        "{database}[[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"alice\"\n\
         [[mcp.tokens]]\ncredential = \"airlock.client\"\nprincipal = \"claude\"\n\
         [[mcp.tokens]]\ncredential = \"airlock.other\"\nprincipal = \"mallory\"\n\
         [egress]\nallow = [\"127.0.0.1/32\"]\n{egress}[credentials]\nfile = \"creds.yml\"\n"
    );
    let creds = format!("airlock:\n  admin: {ADMIN}\n  client: {CLIENT}\n  other: {OTHER}\n");
    let dir = deployment_with(&toml, &creds);
    let connections = dir.path().join("connections");
    std::fs::create_dir_all(&connections).unwrap();
    let url = format!("url: http://127.0.0.1:{port}/mcp\n");
    std::fs::write(connections.join("ask.yml"), url).unwrap();
    dir
}

/// `initialize` on `addr` declaring `capabilities`; the session id it answered with, if any.
async fn initialize(addr: &str, capabilities: Value) -> Option<String> {
    initialize_as(addr, CLIENT, capabilities).await
}

/// [`initialize`] as `token`'s principal.
async fn initialize_as(addr: &str, token: &str, capabilities: Value) -> Option<String> {
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": capabilities,
        "clientInfo": {"name": "test", "version": "1"}}});
    let reply = mcp_request(&format!("http://{addr}"))
        .bearer_auth(token)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status().as_u16(), 200);
    let id = reply.headers().get("mcp-session-id")?;
    Some(id.to_str().unwrap().to_owned())
}

/// An event stream read one event at a time.
struct Events {
    reply: reqwest::Response,
    buffer: String,
}

impl Events {
    /// The next event's JSON (bounded: 20 s).
    async fn next(&mut self) -> Value {
        let read = async {
            loop {
                if let Some((event, rest)) = self.buffer.split_once("\n\n") {
                    let data = event.trim_start_matches("data: ").to_owned();
                    self.buffer = rest.to_owned();
                    return serde_json::from_str(&data).unwrap();
                }
                let chunk = self
                    .reply
                    .chunk()
                    .await
                    .unwrap()
                    .expect("the stream ended early");
                self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
            }
        };
        tokio::time::timeout(Duration::from_secs(20), read)
            .await
            .expect("no event within 20 s")
    }
}

/// `tools/call` of `tool` on `addr` carrying `session`; its event stream.
async fn call(addr: &str, session: &str, tool: &str, arguments: Value) -> Events {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments}});
    let reply = mcp_request(&format!("http://{addr}"))
        .bearer_auth(CLIENT)
        .header("mcp-session-id", session)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status().as_u16(), 200);
    let kind = reply.headers()["content-type"].to_str().unwrap().to_owned();
    assert_eq!(kind, "text/event-stream");
    Events {
        reply,
        buffer: String::new(),
    }
}

/// A session on `addr` declaring `capabilities`, its call of `ask__elicitation` and the id of
/// the question relayed on it.
async fn elicited(addr: &str, capabilities: Value) -> (String, Events, Value) {
    let session = initialize(addr, capabilities).await.unwrap();
    let mut events = call(addr, &session, "ask__elicitation", json!({"message": "?"})).await;
    let id = events.next().await["id"].clone();
    (session, events, id)
}

/// POSTs `answer` (a JSON-RPC `result` or `error` member) to the request `id` on `addr`, as
/// `token`'s principal; the status and body.
async fn answer(addr: &str, token: &str, session: &str, id: &Value, answer: Value) -> (u16, Value) {
    let mut body = json!({"jsonrpc": "2.0", "id": id});
    body.as_object_mut()
        .unwrap()
        .extend(answer.as_object().unwrap().clone());
    let reply = mcp_request(&format!("http://{addr}"))
        .bearer_auth(token)
        .header("mcp-session-id", session)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = reply.status().as_u16();
    (status, reply.json().await.unwrap_or(Value::Null))
}

/// The row of the relayed request `id` as `server`'s API shows it.
async fn row(server: &Server, id: &Value) -> Value {
    let row = id.as_str().unwrap().strip_prefix("airlock-asked-").unwrap();
    let addr = server.addr.parse().unwrap();
    let path = format!("/v1/invocations/{row}");
    http(addr, "GET", &path, Some(ADMIN), None).await.1
}

/// `event` ends a call that failed: the upstream's request was refused.
fn assert_failed(event: &Value) {
    let failed = event.get("error").is_some() || event["result"]["isError"] == true;
    assert!(failed, "the upstream's request failed: {event}");
}

/// The call's text result, from the last event of its stream.
fn result_text(event: &Value) -> String {
    assert_eq!(event["id"], 7, "{event}");
    event["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text result: {event}"))
        .to_owned()
}

/// The elicitation of `ask__elicitation` asked on `a`, answered on `b`.
async fn elicitation_answered_elsewhere(a: &Server, b: &Server) {
    let caps = json!({"elicitation": {}, "sampling": {}});
    let session = initialize(&a.addr, caps).await.expect("a session id");
    let mut events = call(
        &a.addr,
        &session,
        "ask__elicitation",
        json!({"message": "Who?"}),
    )
    .await;
    let asked = events.next().await;
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    assert_eq!(asked["params"]["message"], "Who?");
    assert_eq!(
        asked["params"]["requestedSchema"]["required"],
        json!(["username", "email"])
    );
    let id = asked["id"].clone();
    let recorded = row(b, &id).await;
    assert_eq!(
        (
            &recorded["tool"],
            &recorded["state"],
            &recorded["principal"]
        ),
        (
            &json!("elicitation/create"),
            &json!("running"),
            &json!("claude")
        ),
        "the request is a ledger row before the client sees it: {recorded}"
    );
    // Another principal cannot answer it, even with the session id.
    let their_session = initialize_as(&b.addr, OTHER, json!({"elicitation": {}}))
        .await
        .unwrap();
    let decline = json!({"result": {"action": "decline"}});
    let theirs = answer(&b.addr, OTHER, &their_session, &id, decline).await;
    assert_eq!(theirs.0, 400, "never 404, which ends a session: {theirs:?}");
    // The same principal, in another session, cannot answer it either.
    let elsewhere = initialize(&a.addr, json!({"elicitation": {}}))
        .await
        .unwrap();
    let decline = json!({"result": {"action": "decline"}});
    let other_session = answer(&b.addr, CLIENT, &elsewhere, &id, decline).await;
    assert_eq!(other_session.0, 400, "{other_session:?}");
    let accept = json!({"result": {"action": "accept",
        "content": {"username": "ann", "email": "ann@example.com"}}});
    let (status, body) = answer(&b.addr, CLIENT, &session, &id, accept.clone()).await;
    assert_eq!(status, 202, "{body}");
    let text = result_text(&events.next().await);
    assert_eq!(
        text,
        r#"User response: <action: accept, content: {"username":"ann","email":"ann@example.com"}>"#
    );
    let settled = row(a, &id).await;
    assert_eq!(settled["state"], "succeeded", "{settled}");
    assert_eq!(settled["result"]["content"]["username"], "ann");
    let again = answer(&a.addr, CLIENT, &session, &id, accept).await;
    assert_eq!(again.0, 400, "answered once: {again:?}");
}

/// An answer not matching the form asked is refused naming the field, and fails the
/// upstream's request; a sampling request is relayed as rebuilt and its answer comes back.
async fn bad_answers_and_sampling(a: &Server, b: &Server) {
    let caps = json!({"elicitation": {}, "sampling": {}});
    let (session, mut events, id) = elicited(&a.addr, caps).await;
    let partial = json!({"result": {"action": "accept", "content": {"username": "ann"}}});
    let (status, body) = answer(&b.addr, CLIENT, &session, &id, partial).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["error"]["message"],
        "result.content.email: is required"
    );
    assert_failed(&events.next().await);
    let mut events = call(
        &a.addr,
        &session,
        "ask__sampling",
        json!({"prompt": "Say hi"}),
    )
    .await;
    let asked = events.next().await;
    assert_eq!(asked["method"], "sampling/createMessage");
    assert_eq!(asked["params"]["messages"][0]["content"]["text"], "Say hi");
    assert_eq!(asked["params"]["maxTokens"], 100);
    // An answer that is not a sampling result is refused, and recorded nowhere as one.
    let not_sampled = json!({"result": {"action": "accept"}});
    let (status, body) = answer(&b.addr, CLIENT, &session, &asked["id"], not_sampled).await;
    assert_eq!(status, 400, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("result: not a sampling/createMessage result"),
        "{body}"
    );
    assert_failed(&events.next().await);
    assert_eq!(row(a, &asked["id"]).await["state"], "failed");
    let mut events = call(
        &a.addr,
        &session,
        "ask__sampling",
        json!({"prompt": "Again"}),
    )
    .await;
    let asked = events.next().await;
    let sampled = json!({"result": {"role": "assistant", "model": "m",
        "content": {"type": "text", "text": "hi there"}}});
    let (status, _) = answer(&b.addr, CLIENT, &session, &asked["id"], sampled).await;
    assert_eq!(status, 202);
    assert_eq!(result_text(&events.next().await), "LLM response: hi there");
    // Roots, for a client that declared them.
    let rooted = initialize(&a.addr, json!({"roots": {"listChanged": true}}))
        .await
        .unwrap();
    let mut events = call(&a.addr, &rooted, "ask__roots", json!({})).await;
    let asked = events.next().await;
    assert_eq!(asked["method"], "roots/list", "{asked}");
    let roots = json!({"result": {"roots": [{"uri": "file:///work", "name": "work"}]}});
    let (status, _) = answer(&b.addr, CLIENT, &rooted, &asked["id"], roots).await;
    assert_eq!(status, 202);
    assert_eq!(result_text(&events.next().await), "file:///work");
}

/// `tools/call` of `tool` on `a` as `token`'s principal carrying `session`: the answer's
/// content type and body, read whole.
async fn plain_call(a: &Server, token: &str, session: String, tool: &str) -> (String, Value) {
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": tool, "arguments": {}}});
    let reply = mcp_request(&format!("http://{}", a.addr))
        .bearer_auth(token)
        .header("mcp-session-id", session)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let kind = reply.headers()["content-type"].to_str().unwrap().to_owned();
    (kind, reply.json().await.unwrap_or(Value::Null))
}

/// MCP-95: a client that declares none of what a request needs is asked nothing: its call is
/// plain JSON; a session id of another principal is as if none were sent.
async fn clients_that_take_no_requests(a: &Server) {
    let declared_none = initialize(&a.addr, json!({"experimental": {}}));
    let declared_none = declared_none.await.unwrap();
    let theirs = initialize(&a.addr, json!({"sampling": {}})).await.unwrap();
    for (token, session) in [(CLIENT, declared_none), (OTHER, theirs)] {
        let (kind, _) = plain_call(a, token, session, "ask__roots").await;
        assert_eq!(kind, "application/json");
    }
    // A call whose upstream asks nothing is plain JSON too, session id or not.
    let session = initialize(&a.addr, json!({"elicitation": {}}))
        .await
        .unwrap();
    let (kind, body) = plain_call(a, CLIENT, session, "ask__no_such_tool").await;
    assert_eq!(kind, "application/json");
    assert_eq!(body["id"], 3, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_96_an_upstreams_questions_reach_a_session_era_client_on_its_calls_stream() {
    let Some((_fixture, port)) = asking_fixture().await else {
        return;
    };
    let dir = deployment(None, port);
    let server = Server::start(dir.path(), &[]);
    elicitation_answered_elsewhere(&server, &server).await;
    bad_answers_and_sampling(&server, &server).await;
    clients_that_take_no_requests(&server).await;
    sessions_are_the_callers_own(&server).await;
}

/// MCP-95, MCP-98: a GET is admitted only with a token and a session id, and only the
/// caller's own session opens; a POST naming a session this endpoint never issued to the caller
/// is 404, so its client starts a new one.
async fn sessions_are_the_callers_own(a: &Server) {
    let base = format!("http://{}/mcp", a.addr);
    let get = |token: Option<&str>, session: Option<&str>| {
        let mut get = reqwest::Client::new()
            .get(&base)
            .header("accept", "text/event-stream");
        if let Some(token) = token {
            get = get.bearer_auth(token);
        }
        if let Some(session) = session {
            get = get.header("mcp-session-id", session);
        }
        get.send()
    };
    let session = initialize(&a.addr, json!({})).await.unwrap();
    let status = |r: reqwest::Response| r.status().as_u16();
    assert_eq!(status(get(None, Some(&session)).await.unwrap()), 401);
    assert_eq!(status(get(Some(CLIENT), None).await.unwrap()), 405);
    assert_eq!(status(get(Some(OTHER), Some(&session)).await.unwrap()), 404);
    let list = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"});
    let theirs = mcp_request(&format!("http://{}", a.addr))
        .bearer_auth(OTHER)
        .header("mcp-session-id", &session)
        .body(list.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(theirs.status().as_u16(), 404);
}

/// MCP-97: a question nobody answers ends with the call's upstream session (its deadline):
/// the row fails, and the call's stream ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_97_an_unanswered_question_fails_when_the_calls_session_ends() {
    let Some((_fixture, port)) = asking_fixture().await else {
        return;
    };
    let dir = deployment_with_egress(None, port, "deadline = \"2s\"\n");
    let server = Server::start(dir.path(), &[]);
    let (_, mut events, id) = elicited(&server.addr, json!({"elicitation": {}})).await;
    // The call itself timed out unanswered: in doubt, as any write that may have run.
    let ended = events.next().await;
    assert_eq!(
        ended["result"]["structuredContent"]["status"], "in_doubt",
        "{ended}"
    );
    let mut last = Value::Null;
    for _ in 0..500 {
        last = row(&server, &id).await;
        if last["state"] == "failed" {
            let why = last["result"]["error"]["message"]
                .as_str()
                .unwrap_or_default();
            assert_eq!(why, "the call ended before its client answered", "{last}");
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the question's row never failed: {last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_96_an_answer_posted_to_another_replica_reaches_the_upstream() {
    let Some((_fixture, port)) = asking_fixture().await else {
        return;
    };
    let Some(database) = fresh_database().await else {
        return;
    };
    let dir = deployment(Some(&database), port);
    // One after the other: the first migrates the fresh database and writes the key file.
    let a = Server::start(dir.path(), &[]);
    let b = Server::start(dir.path(), &[]);
    elicitation_answered_elsewhere(&a, &b).await;
    bad_answers_and_sampling(&b, &a).await;
}
