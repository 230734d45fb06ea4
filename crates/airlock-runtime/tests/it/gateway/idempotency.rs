//! LEDGER-17: every upstream call that is not a read carries the invocation's idempotency key —
//! `Idempotency-Key: "<invocation id>"` on api tools, `_meta["airlock/idempotency_key"]` on MCP
//! tools — the same on every run of one invocation, another for another invocation; reads carry
//! none.

use std::net::{IpAddr, Ipv4Addr};

use airlock_egress::StaticResolver;
use airlock_runtime::ledger::{Invocation, Resolution};
use airlock_spec::{
    ApiAuth, ApiConnection, ApiOperation, ConnectionSpec, ConnectionTool, CredentialPath, McpAuth,
    McpProtocol, Method,
};
use airlock_testkit::{Script, Server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::*;

on_both_backends!(
    an_at_most_once_api_write_rerun_after_did_not_run_sends_the_same_key,
    an_idempotent_api_write_rerun_after_a_lost_lease_sends_the_same_key,
);

const OK: &str = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\nconnection: close\r\n\r\n{\"ok\":true}";

/// An HTTP API on 127.0.0.1 that sends each request's head down a channel; the first request
/// is never answered when `hang_first` (a call whose answer was lost), every other gets `OK`.
async fn api_upstream(hang_first: bool) -> (u16, mpsc::UnboundedReceiver<String>) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (heads, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        for n in 0.. {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            let heads = heads.clone();
            tokio::spawn(answer(socket, heads, hang_first && n == 0));
        }
    });
    (port, rx)
}

async fn answer(mut socket: TcpStream, heads: mpsc::UnboundedSender<String>, hang: bool) {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        if let Some(at) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        match socket.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    };
    let head = String::from_utf8_lossy(&seen[..end]).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    while seen.len() < end + length {
        match socket.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
    let _ = heads.send(head);
    if hang {
        std::future::pending::<()>().await;
    }
    let _ = socket.write_all(OK.as_bytes()).await;
    let _ = socket.shutdown().await;
}

fn operation(name: &str, method: Method) -> ApiOperation {
    ApiOperation {
        slug: "erp".into(),
        operation: name.into(),
        connection: "erp_main".into(),
        auth: ApiAuth::Bearer,
        method,
        path: format!("/{name}"),
        query: Vec::new(),
        body: (method == Method::Post).then(|| json!({"note": "hello"})),
        allow_slashes: Vec::new(),
        select: None,
    }
}

fn api_tool(name: &str, method: Method, writes: bool, effect: Effect) -> ToolSpec {
    ToolSpec {
        definition: ToolDefinition {
            name: ToolName::try_from(name).unwrap(),
            description: format!("The {name} operation."),
            input_schema: json!({"type": "object"}),
        },
        source: ToolSource::Api(operation(name, method)),
        policy: Policy {
            effect,
            writes,
            ..Policy::default()
        },
    }
}

/// A gateway whose api tools reach `port` on 127.0.0.1 as `api.tenant.example.com`, and whose
/// connection tool `crm__create_note` reaches `mcp` (when given).
fn gateway(store: Arc<dyn Store>, port: u16, mcp: Option<&Server>) -> Gateway {
    let mut scope = Scope::new(ScopeId::Gateway);
    for spec in [
        api_tool("create", Method::Post, true, Effect::AtMostOnce),
        api_tool("upsert", Method::Post, true, Effect::Idempotent),
        api_tool("lookup", Method::Get, false, Effect::AtMostOnce),
        api_tool("search", Method::Post, false, Effect::AtMostOnce),
    ] {
        scope.add(spec).unwrap();
    }
    let note = ToolSpec {
        definition: ToolDefinition {
            name: ToolName::try_from("crm__create_note").unwrap(),
            description: "Create a note.".into(),
            input_schema: json!({"type": "object"}),
        },
        source: ToolSource::Connection(ConnectionTool {
            namespace: "crm".into(),
            remote_name: "echo".into(),
            output_schema: None,
        }),
        policy: Policy::default(),
    };
    scope.add(note).unwrap();
    let mut policy = EgressPolicy::default();
    policy.allow_cidrs.push("127.0.0.1/32".parse().unwrap());
    let resolver = StaticResolver::new()
        .with("api.tenant.example.com", [IpAddr::V4(Ipv4Addr::LOCALHOST)])
        .with("mcp.upstream.io", [IpAddr::V4(Ipv4Addr::LOCALHOST)]);
    let egress = GuardedClient::builder(policy)
        .resolver(Arc::new(resolver))
        .build()
        .unwrap();
    let credentials = Credentials::from_pairs([("erp.token".to_owned(), "tok".to_owned())]);
    let connection = ApiConnection {
        // A loopback test upstream: the operator vouches for it (EGRESS-38).
        use_egress_allow: true,
        base_url: format!("http://api.tenant.example.com:{port}"),
        credential: Some(CredentialPath::try_from("erp.token").unwrap()),
        per_principal: None,
    };
    let crm = mcp.map(|server| ConnectionSpec {
        namespace: "crm".into(),
        file: "connections/crm.yml".into(),
        url: server.url(),
        auth: McpAuth::None,
        credential: None,
        approval: Approval::Never,
        effect: Effect::AtMostOnce,
        protocol: McpProtocol::Legacy,
        approval_ttl: None,
    });
    Gateway::builder(store, egress, Arc::new(credentials))
        .scope(scope)
        .expect("the scope's schemas compile")
        .connections([("erp_main".to_owned(), connection)].into())
        .mcp_connections(crm.into_iter().collect())
        .build()
}

async fn ctx(gateway: &Gateway) -> CallContext {
    ctx_on(gateway, "ada", "c1").await
}

fn key_of(head: &str) -> Option<&str> {
    head.lines()
        .find_map(|l| l.strip_prefix("idempotency-key: "))
}

/// Sends a call of `tool` whose upstream never answers and drops it once the request is out,
/// as a process that died mid-call: the row stays `running` until its lease runs out.
async fn lost_call(
    gateway: &Gateway,
    heads: &mut mpsc::UnboundedReceiver<String>,
    tool: &str,
) -> (Invocation, String) {
    let ctx = ctx(gateway).await;
    let head = tokio::select! {
        outcome = gateway.call(&ctx, tool, json!({})) => panic!("answered: {outcome:?}"),
        head = heads.recv() => head.unwrap(),
    };
    let rows = gateway
        .store()
        .session_invocations(ctx.session)
        .await
        .unwrap();
    (rows.into_iter().next().unwrap(), head)
}

/// Runs the swept row again and checks both runs sent the row's key, and a new call another.
async fn rerun_sends_the_same_key(
    gateway: &Gateway,
    heads: &mut mpsc::UnboundedReceiver<String>,
    row: &Invocation,
    first: &str,
) {
    let rerun = gateway.continue_approved(row.id).await.unwrap();
    assert_eq!(
        rerun.invocation().state,
        InvocationState::Succeeded,
        "{rerun:?}"
    );
    let second = heads.recv().await.unwrap();
    let expected = format!("\"{}\"", row.id);
    assert_eq!(key_of(first), Some(expected.as_str()), "{first}");
    assert_eq!(key_of(&second), Some(expected.as_str()), "{second}");
    let other = gateway
        .call(&ctx(gateway).await, &row.tool, json!({}))
        .await
        .unwrap();
    let third = heads.recv().await.unwrap();
    let expected = format!("\"{}\"", other.invocation().id);
    assert_ne!(other.invocation().id, row.id);
    assert_eq!(key_of(&third), Some(expected.as_str()), "{third}");
}

async fn an_at_most_once_api_write_rerun_after_did_not_run_sends_the_same_key(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some(store) = store(backend, &dir).await else {
        return;
    };
    let (port, mut heads) = api_upstream(true).await;
    let gateway = gateway(store, port, None);
    let (row, first) = lost_call(&gateway, &mut heads, "create").await;
    let later = time::OffsetDateTime::now_utc() + Duration::from_secs(3600);
    let swept = gateway.store().sweep(later).await.unwrap();
    assert_eq!(swept.in_doubt, vec![row.id]);
    let did_not_run = Decision::Resolve {
        resolution: Resolution::DidNotRun,
        note: "the ERP has no such record".into(),
    };
    gateway
        .store()
        .decide(row.id, "olga", did_not_run)
        .await
        .unwrap();
    rerun_sends_the_same_key(&gateway, &mut heads, &row, &first).await;
}

async fn an_idempotent_api_write_rerun_after_a_lost_lease_sends_the_same_key(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some(store) = store(backend, &dir).await else {
        return;
    };
    let (port, mut heads) = api_upstream(true).await;
    let gateway = gateway(store, port, None);
    let (row, first) = lost_call(&gateway, &mut heads, "upsert").await;
    let later = time::OffsetDateTime::now_utc() + Duration::from_secs(3600);
    gateway.store().sweep(later).await.unwrap();
    assert_eq!(
        gateway.store().get(row.id).await.unwrap().state,
        InvocationState::Approved
    );
    rerun_sends_the_same_key(&gateway, &mut heads, &row, &first).await;
}

/// A `GET` declared `writes: false` is a read and sends no key; a `POST` does, whatever its
/// declaration says.
#[tokio::test]
async fn an_api_read_sends_no_key_and_a_post_always_does() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(Backend::Sqlite, &dir).await.unwrap();
    let (port, mut heads) = api_upstream(false).await;
    let gateway = gateway(store, port, None);
    let read = gateway
        .call(&ctx(&gateway).await, "lookup", json!({}))
        .await;
    assert_eq!(read.unwrap().invocation().state, InvocationState::Succeeded);
    let head = heads.recv().await.unwrap();
    assert!(head.starts_with("get /lookup "), "{head}");
    assert_eq!(key_of(&head), None, "{head}");
    let search = gateway
        .call(&ctx(&gateway).await, "search", json!({}))
        .await;
    let id = search.unwrap().invocation().id;
    let head = heads.recv().await.unwrap();
    assert_eq!(key_of(&head), Some(format!("\"{id}\"").as_str()), "{head}");
}

/// An at-most-once call of a connection tool (not known to be a read) carries its key in
/// `_meta`, as idempotent calls always did.
#[tokio::test]
async fn an_at_most_once_mcp_call_carries_its_key_in_meta() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(Backend::Sqlite, &dir).await.unwrap();
    let server = Server::start(Script::default()).await;
    let gateway = gateway(store, 9, Some(&server));
    let outcome = gateway
        .call(&ctx(&gateway).await, "crm__create_note", json!({"n": 1}))
        .await
        .unwrap();
    let row = outcome.invocation();
    assert_eq!(row.state, InvocationState::Succeeded, "{outcome:?}");
    let call = server
        .seen()
        .into_iter()
        .find(|s| s.method == "tools/call")
        .unwrap();
    assert_eq!(
        call.body["params"]["_meta"]["airlock/idempotency_key"],
        json!(row.id.to_string()),
        "{}",
        call.body
    );
}
