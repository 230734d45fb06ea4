//! docs/rules.md MCP-92 and MCP-93 end to end: a 2026-07-28 client's `subscriptions/listen`
//! stream through `airlock serve` carries a loopback upstream's
//! `notifications/resources/updated` for the resources the client may read, as served URIs;
//! a session-era client subscribes under its session id and hears them on its session's GET
//! stream (MCP-98, MCP-99).

use std::time::Duration;

use airlock_testkit::{Script, Server as Upstream};
use serde_json::{Value, json};

use crate::mcp::CLAUDE;
use crate::support::{deployment_with, serve_in_process};

/// Connection `crm` on `url`; `claude` may read `crm__watched` only; `egress` adds to
/// `[egress]`.
fn deployment(url: &str, egress: &str) -> tempfile::TempDir {
    let toml = format!(
        "[[mcp.tokens]]\ncredential = \"airlock.claude\"\nprincipal = \"claude\"\n[[access]]\nprincipals = [\"claude\"]\ntools = [\"crm__watched\"]\n[egress]\nallow = [\"127.0.0.1/32\"]\n{egress}[credentials]\nfile = \"creds.yml\"\n"
    );
    let dir = deployment_with(&toml, &format!("airlock:\n  claude: {CLAUDE}\n"));
    std::fs::create_dir(dir.path().join("connections")).unwrap();
    let file = format!("url: {url}\nprotocol: 2026-07-28\n");
    std::fs::write(dir.path().join("connections/crm.yml"), file).unwrap();
    dir
}

/// A 2026-07-28 upstream whose resources can be subscribed to, and `airlock serve` in process
/// on the deployment reaching it (`egress` added to `[egress]`); the deployment lives as long as
/// the directory.
async fn serving(egress: &str) -> (Upstream, tempfile::TempDir, std::net::SocketAddr) {
    let script = Script {
        modern: true,
        subscribe: true,
        ..Script::default()
    };
    let upstream = Upstream::start(script).await;
    let dir = deployment(&upstream.loopback_url(), egress);
    let (addr, _) = serve_in_process(dir.path()).await;
    (upstream, dir, addr)
}

/// A 2026-07-28 request of `method` with `params` (and the request `_meta` that revision asks).
fn modern(base: &str, method: &str, mut params: Value) -> reqwest::RequestBuilder {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method)
        .bearer_auth(CLAUDE)
        .body(body.to_string())
}

/// The stream's messages up to the `times`th update of `uri`.
async fn until_updated(mut response: reqwest::Response, uri: &str, times: usize) -> Vec<Value> {
    let mut text = String::new();
    let mut messages = Vec::new();
    let mut heard = 0;
    loop {
        let chunk = response.chunk().await.unwrap().expect("the stream ended");
        text.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = text.find("\n\n") {
            let event: String = text.drain(..end + 2).collect();
            let data = event.lines().filter_map(|l| l.strip_prefix("data:"));
            let Ok(message) = serde_json::from_str::<Value>(data.collect::<String>().trim()) else {
                continue;
            };
            if message["method"] == "notifications/resources/updated"
                && message["params"]["uri"] == uri
            {
                heard += 1;
            }
            messages.push(message);
            if heard == times {
                return messages;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_92_a_listening_client_hears_the_upstreams_updates_of_what_it_may_read() {
    let (upstream, _dir, addr) = serving("").await;
    let base = format!("http://{addr}");

    let discovered = modern(&base, "server/discover", json!({}))
        .send()
        .await
        .unwrap();
    let discovered: Value = discovered.json().await.unwrap();
    let resources = &discovered["result"]["capabilities"]["resources"];
    assert_eq!(resources["subscribe"], true, "{discovered}");
    let asked = ["crm+test://watched", "crm+test://unwatched"];
    let listen = json!({"notifications": {"resourceSubscriptions": asked}});
    let stream = modern(&base, "subscriptions/listen", listen)
        .send()
        .await
        .unwrap();
    let kind = stream.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(kind.starts_with("text/event-stream"), "{kind}");
    let heard = tokio::time::timeout(
        Duration::from_secs(20),
        until_updated(stream, "crm+test://watched", 1),
    )
    .await
    .expect("no update within 20 s");
    let updates: Vec<&Value> = heard
        .iter()
        .filter(|m| m["method"] == "notifications/resources/updated")
        .collect();
    // The upstream sends `test://elsewhere` first: had it been relayed, it would come first.
    assert_eq!(updates.len(), 1, "{heard:?}");
    // The hidden resource was never asked for upstream.
    let listens = upstream.seen().into_iter();
    let listens: Vec<Value> = listens
        .filter(|s| s.method == "subscriptions/listen")
        .map(|s| s.body["params"]["notifications"]["resourceSubscriptions"].clone())
        .collect();
    assert_eq!(listens, [json!(["test://watched"])]);
}

/// MCP-93: the guard's deadline ends each upstream stream, and airlock listens again at once,
/// so the client's one stream goes on hearing updates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_93_an_upstream_stream_the_deadline_ends_is_listened_to_again() {
    let (upstream, _dir, addr) = serving("deadline = \"1s\"\n").await;
    let listen = json!({"notifications": {"resourceSubscriptions": ["crm+test://watched"]}});
    let stream = modern(&format!("http://{addr}"), "subscriptions/listen", listen);
    let stream = stream.send().await.unwrap();
    // The upstream sends one update per stream: a second one comes from a second stream.
    let heard = tokio::time::timeout(
        Duration::from_secs(20),
        until_updated(stream, "crm+test://watched", 2),
    )
    .await
    .expect("no second update within 20 s");
    assert!(!heard.is_empty());
    let listens = upstream.methods().into_iter();
    let listens = listens.filter(|m| m == "subscriptions/listen").count();
    assert!(listens >= 2, "{listens}");
}

/// A session-era request of `method` with `params` carrying `session`, if any.
fn session_era(
    base: &str,
    session: Option<&str>,
    method: &str,
    params: &Value,
) -> reqwest::RequestBuilder {
    let body = json!({"jsonrpc": "2.0", "id": 5, "method": method, "params": params});
    let mut request = crate::support::mcp_request(base)
        .bearer_auth(CLAUDE)
        .body(body.to_string());
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request
}

/// MCP-98: a session-era client subscribes under the session id `initialize` gave it, and its
/// session's GET stream carries the updates of what it may read; without the id it cannot
/// subscribe, and an id that is not its session's opens no stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_98_a_session_era_client_hears_its_subscriptions_on_its_sessions_stream() {
    let (upstream, _dir, addr) = serving("").await;
    let base = format!("http://{addr}");
    let hello = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}});
    let reply = session_era(&base, None, "initialize", &hello)
        .send()
        .await
        .unwrap();
    let session = reply.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let hello: Value = reply.json().await.unwrap();
    assert_eq!(
        hello["result"]["capabilities"]["resources"]["subscribe"], true,
        "{hello}"
    );
    let uri = |uri: &str| json!({"uri": uri});
    let refused = session_era(
        &base,
        None,
        "resources/subscribe",
        &uri("crm+test://watched"),
    );
    let refused = refused.send().await.unwrap();
    assert_eq!(refused.status().as_u16(), 400);
    let refused: Value = refused.json().await.unwrap();
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    for asked in [
        "crm+test://watched",
        "crm+test://unwatched",
        "crm+test://gone",
    ] {
        let done = session_era(&base, Some(&session), "resources/subscribe", &uri(asked));
        let done: Value = done.send().await.unwrap().json().await.unwrap();
        assert_eq!(done["result"], json!({}), "{done}");
    }
    let gone = session_era(
        &base,
        Some(&session),
        "resources/unsubscribe",
        &uri("crm+test://gone"),
    );
    let gone: Value = gone.send().await.unwrap().json().await.unwrap();
    assert_eq!(gone["result"], json!({}), "{gone}");
    let get = |session: &str| {
        reqwest::Client::new()
            .get(format!("{base}/mcp"))
            .header("accept", "text/event-stream")
            .header("mcp-session-id", session.to_owned())
            .bearer_auth(CLAUDE)
            .send()
    };
    let mut other = session.clone();
    other.insert(
        10,
        if other.as_bytes()[10] == b'A' {
            'B'
        } else {
            'A'
        },
    );
    assert_eq!(get(&other).await.unwrap().status().as_u16(), 404);
    let stream = get(&session).await.unwrap();
    assert_eq!(stream.status().as_u16(), 200);
    let heard = tokio::time::timeout(
        Duration::from_secs(20),
        until_updated(stream, "crm+test://watched", 1),
    )
    .await
    .expect("no update within 20 s");
    assert_eq!(
        heard.len(),
        1,
        "only what it may read and asked for: {heard:?}"
    );
    let listens = upstream.seen().into_iter();
    let listens: Vec<Value> = listens
        .filter(|s| s.method == "subscriptions/listen")
        .map(|s| s.body["params"]["notifications"]["resourceSubscriptions"].clone())
        .collect();
    assert_eq!(listens, [json!(["test://watched"])]);
    let end = reqwest::Client::new()
        .delete(format!("{base}/mcp"))
        .header("mcp-session-id", &session)
        .bearer_auth(CLAUDE)
        .send()
        .await
        .unwrap();
    assert_eq!(end.status().as_u16(), 405, "nothing kept to end");
}
