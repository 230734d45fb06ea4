//! docs/rules.md MCP-92 and MCP-93 end to end: a 2026-07-28 client's `subscriptions/listen`
//! stream through `airlock serve` carries a loopback upstream's
//! `notifications/resources/updated` for the resources the client may read, as served URIs;
//! session-era clients are offered no subscription.

use std::time::Duration;

use airlock_testkit::{Script, Server as Upstream};
use serde_json::{Value, json};

use crate::mcp::{CLAUDE, rpc};
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
    let script = Script {
        modern: true,
        subscribe: true,
        ..Script::default()
    };
    let upstream = Upstream::start(script).await;
    let dir = deployment(&upstream.loopback_url(), "");
    let (addr, _) = serve_in_process(dir.path()).await;
    let base = format!("http://{addr}");

    let discovered = modern(&base, "server/discover", json!({}))
        .send()
        .await
        .unwrap();
    let discovered: Value = discovered.json().await.unwrap();
    let resources = &discovered["result"]["capabilities"]["resources"];
    assert_eq!(resources["subscribe"], true, "{discovered}");
    // MCP-93: a session-era client is offered no subscription.
    let hello = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let (_, hello) = rpc(&base, Some(CLAUDE), hello).await;
    assert_eq!(
        hello["result"]["capabilities"]["resources"],
        json!({}),
        "{hello}"
    );
    let subscribe = json!({"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": "crm+test://watched"}});
    let (_, refused) = rpc(&base, Some(CLAUDE), subscribe).await;
    assert_eq!(refused["error"]["code"], -32601, "{refused}");

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
    let script = Script {
        modern: true,
        subscribe: true,
        ..Script::default()
    };
    let upstream = Upstream::start(script).await;
    let dir = deployment(&upstream.loopback_url(), "deadline = \"1s\"\n");
    let (addr, _) = serve_in_process(dir.path()).await;
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
