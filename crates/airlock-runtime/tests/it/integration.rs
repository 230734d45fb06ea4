//! Catalog integrations executed along the one path (docs/rules.md DECL-44..DECL-47): a
//! deployment directory with `catalog/tickets/integration.yaml`, loaded as at boot, its agent's
//! scope served by a real gateway, and a real HTTP server on 127.0.0.1 reached only through the
//! egress guard. Path, query, header and body templates, pagination and `response.select`.

use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

use airlock_egress::{EgressPolicy, GuardedClient};
use airlock_runtime::ToolErrorKind;
use airlock_runtime::ledger::{Invocation, InvocationState, Settlement, StoreConfig};
use airlock_runtime::{CallContext, Gateway};
use airlock_spec::{Credentials, Deployment, ScopeId};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::gateway::{Backend, location, open};

const TOKEN: &str = "tok-integration-5e1f";

/// One request as the server read it.
#[derive(Debug, Clone)]
struct Seen {
    head: String,
    body: String,
}

/// A server answering each request with the next of `bodies` (JSON, 200), one per connection.
async fn server(bodies: Vec<Value>) -> (u16, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        for body in bodies {
            let (mut socket, _) = listener.accept().await.unwrap();
            let request = read_request(&mut socket).await;
            log.lock().unwrap().push(request);
            let text = body.to_string();
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                text.len()
            );
            socket.write_all(response.as_bytes()).await.unwrap();
            socket.shutdown().await.ok();
        }
    });
    (port, seen)
}

async fn read_request(socket: &mut tokio::net::TcpStream) -> Seen {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = socket.read(&mut buf).await.unwrap();
        assert!(n > 0, "client closed early");
        data.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&data[..end]).into_owned();
    let length = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse::<usize>().unwrap())
        })
        .unwrap_or(0);
    while data.len() < end + length {
        let n = socket.read(&mut buf).await.unwrap();
        assert!(n > 0, "client closed early");
        data.extend_from_slice(&buf[..n]);
    }
    let body = String::from_utf8_lossy(&data[end..end + length]).into_owned();
    Seen { head, body }
}

fn catalog(port: u16) -> String {
    format!(
        "\
base_url: http://127.0.0.1:{port}/api
auth: {{ scheme: bearer, credential: tickets.token }}
headers: {{ X-Client: airlock }}
actions:
  - name: search
    description: Search tickets.
    parameters:
      q: {{ type: string, required: true }}
    request: {{ method: GET, path: /tickets, query: {{ q: \"{{q}}\" }} }}
    pagination: {{ style: cursor, param: cursor, next: meta.next, max_pages: 3 }}
    response: {{ select: data }}
  - name: comment
    description: Comment on a ticket.
    parameters:
      id: {{ type: string, required: true }}
      text: {{ type: string, required: true }}
      count: {{ type: integer }}
    request:
      method: PUT
      path: /tickets/{{id}}/comments
      headers: {{ X-Ticket: \"{{id}}\" }}
      body: {{ text: \"{{text}}\", count: \"{{count}}\" }}
    response: {{ select: result.id }}
    confirm: false
  - name: pages
    description: List tickets page by page.
    request: {{ method: GET, path: /all }}
    pagination: {{ style: page, param: page, max_pages: 5 }}
    response: {{ select: items }}
"
    )
}

const AGENT: &str = "apiVersion: airlock/v1\nkind: Agent\nmetadata:\n  name: desk\nspec:\n  model: { provider: openai, model: m }\n  prompts: { system: test }\n  tools:\n    - type: integration\n      integration: tickets\n      actions: [search, comment, pages]\n";

/// A gateway serving the `desk` agent's scope as loaded from a deployment directory, whose
/// operator vouched for the loopback catalog integration (`[egress] allow_integrations`).
async fn gateway(port: u16, dir: &tempfile::TempDir) -> Gateway {
    gateway_vouching(port, dir, &["tickets".to_owned()]).await
}

async fn gateway_vouching(port: u16, dir: &tempfile::TempDir, vouched: &[String]) -> Gateway {
    let root = dir.path().join("deploy");
    std::fs::create_dir_all(root.join("catalog/tickets")).unwrap();
    std::fs::create_dir_all(root.join("agents")).unwrap();
    std::fs::write(root.join("catalog/tickets/integration.yaml"), catalog(port)).unwrap();
    std::fs::write(root.join("agents/desk.yml"), AGENT).unwrap();
    let deployment = Deployment::load(&root).unwrap();
    let scope = deployment.agent_scope("desk").unwrap();
    let location = location(Backend::Sqlite, dir).await.unwrap();
    let store = open(&location, StoreConfig::default()).await;
    let mut policy = EgressPolicy::default();
    policy.allow_cidrs.push("127.0.0.1/32".parse().unwrap());
    let egress = GuardedClient::new(policy).unwrap();
    let credentials = Credentials::from_pairs([("tickets.token".to_owned(), TOKEN.to_owned())]);
    Gateway::builder(store, egress, Arc::new(credentials))
        .integrations_use_egress_allow(vouched)
        .scope(scope)
        .unwrap()
        .build()
}

async fn call(gateway: &Gateway, tool: &str, arguments: Value) -> Value {
    let row = call_row(gateway, tool, arguments).await;
    assert_eq!(row.state, InvocationState::Succeeded, "{row:?}");
    match row.settlement() {
        Some(Settlement::Succeeded(value)) => value.clone(),
        other => panic!("{other:?}"),
    }
}

async fn call_row(gateway: &Gateway, tool: &str, arguments: Value) -> Invocation {
    let scope = ScopeId::Agent("desk".into());
    let session = gateway.open_session("cli", None, &scope).await.unwrap();
    let ctx = CallContext {
        scope,
        session,
        call_id: "c1".into(),
        principal: None,
        groups: None,
        channel: "cli",
        downstream: Default::default(),
    };
    gateway
        .call(&ctx, tool, arguments)
        .await
        .unwrap()
        .into_invocation()
}

/// EGRESS-38: a catalog integration is a tenant's destination: with `[egress] allow` covering
/// loopback but the integration not named in `allow_integrations`, its call is blocked before
/// anything is sent.
#[tokio::test]
async fn an_integration_the_operator_did_not_vouch_for_reaches_public_addresses_only() {
    let dir = tempfile::tempdir().unwrap();
    let (port, seen) = server(vec![json!({"data": [], "meta": {"next": null}})]).await;
    let gateway = gateway_vouching(port, &dir, &[]).await;
    let row = call_row(&gateway, "tickets_search", json!({"q": "x"})).await;
    assert_eq!(row.state, InvocationState::Failed, "{row:?}");
    let error = row.error.clone().expect("a tool error");
    assert_eq!(error.kind, ToolErrorKind::Blocked, "{error:?}");
    assert!(
        seen.lock().unwrap().is_empty(),
        "nothing reached the upstream"
    );
}

#[tokio::test]
async fn cursor_pages_are_fetched_and_their_selected_lists_joined() {
    let dir = tempfile::tempdir().unwrap();
    let (port, seen) = server(vec![
        json!({"data": [{"id": 1}, {"id": 2}], "meta": {"next": "c/2 x"}}),
        json!({"data": [{"id": 3}], "meta": {"next": null}}),
    ])
    .await;
    let gateway = gateway(port, &dir).await;
    let result = call(&gateway, "tickets_search", json!({"q": "a&b=c"})).await;
    assert_eq!(result, json!([{"id": 1}, {"id": 2}, {"id": 3}]));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    // The query value is encoded once; the cursor from the upstream is only a query value.
    assert!(
        seen[0]
            .head
            .starts_with("GET /api/tickets?q=a%26b%3Dc HTTP/1.1\r\n"),
        "{}",
        seen[0].head
    );
    assert!(
        seen[1]
            .head
            .starts_with("GET /api/tickets?q=a%26b%3Dc&cursor=c%2F2+x HTTP/1.1\r\n"),
        "{}",
        seen[1].head
    );
    let head = seen[0].head.to_ascii_lowercase();
    assert!(head.contains(&format!(
        "authorization: bearer {}",
        TOKEN.to_ascii_lowercase()
    )));
    assert!(head.contains("x-client: airlock"));
}

#[tokio::test]
async fn numbered_pages_stop_at_an_empty_page() {
    let dir = tempfile::tempdir().unwrap();
    let (port, seen) = server(vec![
        json!({"items": ["a", "b"]}),
        json!({"items": ["c"]}),
        json!({"items": []}),
    ])
    .await;
    let gateway = gateway(port, &dir).await;
    let result = call(&gateway, "tickets_pages", json!({})).await;
    assert_eq!(result, json!(["a", "b", "c"]));
    let heads: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.head.lines().next().unwrap().to_owned())
        .collect();
    assert_eq!(
        heads,
        [
            "GET /api/all?page=1 HTTP/1.1",
            "GET /api/all?page=2 HTTP/1.1",
            "GET /api/all?page=3 HTTP/1.1"
        ]
    );
}

#[tokio::test]
async fn a_write_fills_path_header_and_body_templates_and_selects_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let (port, seen) = server(vec![json!({"result": {"id": "cm-9", "other": 1}})]).await;
    let gateway = gateway(port, &dir).await;
    let arguments = json!({"id": "T 7?x#", "text": "say \"hi\"", "count": 2});
    let result = call(&gateway, "tickets_comment", arguments).await;
    assert_eq!(result, json!("cm-9"));
    let seen = seen.lock().unwrap()[0].clone();
    // The path value is percent-encoded: it cannot add a query, a fragment or another host
    // (a `/` in it is refused outright unless declared in `allow_slashes`).
    assert!(
        seen.head
            .starts_with("PUT /api/tickets/T%207%3Fx%23/comments HTTP/1.1\r\n"),
        "{}",
        seen.head
    );
    assert!(seen.head.to_ascii_lowercase().contains("x-ticket: t 7?x#"));
    assert!(seen.head.to_ascii_lowercase().contains("idempotency-key:"));
    // JSON-encoded body; the number keeps its type.
    let body: Value = serde_json::from_str(&seen.body).unwrap();
    assert_eq!(body, json!({"text": "say \"hi\"", "count": 2}));
}
