//! Connections supplied with a run (docs/rules.md AGENT-12): used for that run's calls instead
//! of `airlock.toml`'s, and never stored.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use airlock_egress::{EgressPolicy, GuardedClient, StaticResolver};
use airlock_runtime::agent::{Limits, RunConnection, RunCredential, RunState};
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
    // airlock.toml's `erp_main` is vouched for at the same destination, under another path
    // and with another credential: the supplied one is what the call uses.
    let extras = deployment_at(port, true, erp_tool());
    let agents = w.agents_with(Arc::clone(&w.store), TREE, Limits::default(), extras);
    w.script("boss", [calls(&[("erp_total", json!({}))]), answer("42")]);
    let req = supplying(port);
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

/// An HTTP server that answers every request `{"total":42}` and counts them.
async fn counting_server() -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = Arc::clone(&count);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut buf = [0u8; 4096];
            let _ = socket.read(&mut buf).await;
            let body = "{\"total\":42}";
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(response.as_bytes()).await;
        }
    });
    (port, count)
}

/// `erp_main` in airlock.toml at `port` (vouched for by the operator when `vouched`), with the
/// guard resolving `api.tenant.example.com` to loopback and `[egress] allow` covering it.
fn deployment_at(port: u16, vouched: bool, tool: ToolSpec) -> Extras {
    let mut policy = EgressPolicy::default();
    policy.allow_cidrs.push("127.0.0.1/32".parse().unwrap());
    let resolver =
        StaticResolver::new().with("api.tenant.example.com", [IpAddr::V4(Ipv4Addr::LOCALHOST)]);
    let egress = GuardedClient::builder(policy)
        .resolver(Arc::new(resolver))
        .build()
        .unwrap();
    let configured = ApiConnection {
        use_egress_allow: vouched,
        base_url: format!("http://api.tenant.example.com:{port}/v0"),
        credential: Some(CredentialPath::try_from("erp.token").unwrap()),
        per_principal: None,
    };
    Extras {
        egress: Some(egress),
        connections: BTreeMap::from([("erp_main".to_owned(), configured)]),
        credentials: Credentials::from_pairs([("erp.token".to_owned(), "toml-secret".to_owned())]),
        boss_tools: vec![tool],
        clock: None,
    }
}

/// A run request supplying `erp_main` at `port`.
fn supplying(port: u16) -> airlock_runtime::agent::RunRequest {
    let mut req = request("boss", "the total?");
    req.connections.insert(
        "erp_main".into(),
        RunConnection {
            base_url: format!("http://api.tenant.example.com:{port}/v1"),
            credential: RunCredential::Token(RUN_SECRET.to_owned().into()),
        },
    );
    req
}

fn seen(count: &std::sync::atomic::AtomicUsize) -> usize {
    count.load(std::sync::atomic::Ordering::SeqCst)
}

/// EGRESS-38: a URL a run's caller supplies reaches public addresses only, whatever `[egress]
/// allow` says — unless the operator vouched for the connection's name and the URL keeps its
/// destination. Supplying another destination under a vouched name (here: another port of the
/// loopback host) is blocked too: vouching for one service opens no other. A blocked call is a
/// tool error the model sees, nothing reaches the upstream, and the run goes on.
#[tokio::test]
async fn a_supplied_url_reaches_public_addresses_only_unless_the_operator_vouched() {
    let (port, count) = counting_server().await;
    let (elsewhere, _) = counting_server().await;
    for (configured_at, vouched) in [(port, false), (elsewhere, true)] {
        let w = World::new(Backend::Sqlite).await.unwrap();
        let extras = deployment_at(configured_at, vouched, erp_tool());
        let agents = w.agents_with(Arc::clone(&w.store), TREE, Limits::default(), extras);
        w.script(
            "boss",
            [calls(&[("erp_total", json!({}))]), answer("blocked")],
        );
        let report = agents
            .run(supplying(port), None, Default::default())
            .await
            .unwrap();
        assert_eq!(report.status, RunState::Completed, "{report:?}");
        let row = &w.store.run_invocations(report.run_id).await.unwrap()[0];
        let error = row.error.clone().expect("a tool error");
        assert_eq!(
            error.kind,
            airlock_runtime::ToolErrorKind::Blocked,
            "{error:?}"
        );
        // The name resolved to loopback: the caller is not told so.
        assert!(!error.message.contains("127.0.0.1"), "{}", error.message);
    }
    assert_eq!(seen(&count), 0);
    // Vouched, and the supplied URL keeps the destination: it is reached.
    let w = World::new(Backend::Sqlite).await.unwrap();
    let extras = deployment_at(port, true, erp_tool());
    let agents = w.agents_with(Arc::clone(&w.store), TREE, Limits::default(), extras);
    w.script("boss", [calls(&[("erp_total", json!({}))]), answer("42")]);
    let report = agents
        .run(supplying(port), None, Default::default())
        .await
        .unwrap();
    let row = &w.store.run_invocations(report.run_id).await.unwrap()[0];
    assert_eq!(
        row.state,
        airlock_runtime::ledger::InvocationState::Succeeded,
        "{row:?}"
    );
    assert_eq!(seen(&count), 1);
}

/// AGENT-63: a run whose caller supplied `erp_main` parks; the process restarts, a person
/// approves, and the new process — which never held the supplied connection — resumes it. The
/// run fails naming the connection, and neither upstream is called: least of all
/// airlock.toml's `erp_main`, which once quietly took the supplied one's place.
#[tokio::test]
async fn a_restarted_run_never_reaches_the_deployments_connection_instead() {
    let w = World::new(Backend::Sqlite).await.unwrap();
    let (supplied_port, supplied_count) = counting_server().await;
    let (toml_port, toml_count) = counting_server().await;
    let mut gated = erp_tool();
    gated.policy.approval = airlock_spec::Approval::Always;
    let agents = w.agents_with(
        Arc::clone(&w.store),
        TREE,
        Limits::default(),
        deployment_at(toml_port, true, gated.clone()),
    );
    w.script("boss", [calls(&[("erp_total", json!({}))]), answer("done")]);
    let parked = agents
        .run(supplying(supplied_port), None, Default::default())
        .await
        .unwrap();
    assert_eq!(parked.status, RunState::Parked, "{parked:?}");
    drop(agents);

    let store = w.other_process().await;
    super::approve(store.as_ref(), parked.waiting[0]).await;
    assert_eq!(
        store.resume_run(parked.run_id).await.unwrap(),
        airlock_runtime::ledger::ResumeOutcome::Resumed
    );
    let restarted = w.agents_with(
        store,
        TREE,
        Limits::default(),
        deployment_at(toml_port, true, gated),
    );
    let done = restarted.continue_resumed(parked.run_id).await.unwrap();
    assert_eq!(done.status, RunState::Failed, "{done:?}");
    let why = done.error.clone().unwrap_or_default();
    assert!(
        why.contains("`erp_main`") && why.contains("no longer held"),
        "{why}"
    );
    assert_eq!((seen(&supplied_count), seen(&toml_count)), (0, 0));
}

/// AGENT-64: a proposal of a run whose caller supplied its connection cannot be approved for
/// airlock to run (it holds no credential for it and never swaps in airlock.toml's): the
/// approval is refused naming why, the proposal stays `proposed`, and nothing is called.
#[tokio::test]
async fn approving_a_proposal_through_a_supplied_connection_is_refused_naming_why() {
    let w = World::new(Backend::Sqlite).await.unwrap();
    let (port, count) = counting_server().await;
    let mut proposing = erp_tool();
    proposing.policy.writes = true;
    proposing.policy.mode = airlock_spec::Mode::Propose;
    let agents = w.agents_with(
        Arc::clone(&w.store),
        TREE,
        Limits::default(),
        deployment_at(port, true, proposing),
    );
    w.script(
        "boss",
        [calls(&[("erp_total", json!({}))]), answer("proposed")],
    );
    let report = agents
        .run(supplying(port), None, Default::default())
        .await
        .unwrap();
    assert_eq!(report.proposals.len(), 1, "{report:?}");
    let id = report.proposals[0].id;
    let refused = airlock_runtime::decisions::record(
        w.store.as_ref(),
        &[],
        id,
        "alice",
        airlock_runtime::ledger::Decision::Approve,
        "api",
    )
    .await
    .expect_err("refused");
    let message = refused.to_string();
    assert!(
        matches!(
            refused,
            airlock_runtime::ledger::LedgerError::DecisionRefused { .. }
        ),
        "{message}"
    );
    assert!(
        message.contains("`erp_main`") && message.contains("record"),
        "{message}"
    );
    let row = w.store.get(id).await.unwrap();
    assert_eq!(
        row.state,
        airlock_runtime::ledger::InvocationState::Proposed
    );
    assert_eq!(seen(&count), 0);
}
