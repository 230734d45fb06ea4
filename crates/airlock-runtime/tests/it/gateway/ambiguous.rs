//! Ambiguous outcomes through the whole call path (docs/rules.md LEDGER-19, LEDGER-20): an
//! at-most-once api call whose request went unanswered parks in doubt and the MCP caller gets
//! the in-doubt reply; a failure that sent nothing, or that the upstream answered, still fails;
//! a call the sweeper marked in doubt while it was in flight records its answer, and the caller
//! gets it.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use airlock_egress::StaticResolver;
use airlock_mcp::{Caller, HostOutcome, ParkedStatus, ToolHost};
use airlock_runtime::ledger::{Clock, Invocation, ManualClock};
use airlock_spec::{ApiAuth, ApiConnection, ApiOperation, CredentialPath, Method};
use airlock_testkit::{Cue, RawServer};

use super::*;

const TOOL: &str = "erp_create_invoice";
const LEASE: Duration = Duration::from_secs(60);

/// A gateway whose only tool is an at-most-once api write to 127.0.0.1:`port`, reached
/// through the guard (loopback allowed by the operator) with an egress `deadline`, claiming
/// calls for `lease`.
fn api_gateway(
    store: Arc<dyn Store>,
    port: u16,
    deadline: Duration,
    lease: Duration,
) -> Arc<Gateway> {
    let operation = ApiOperation {
        slug: "erp".into(),
        operation: "create_invoice".into(),
        connection: "erp_main".into(),
        auth: ApiAuth::Bearer,
        method: Method::Post,
        path: "/invoices".into(),
        query: Vec::new(),
        body: None,
        allow_slashes: Vec::new(),
        select: None,
    };
    let mut scope = Scope::new(ScopeId::Gateway);
    scope
        .add(ToolSpec {
            definition: ToolDefinition {
                name: ToolName::try_from(TOOL).unwrap(),
                description: "Creates an invoice.".into(),
                input_schema: json!({"type": "object"}),
            },
            source: ToolSource::Api(operation),
            policy: Policy::default(),
        })
        .unwrap();
    let connection = ApiConnection {
        // A loopback test upstream: the operator vouches for it (EGRESS-38).
        use_egress_allow: true,
        base_url: format!("http://api.tenant.example.com:{port}/v1"),
        credential: Some(CredentialPath::try_from("erp.token").unwrap()),
        per_principal: None,
    };
    let policy = EgressPolicy {
        allow_cidrs: vec!["127.0.0.1/32".parse().unwrap()],
        deadline,
        ..EgressPolicy::default()
    };
    let resolver =
        StaticResolver::new().with("api.tenant.example.com", [IpAddr::V4(Ipv4Addr::LOCALHOST)]);
    let egress = GuardedClient::builder(policy)
        .resolver(Arc::new(resolver))
        .build()
        .unwrap();
    let credentials = Credentials::from_pairs([("erp.token".to_owned(), "tok-1".to_owned())]);
    let gateway = Gateway::builder(store, egress, Arc::new(credentials))
        .scope(scope)
        .expect("the scope's schemas compile")
        .connections(BTreeMap::from([("erp_main".to_owned(), connection)]))
        .lease(lease)
        .build();
    Arc::new(gateway)
}

fn ada() -> Caller {
    Caller {
        principal: "ada".into(),
        groups: Vec::new(),
        ..Default::default()
    }
}

/// Calls the tool through the MCP endpoint adapter; returns what the client sees and the row.
async fn call_over_mcp(gateway: &Arc<Gateway>) -> (HostOutcome, Invocation) {
    let call = McpHost::new(Arc::clone(gateway))
        .call_tool(&ScopeId::Gateway, &ada(), TOOL, json!({"cents": 500}))
        .await
        .unwrap();
    let id = call.invocation_id.parse().unwrap();
    (call.outcome, gateway.store().get(id).await.unwrap())
}

/// LEDGER-19: the upstream takes the request and never answers (the deadline passes), or
/// hangs up after reading it: the row is in doubt with what is known, not failed, and the MCP
/// reply is the in-doubt payload naming the invocation.
pub(super) async fn an_unanswered_api_call_parks_in_doubt(backend: Backend) {
    for (cue, kind) in [
        (Cue::Hold, ToolErrorKind::Timeout),
        (Cue::Hangup, ToolErrorKind::UpstreamError),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let Some(store) = store(backend, &dir).await else {
            return;
        };
        let upstream = RawServer::start(None, cue).await;
        let gateway = api_gateway(store, upstream.port, Duration::from_millis(300), LEASE);
        let (reply, row) = call_over_mcp(&gateway).await;
        assert_eq!(upstream.seen(), ["/v1/invoices"], "the request was sent");
        assert_eq!(row.state, InvocationState::InDoubt, "{cue:?}: {row:?}");
        assert!(row.expires_at.is_some());
        let known = row.error.clone().unwrap();
        assert_eq!(known.kind, kind, "{cue:?}: {known:?}");
        assert_eq!(
            reply,
            HostOutcome::Parked {
                status: ParkedStatus::InDoubt,
                invocation_id: row.id.to_string(),
                tool: TOOL.into(),
                expires_at: row.expires_at.and_then(|t| t
                    .format(&time::format_description::well_known::Rfc3339)
                    .ok()),
                note: None,
                confirmable: false,
            }
        );
        let audit = gateway.store().verify().await.unwrap();
        assert!(audit.first_break.is_none(), "{audit:?}");
    }
}

/// LEDGER-19: nothing was sent (the connection was refused) or the upstream answered that it
/// failed (HTTP 500): not ambiguous, so the call still fails with its kind.
pub(super) async fn an_answered_or_unsent_failure_still_fails(backend: Backend) {
    let refused = RawServer::refusing_port().await;
    let failing = RawServer::start(None, Cue::Status(500)).await;
    for (port, kind) in [
        (refused, ToolErrorKind::Unreachable),
        (failing.port, ToolErrorKind::UpstreamError),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let Some(store) = store(backend, &dir).await else {
            return;
        };
        let gateway = api_gateway(store, port, Duration::from_secs(5), LEASE);
        let (reply, row) = call_over_mcp(&gateway).await;
        assert_eq!(row.state, InvocationState::Failed, "{row:?}");
        assert_eq!(row.error.unwrap().kind, kind);
        assert!(
            matches!(reply, HostOutcome::Completed { is_error: true, .. }),
            "{reply:?}"
        );
    }
    assert_eq!(failing.seen(), ["/v1/invoices"]);
}

/// LEDGER-20: a stall longer than the lease — the sweeper marks the call in doubt while the
/// upstream still holds its request, and the gateway's next renewal finds the lease lost.
/// When the upstream then answers, the answer wins over the mark (an audited transition) and
/// the caller gets the result, not an internal error.
pub(super) async fn a_call_in_flight_when_swept_in_doubt_returns_its_answer(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(time::OffsetDateTime::now_utc());
    let config = StoreConfig {
        clock: Arc::new(clock.clone()),
        ..StoreConfig::default()
    };
    let Some(store) = store_with(backend, &dir, config).await else {
        return;
    };
    let upstream = RawServer::start(None, Cue::Hold).await;
    let lease = Duration::from_millis(30);
    let gateway = api_gateway(
        Arc::clone(&store),
        upstream.port,
        Duration::from_secs(30),
        lease,
    );
    let caller = ada();
    let host = McpHost::new(Arc::clone(&gateway));
    let calling = host.call_tool(&ScopeId::Gateway, &caller, TOOL, json!({"cents": 500}));
    let stall = async {
        upstream.held().await;
        // The stall: the ledger's clock jumps an hour past the lease, and the sweeper runs.
        clock.advance(Duration::from_secs(3600));
        // A renewal committed between the sweep's read and its write wins the row's version
        // (the sweep then leaves it, as it must); the next sweep finds the lease past again.
        let mut swept = Vec::new();
        for _ in 0..50 {
            swept = store
                .sweep(clock.now() + Duration::from_secs(1))
                .await
                .unwrap()
                .in_doubt;
            if !swept.is_empty() {
                break;
            }
        }
        assert_eq!(swept.len(), 1, "{swept:?}");
        let marked = store.get(swept[0]).await.unwrap();
        assert_eq!(marked.state, InvocationState::InDoubt);
        // Let the gateway's renewals (every 10 ms) meet the lost lease before the answer.
        tokio::time::sleep(lease * 5).await;
        upstream.release();
        (swept[0], marked.version)
    };
    let (call, (id, marked_version)) = tokio::join!(calling, stall);
    let call = call.expect("the caller gets the outcome, not an internal error");
    assert_eq!(call.invocation_id, id.to_string());
    let HostOutcome::Completed { is_error, .. } = &call.outcome else {
        panic!("{call:?}")
    };
    assert!(!is_error, "{call:?}");
    let row = store.get(id).await.unwrap();
    assert_eq!(row.state, InvocationState::Succeeded);
    assert_eq!(row.result, Some(json!({"done": true})));
    // The answer is the one transition after the mark; a renewal after it found the lease lost.
    assert_eq!(row.version, marked_version + 1, "in doubt, then succeeded");
    let audit = store.verify().await.unwrap();
    assert!(audit.first_break.is_none(), "{audit:?}");
}
