//! Connections supplied with a run (docs/rules.md AGENT-12): used for that run's calls instead
//! of `airlock.toml`'s, and never stored.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use airlock_egress::{EgressPolicy, GuardedClient, StaticResolver};
use airlock_runtime::agent::{Limits, RunConnection, RunState};
use airlock_spec::{
    ApiAuth, ApiConnection, ApiOperation, CredentialPath, Credentials, Method, Policy,
    ToolDefinition, ToolName, ToolSource, ToolSpec,
};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::{Extras, TREE, World, answer, calls, request, run_with_events};
use crate::gateway::Backend;

const RUN_SECRET: &str = "run-secret-4b1d";

/// A one-shot HTTP server: answers one request and hands back the request head.
async fn server() -> (u16, tokio::task::JoinHandle<String>) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut buf = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = socket.read(&mut buf).await.unwrap();
            assert!(n > 0, "client closed early");
            head.extend_from_slice(&buf[..n]);
        }
        let body = "{\"total\":42}";
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        socket.write_all(response.as_bytes()).await.unwrap();
        socket.shutdown().await.ok();
        String::from_utf8_lossy(&head).into_owned()
    });
    (port, task)
}

fn erp_tool() -> ToolSpec {
    ToolSpec {
        definition: ToolDefinition {
            name: ToolName::try_from("erp_total").unwrap(),
            description: "The total.".into(),
            input_schema: json!({"type": "object", "properties": {}}),
        },
        source: ToolSource::Api(ApiOperation {
            slug: "erp".into(),
            operation: "total".into(),
            connection: "erp_main".into(),
            auth: ApiAuth::Bearer,
            method: Method::Get,
            path: "/total".into(),
            query: Vec::new(),
            body: None,
            allow_slashes: Vec::new(),
            select: None,
        }),
        policy: Policy::default(),
    }
}

#[tokio::test]
async fn a_supplied_connection_is_used_for_the_run_and_never_stored() {
    let w = World::new(Backend::Sqlite).await.unwrap();
    let (port, head) = server().await;
    let mut policy = EgressPolicy::default();
    policy.allow_cidrs.push("127.0.0.1/32".parse().unwrap());
    let resolver =
        StaticResolver::new().with("api.tenant.example.com", [IpAddr::V4(Ipv4Addr::LOCALHOST)]);
    let egress = GuardedClient::builder(policy)
        .resolver(Arc::new(resolver))
        .build()
        .unwrap();
    // airlock.toml's connection points nowhere useful, with another credential.
    let configured = ApiConnection {
        base_url: "http://api.tenant.example.com:9/v0".into(),
        credential: Some(CredentialPath::try_from("erp.token").unwrap()),
    };
    let extras = Extras {
        egress: Some(egress),
        connections: BTreeMap::from([("erp_main".to_owned(), configured)]),
        credentials: Credentials::from_pairs([("erp.token".to_owned(), "toml-secret".to_owned())]),
        boss_tools: vec![erp_tool()],
        clock: None,
    };
    let agents = w.agents_with(Arc::clone(&w.store), TREE, Limits::default(), extras);
    w.script("boss", [calls(&[("erp_total", json!({}))]), answer("42")]);
    let mut req = request("boss", "the total?");
    req.connections.insert(
        "erp_main".into(),
        RunConnection {
            base_url: format!("http://api.tenant.example.com:{port}/v1"),
            credential: RUN_SECRET.to_owned().into(),
        },
    );
    let debugged = format!("{req:?}");
    let (report, events) = run_with_events(&agents, req).await;
    assert_eq!(report.status, RunState::Completed, "{report:?}");
    let head = head.await.unwrap().to_ascii_lowercase();
    assert!(head.starts_with("get /v1/total http/1.1\r\n"), "{head}");
    assert!(
        head.contains(&format!("authorization: bearer {RUN_SECRET}")),
        "{head}"
    );
    // Nowhere in the ledger, the report or the events.
    let rows = w.store.run_invocations(report.run_id).await.unwrap();
    let detail = w.store.run_detail(report.run_id).await.unwrap().unwrap();
    let steps = w.store.run_steps(report.run_id).await.unwrap();
    let stored = format!("{rows:?}{detail:?}{steps:?}{report:?}{events:?}{debugged}");
    assert!(!stored.contains(RUN_SECRET));
}
