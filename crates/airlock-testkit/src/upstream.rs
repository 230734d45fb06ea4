//! A real MCP server on 127.0.0.1 for the tests: Streamable HTTP written by hand on axum, so
//! each test scripts what it answers (JSON or SSE, isError, JSON-RPC errors, 3xx, 401, silence,
//! oversized streams, pagination, a tools list that changes, skills of the SEP-2640 extension
//! whose files change, a `subscriptions/listen` stream of resource updates) and reads back
//! exactly what it was sent. Every request on any path is recorded; only `/mcp` answers as an MCP server.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::StreamExt as _;
use serde_json::{Value, json};

/// The largest request body the upstream reads: above the endpoint's 4 MiB cap plus the
/// envelope airlock adds when it forwards a call.
const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// How the upstream behaves.
#[derive(Debug, Clone, Default)]
pub struct Script {
    /// Answer requests as `text/event-stream` instead of JSON.
    pub sse: bool,
    /// Answer every POST with this status (and a `Location` for a 3xx).
    pub status: Option<u16>,
    /// The `Location` of a 3xx (default `http://10.0.0.1/mcp`, an internal target).
    pub location: Option<String>,
    /// Answer only notifications with this status.
    pub notification_status: Option<u16>,
    /// Delay every request answer by this much.
    pub delay: Option<Duration>,
    /// Label replies `Content-Encoding: gzip` (never acceptable: the cap counts decoded bytes).
    pub gzip: bool,
    /// Keep no record of requests ([`Server::seen`] stays empty): for benchmarks, where a record
    /// of every request grows without bound and its memory traffic would be measured too.
    pub unrecorded: bool,
    /// Pad the `initialize` reply with `instructions` of this many bytes (a big first reply).
    pub instructions_bytes: usize,
    /// `tools/list` never ends: every page (one tool described in 1,000 bytes) names a next.
    pub endless_pages: bool,
    /// Speak 2026-07-28 too: answer `server/discover` (by default it is an unknown method).
    pub modern: bool,
    /// Issue this `Mcp-Session-Id` on the `initialize` reply (by default the server keeps no
    /// sessions and issues none).
    pub session_id: Option<String>,
    /// Offer resources that can be subscribed to: declare `resources.subscribe`, list
    /// `test://watched` and `test://unwatched`, and answer `subscriptions/listen` with an event
    /// stream that acknowledges, sends `notifications/resources/updated` for `test://elsewhere`
    /// (never asked for) and then for each URI asked for, then stays open.
    pub subscribe: bool,
}

/// One request the upstream saw.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The request path (`/mcp` unless a client followed a redirect elsewhere).
    pub path: String,
    /// The JSON-RPC method (empty when the body is not JSON-RPC).
    pub method: String,
    /// The body as JSON (`null` when it is not JSON).
    pub body: Value,
    /// The request headers.
    pub headers: HeaderMap,
    /// The client's address: the same for requests that came over one connection.
    pub peer: SocketAddr,
}

/// The tools `tools/list` answers: the default two pages, or a list a test set.
type Tools = Arc<Mutex<Option<Vec<Value>>>>;

/// The skills' files, by URI (`skill://<name>/<path>`): what `skills/list` digests, and what
/// `resources/read` answers (which a test may make differ).
#[derive(Debug, Default)]
struct SkillFiles {
    listed: std::collections::BTreeMap<String, String>,
    read: std::collections::BTreeMap<String, String>,
}

type Skills = Arc<Mutex<SkillFiles>>;

#[derive(Clone)]
struct Upstream {
    script: Script,
    seen: Arc<Mutex<Vec<Seen>>>,
    tools: Tools,
    skills: Skills,
    /// The idempotency keys `hold_first` has held once.
    held: Arc<Mutex<std::collections::HashSet<String>>>,
}

impl Upstream {
    fn record(&self, seen: Seen) {
        if !self.script.unrecorded {
            lock(&self.seen).push(seen);
        }
    }
}

/// A running upstream on 127.0.0.1; it lives until the test's runtime ends.
pub struct Server {
    /// The port it listens on.
    pub port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    tools: Tools,
    skills: Skills,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Server {
    /// Starts an upstream that behaves as `script` says.
    ///
    /// By default `tools/list` answers two pages: `search` (described, with a schema) and then
    /// `create_note` (neither). `tools/call` knows `echo` (text + structured echo of the
    /// arguments), `count` (the size of the arguments as JSON, a short reply), `fail`
    /// (isError), `reject` (JSON-RPC error), `chart` (an image), `silent` (never answers),
    /// `hold_first` (never answers the first call carrying an idempotency key,
    /// `_meta["airlock/idempotency_key"]`, and echoes every later call with that key: a request
    /// held while its caller dies, then a re-run) and `huge` (a ~100 KiB SSE stream).
    ///
    /// # Panics
    /// When no port on 127.0.0.1 can be bound.
    pub async fn start(script: Script) -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let tools = Tools::default();
        let skills = Skills::default();
        let state = Upstream {
            script,
            seen: seen.clone(),
            tools: tools.clone(),
            skills: skills.clone(),
            held: Arc::default(),
        };
        let app = Router::new()
            .route("/mcp", post(handle).delete(|| async { StatusCode::OK }))
            .fallback(elsewhere)
            // axum's own 2 MB default would answer a big call 413 before reading it, where a
            // real MCP server takes what airlock's endpoint lets through (4 MiB) and more.
            .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
            .with_state(state);
        let (listener, port) = crate::listen::loopback(0).await;
        let app = app.into_make_service_with_connect_info::<SocketAddr>();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self {
            port,
            seen,
            tools,
            skills,
        }
    }

    /// The URL through the test name `mcp.upstream.io` (a test resolver pins it to 127.0.0.1).
    #[must_use]
    pub fn url(&self) -> String {
        format!("http://mcp.upstream.io:{}/mcp", self.port)
    }

    /// The URL on the IP literal, for clients with the system resolver (allow `127.0.0.1/32`).
    #[must_use]
    pub fn loopback_url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// Every request so far, in order (DELETEs that close a session are not recorded).
    #[must_use]
    pub fn seen(&self) -> Vec<Seen> {
        lock(&self.seen).clone()
    }

    /// The JSON-RPC methods of [`Server::seen`].
    #[must_use]
    pub fn methods(&self) -> Vec<String> {
        self.seen().into_iter().map(|s| s.method).collect()
    }

    /// Replaces what `tools/list` answers from the next request on: one page of these tools
    /// (each a JSON object with `name` and optionally `description` and `inputSchema`).
    pub fn set_tools(&self, tools: Vec<Value>) {
        *lock(&self.tools) = Some(tools);
    }

    /// Serves skills (SEP-2640) from the next request on: `files` maps `skill://<name>/<path>`
    /// to its text; each `skill://<name>/SKILL.md` is a skill (frontmatter `name` and
    /// `description: "A test skill."`) listing every file under `skill://<name>/` with its
    /// SHA-256 digest and size, and `resources/read` answers each file's text; `resources/list`
    /// names each `SKILL.md`. The `initialize` reply then declares `resources` and the skills
    /// extension.
    pub fn set_skill_files(&self, files: &[(&str, &str)]) {
        let files: std::collections::BTreeMap<String, String> = files
            .iter()
            .map(|(uri, text)| ((*uri).to_owned(), (*text).to_owned()))
            .collect();
        *lock(&self.skills) = SkillFiles {
            listed: files.clone(),
            read: files,
        };
    }

    /// Makes `resources/read` of `uri` answer `text` while `skills/list` keeps the digest of
    /// what [`Server::set_skill_files`] gave: a server that changes a file behind its listing.
    pub fn tamper_skill_file(&self, uri: &str, text: &str) {
        lock(&self.skills)
            .read
            .insert(uri.to_owned(), text.to_owned());
    }
}

/// What the upstream declares: tools, and resources (subscribable ones too) and the skills
/// extension when it serves them.
fn capabilities(script: &Script, serves_skills: bool) -> Value {
    let mut capabilities = json!({"tools": {}});
    if serves_skills {
        capabilities["resources"] = json!({});
        capabilities["extensions"] = json!({"io.modelcontextprotocol/skills": {}});
    }
    if script.subscribe {
        capabilities["resources"] = json!({"subscribe": true});
    }
    capabilities
}

/// A `subscriptions/listen` stream: the acknowledgment, an update of a URI never asked for, one
/// of each URI asked for, then nothing more, open until the client goes.
fn listen_stream(id: &Value, params: &Value) -> Response {
    let asked = params["notifications"]["resourceSubscriptions"].clone();
    let meta = json!({"io.modelcontextprotocol/subscriptionId": id});
    let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
        "params": {"notifications": {"resourceSubscriptions": asked}, "_meta": meta}});
    let uris = asked.as_array().cloned().unwrap_or_default();
    let updates = std::iter::once(json!("test://elsewhere"))
        .chain(uris)
        .map(|uri| {
            json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
            "params": {"uri": uri, "_meta": meta}})
        });
    let events: Vec<Result<String, std::convert::Infallible>> = std::iter::once(ack)
        .chain(updates)
        .map(|m| Ok(format!("event: message\ndata: {m}\n\n")))
        .collect();
    let stream = futures::stream::iter(events).chain(futures::stream::pending());
    let body = axum::body::Body::from_stream(stream);
    ([(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
}

/// The `skills/list` entries of `files`.
fn skill_entries(files: &SkillFiles) -> Vec<Value> {
    use sha2::Digest as _;
    let skill_uris = files.listed.keys().filter(|u| u.ends_with("/SKILL.md"));
    skill_uris
        .map(|uri| {
            let root = uri.trim_end_matches("SKILL.md");
            let name = root.trim_start_matches("skill://").trim_end_matches('/');
            let resources: Vec<Value> = files
                .listed
                .iter()
                .filter(|(u, _)| u.starts_with(root))
                .map(|(u, text)| {
                    let digest = sha2::Sha256::digest(text.as_bytes());
                    let digest: String = digest.iter().map(|b| format!("{b:02x}")).collect();
                    json!({"uri": u, "digest": format!("sha256:{digest}"), "size": text.len()})
                })
                .collect();
            json!({
                "uri": uri,
                "frontmatter": {"name": name, "description": "A test skill."},
                "resources": resources,
            })
        })
        .collect()
}

/// The answer to a skills or resources method, when the upstream serves skills.
fn skills_reply(method: &str, params: &Value, files: &SkillFiles) -> Option<Value> {
    let skills = skill_entries(files);
    let uri = params["uri"].as_str().unwrap_or_default();
    let not_found = || Err(json!({"code": -32602, "message": "not found", "data": {"uri": uri}}));
    let answer = match method {
        "skills/list" => Ok(json!({ "skills": skills })),
        "skills/get" => match skills.into_iter().find(|s| s["uri"] == uri) {
            Some(skill) => Ok(json!({ "skill": skill })),
            None => not_found(),
        },
        // Each skill's `SKILL.md` is a listed resource, as the extension suggests; its other
        // files are read by URI only.
        "resources/list" => {
            let listed = skills.iter().map(|s| {
                let name = &s["frontmatter"]["name"];
                json!({"uri": s["uri"], "name": name, "mimeType": "text/markdown"})
            });
            Ok(json!({ "resources": listed.collect::<Vec<_>>() }))
        }
        "resources/templates/list" => Ok(json!({ "resourceTemplates": [] })),
        "resources/read" => match files.read.get(uri) {
            Some(text) => {
                Ok(json!({"contents": [{"uri": uri, "mimeType": "text/markdown", "text": text}]}))
            }
            None => not_found(),
        },
        _ => return None,
    };
    Some(answer.map_or_else(
        |error| json!({ "error": error }),
        |r| json!({ "result": r }),
    ))
}

/// Any path but `/mcp`: recorded, then 404.
async fn elsewhere(
    State(up): State<Upstream>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    uri: Uri,
    headers: HeaderMap,
) -> StatusCode {
    up.record(Seen {
        path: uri.path().to_owned(),
        method: String::new(),
        body: Value::Null,
        headers,
        peer,
    });
    StatusCode::NOT_FOUND
}

async fn handle(
    State(up): State<Upstream>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let method = body["method"].as_str().unwrap_or_default().to_owned();
    up.record(Seen {
        path: "/mcp".to_owned(),
        method: method.clone(),
        body: body.clone(),
        headers,
        peer,
    });
    let is_notification = body.get("id").is_none();
    let location = up.script.location.as_deref();
    if let Some(status) = up.script.status {
        return status_reply(status, location);
    }
    if is_notification {
        return match up.script.notification_status {
            Some(status) => status_reply(status, location),
            None => StatusCode::ACCEPTED.into_response(),
        };
    }
    if let Some(delay) = up.script.delay {
        tokio::time::sleep(delay).await;
    }
    let id = body["id"].clone();
    let (serves_skills, skill_reply) = {
        let skills = lock(&up.skills);
        let serves = !skills.listed.is_empty();
        let reply = serves.then(|| skills_reply(&method, &body["params"], &skills));
        (serves, reply.flatten())
    };
    if up.script.subscribe && method == "subscriptions/listen" {
        return listen_stream(&id, &body["params"]);
    }
    let reply = match method.as_str() {
        _ if up.script.subscribe && method.starts_with("resources/") => {
            let watched = [
                ("test://watched", "watched"),
                ("test://unwatched", "unwatched"),
            ];
            let resources: Vec<Value> = (watched.iter())
                .map(|(uri, name)| json!({"uri": uri, "name": name}))
                .collect();
            let listed = match method.as_str() {
                "resources/list" => json!({ "resources": resources }),
                _ => json!({ "resourceTemplates": [] }),
            };
            ok(&id, listed)
        }
        _ if let Some(mut answer) = skill_reply => {
            answer["jsonrpc"] = json!("2.0");
            answer["id"] = id;
            answer
        }
        "initialize" => {
            let capabilities = capabilities(&up.script, serves_skills);
            let mut result = json!({
                "protocolVersion": body["params"]["protocolVersion"],
                "capabilities": capabilities,
                "serverInfo": {"name": "test-upstream", "version": "1"}
            });
            if up.script.instructions_bytes > 0 {
                result["instructions"] = Value::String("i".repeat(up.script.instructions_bytes));
            }
            ok(&id, result)
        }
        "server/discover" if up.script.modern => ok(
            &id,
            json!({
                "resultType": "complete",
                "supportedVersions": ["2026-07-28"],
                "capabilities": capabilities(&up.script, serves_skills),
                "ttlMs": 0,
                "cacheScope": "private"
            }),
        ),
        "tools/list" => {
            let set = lock(&up.tools).clone();
            let cursor = body["params"]["cursor"].as_str();
            let page = match set {
                _ if up.script.endless_pages => endless_page(cursor),
                Some(tools) => json!({ "tools": tools }),
                None => tools_page(cursor),
            };
            ok(&id, page)
        }
        "tools/call" => match call(&body["params"], &up.held) {
            Call::Reply(result) => ok(&id, result),
            Call::Error(message) => {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": message}})
            }
            Call::Silent => std::future::pending().await,
            Call::Huge => return huge_sse(&id),
        },
        _ => {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "method not found"}})
        }
    };
    if let (Some(session), "initialize") = (&up.script.session_id, method.as_str()) {
        return ([("mcp-session-id", session.as_str())], axum::Json(reply)).into_response();
    }
    if up.script.sse {
        let text = format!("event: message\ndata: {reply}\n\n");
        ([(header::CONTENT_TYPE, "text/event-stream")], text).into_response()
    } else if up.script.gzip {
        ([(header::CONTENT_ENCODING, "gzip")], axum::Json(reply)).into_response()
    } else {
        axum::Json(reply).into_response()
    }
}

enum Call {
    Reply(Value),
    Error(String),
    Silent,
    Huge,
}

fn call(params: &Value, held: &Mutex<std::collections::HashSet<String>>) -> Call {
    let args = params["arguments"].clone();
    let key = params["_meta"]["airlock/idempotency_key"].as_str();
    match params["name"].as_str().unwrap_or_default() {
        "hold_first" if key.is_some_and(|k| lock(held).insert(k.to_owned())) => Call::Silent,
        "echo" | "hold_first" => Call::Reply(json!({
            "content": [{"type": "text", "text": args.to_string()}],
            "structuredContent": {"received": args}
        })),
        "fail" => Call::Reply(json!({
            "content": [{"type": "text", "text": "ticket 42 does not exist"}],
            "isError": true
        })),
        "count" => Call::Reply(json!({
            "content": [{"type": "text", "text": format!("{} bytes", args.to_string().len())}]
        })),
        "reject" => Call::Error("unknown ticket number".into()),
        "chart" => Call::Reply(json!({"content": [
            {"type": "text", "text": "the chart:"},
            // 1,236 base64 characters without padding decode to 927 bytes.
            {"type": "image", "mimeType": "image/png", "data": "A".repeat(1236)}
        ]})),
        "silent" => Call::Silent,
        "huge" => Call::Huge,
        other => Call::Error(format!("no tool {other}")),
    }
}

fn tools_page(cursor: Option<&str>) -> Value {
    match cursor {
        None => json!({
            "tools": [{"name": "search", "description": "Search the CRM.",
                       "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}}],
            "nextCursor": "page-2"
        }),
        Some(_) => json!({"tools": [{"name": "create_note"}]}),
    }
}

/// A page of a tool list that never ends: each page names the next.
fn endless_page(cursor: Option<&str>) -> Value {
    let n: u64 = cursor.and_then(|c| c.parse().ok()).unwrap_or(0);
    json!({
        "tools": [{"name": format!("t{n}"), "description": "d".repeat(1000)}],
        "nextCursor": (n + 1).to_string()
    })
}

fn ok(id: &Value, result: Value) -> Value {
    let mut reply = json!({"jsonrpc": "2.0", "id": id});
    reply["result"] = result;
    reply
}

fn status_reply(status: u16, location: Option<&str>) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if status.is_redirection() {
        // By default an internal target: following it would be the SSRF the guard stops.
        let location = location.unwrap_or("http://10.0.0.1/mcp").to_owned();
        (status, [(header::LOCATION, location)]).into_response()
    } else {
        (status, "nope").into_response()
    }
}

/// An SSE reply of small events (each far under rmcp's per-event limit) adding up to ~100 KiB.
fn huge_sse(id: &Value) -> Response {
    let mut text = String::new();
    let padding = "x".repeat(1000);
    for _ in 0..100 {
        text.push_str(&format!(": {padding}\n\n"));
    }
    let reply = ok(id, json!({"content": [{"type": "text", "text": "done"}]}));
    text.push_str(&format!("event: message\ndata: {reply}\n\n"));
    ([(header::CONTENT_TYPE, "text/event-stream")], text).into_response()
}
