//! One cause, one kind: an api tool, an MCP tool and `fetch` meeting the same failure store the
//! same `ToolErrorKind` on their rows — a name with no answer, a refused connection and a
//! refused address (nothing sent), a 500, a silent upstream past the deadline. Each fails the
//! call, except the silent upstream for the at-most-once api tool: its request may have been
//! received, so its row is in doubt with the kind kept (LEDGER-19).

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use airlock_egress::{EgressPolicy, GuardedClient, StaticResolver};
use airlock_runtime::Gateway;
use airlock_runtime::ledger::{InvocationState, SqliteStore, StoreConfig, ToolErrorKind};
use airlock_spec::{
    ApiAuth, ApiConnection, ApiOperation, Builtin, CredentialPath, Credentials, McpAuth,
    McpInlineTool, McpProtocol, Method, Policy, Scope, ScopeId, ToolDefinition, ToolName,
    ToolSource, ToolSpec,
};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::gateway::ctx_on;

/// The host every tool type calls; the resolver pins it to 127.0.0.1 unless a test says not.
const HOST: &str = "up.tenant.example.com";

/// A loopback HTTP server that reads each request head and answers `response`, or, with
/// `None`, never answers (the connection stays open).
async fn upstream(response: Option<&'static str>) -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                match response {
                    Some(response) => {
                        socket.write_all(response.as_bytes()).await.ok();
                        socket.shutdown().await.ok();
                    }
                    None => tokio::time::sleep(Duration::from_secs(30)).await,
                }
            });
        }
    });
    port
}

/// A loopback port nothing listens on: bound, then released.
async fn closed_port() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    listener.local_addr().unwrap().port()
}

fn tool(name: &str, source: ToolSource) -> ToolSpec {
    ToolSpec {
        definition: ToolDefinition {
            name: ToolName::try_from(name).unwrap(),
            description: format!("{name} for the same-cause test"),
            input_schema: json!({"type": "object"}),
        },
        source,
        policy: Policy::default(),
    }
}

/// A gateway with an api tool, an inline MCP tool and `fetch`, all aimed at `HOST:port`, where
/// `HOST` resolves to `address` (or to nothing).
async fn gateway(address: Option<IpAddr>, port: u16, dir: &tempfile::TempDir) -> Gateway {
    let mut policy = EgressPolicy::default();
    policy.allow_cidrs.push("127.0.0.1/32".parse().unwrap());
    policy.deadline = Duration::from_millis(500);
    let mut resolver = StaticResolver::new();
    if let Some(address) = address {
        resolver = resolver.with(HOST, [address]);
    }
    let egress = GuardedClient::builder(policy)
        .resolver(Arc::new(resolver))
        .build()
        .unwrap();
    let api = ApiOperation {
        slug: "up".into(),
        operation: "get".into(),
        connection: "up".into(),
        auth: ApiAuth::Bearer,
        method: Method::Get,
        path: "/thing".into(),
        query: Vec::new(),
        body: None,
        allow_slashes: Vec::new(),
        select: None,
    };
    let mcp = McpInlineTool {
        slug: "up".into(),
        remote_name: "echo".into(),
        connection: "up".into(),
        path: "/mcp".into(),
        auth: McpAuth::None,
        protocol: McpProtocol::Legacy,
        offers: false,
        requires_tasks: false,
    };
    let mut scope = Scope::new(ScopeId::Gateway);
    scope.add(tool("up_api", ToolSource::Api(api))).unwrap();
    scope
        .add(tool("up_mcp", ToolSource::McpInline(mcp)))
        .unwrap();
    scope
        .add(ToolSpec {
            definition: airlock_spec::builtin_definition(Builtin::Fetch),
            source: ToolSource::Builtin(Builtin::Fetch),
            policy: Policy::default(),
        })
        .unwrap();
    let store = SqliteStore::open(dir.path().join("ledger.sqlite"), StoreConfig::default())
        .await
        .unwrap();
    let credentials =
        Credentials::from_pairs([("up.token".to_owned(), "tok-same-cause".to_owned())]);
    Gateway::builder(Arc::new(store), egress, Arc::new(credentials))
        .scope(scope)
        .unwrap()
        .connections(
            [(
                "up".to_owned(),
                ApiConnection {
                    // A loopback test upstream: the operator vouches for it (EGRESS-38).
                    use_egress_allow: true,
                    base_url: format!("http://{HOST}:{port}"),
                    credential: Some(CredentialPath::try_from("up.token").unwrap()),
                    per_principal: None,
                },
            )]
            .into(),
        )
        // The same loopback upstream for `fetch`: vouched for as well (EGRESS-40).
        .fetch_uses_egress_allow(true)
        .build()
}

/// Calls the three tools against `port` and returns the state and the kind stored on each row,
/// read back from the ledger.
async fn stored(
    address: Option<IpAddr>,
    port: u16,
) -> Vec<(&'static str, InvocationState, ToolErrorKind)> {
    let dir = tempfile::tempdir().unwrap();
    let gw = gateway(address, port, &dir).await;
    let url = format!("http://{HOST}:{port}/thing");
    let mut kinds = Vec::new();
    for (name, arguments) in [
        ("up_api", json!({})),
        ("up_mcp", json!({})),
        ("fetch", json!({ "url": url })),
    ] {
        let ctx = ctx_on(&gw, "ada", name).await;
        let id = gw
            .call(&ctx, name, arguments)
            .await
            .unwrap()
            .invocation()
            .id;
        let row = gw.store().get(id).await.unwrap();
        kinds.push((name, row.state, row.error.unwrap().kind));
    }
    kinds
}

/// [`stored`], where every call must have failed: the kinds.
async fn stored_kinds(address: Option<IpAddr>, port: u16) -> Vec<(&'static str, ToolErrorKind)> {
    let rows = stored(address, port).await;
    for (tool, state, _) in &rows {
        assert_eq!(*state, InvocationState::Failed, "{tool}: {rows:?}");
    }
    rows.into_iter()
        .map(|(tool, _, kind)| (tool, kind))
        .collect()
}

const LOOPBACK: Option<IpAddr> = Some(IpAddr::V4(Ipv4Addr::LOCALHOST));

fn assert_all(kinds: &[(&str, ToolErrorKind)], expected: ToolErrorKind) {
    for (tool, kind) in kinds {
        assert_eq!(*kind, expected, "{tool}: {kinds:?}");
    }
}

#[tokio::test]
async fn a_name_with_no_answer_is_unreachable_for_every_tool_type() {
    let port = closed_port().await;
    assert_all(&stored_kinds(None, port).await, ToolErrorKind::Unreachable);
}

#[tokio::test]
async fn a_refused_connection_is_unreachable_for_every_tool_type() {
    let port = closed_port().await;
    assert_all(
        &stored_kinds(LOOPBACK, port).await,
        ToolErrorKind::Unreachable,
    );
}

#[tokio::test]
async fn a_refused_address_is_blocked_for_every_tool_type() {
    // A private address the policy does not allow: the guard refuses before connecting.
    let private = Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
    assert_all(&stored_kinds(private, 80).await, ToolErrorKind::Blocked);
}

#[tokio::test]
async fn a_500_is_upstream_error_for_every_tool_type() {
    let port = upstream(Some(
        "HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\n\
         content-length: 4\r\nconnection: close\r\n\r\noops",
    ))
    .await;
    assert_all(
        &stored_kinds(LOOPBACK, port).await,
        ToolErrorKind::UpstreamError,
    );
}

#[tokio::test]
async fn a_silent_upstream_is_a_timeout_for_every_tool_type() {
    let port = upstream(None).await;
    let rows = stored(LOOPBACK, port).await;
    let states: Vec<_> = rows.iter().map(|(_, state, _)| *state).collect();
    use InvocationState::{Failed, InDoubt};
    // The MCP session never got past `initialize`, so its `tools/call` was never sent (MCP-23).
    assert_eq!(states, [InDoubt, Failed, Failed], "{rows:?}");
    let kinds: Vec<_> = rows
        .into_iter()
        .map(|(tool, _, kind)| (tool, kind))
        .collect();
    assert_all(&kinds, ToolErrorKind::Timeout);
}
