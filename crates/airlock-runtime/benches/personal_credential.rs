//! Bench binary: what a principal's own credential adds to a call (docs/rules.md CALL-11) when
//! it is held in memory (the cache hit of every call but a principal's first): the same api
//! tool, a POST to a loopback HTTP upstream, called 2,000 times one after another on SQLite
//! through a connection with the deployment's credential and through a per-principal one,
//! alternating call by call; reports durable commits per call (a principal's credential must
//! add none: its use is recorded in the finishing commit) and the process's CPU time per call,
//! read from `/proc/self/task/*/schedstat`. Run with
//! `cargo bench -p airlock-runtime --bench personal_credential`.

#![allow(clippy::unwrap_used, missing_docs)]

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use airlock_egress::{EgressPolicy, GuardedClient, StaticResolver};
use airlock_runtime::agent::RunCredential;
use airlock_runtime::ledger::{SqliteStore, Store, StoreConfig};
use airlock_runtime::vault::{PersonalVault, Source, VaultKeys};
use airlock_runtime::{CallContext, Gateway};
use airlock_spec::{
    ApiAuth, ApiConnection, ApiOperation, CredentialPath, Credentials, MasterKey, Method,
    PerPrincipal, Policy, Scope, ScopeId, ToolDefinition, ToolName, ToolSource, ToolSpec,
};
use airlock_testkit::Receiver;
use secrecy::SecretString;
use serde_json::json;

#[path = "support/cpu.rs"]
mod cpu;
use cpu::cpu;

const CALLS: usize = 2_000;
const HOST: &str = "api.bench.example.com";

fn tool() -> ToolSpec {
    ToolSpec {
        definition: ToolDefinition {
            name: ToolName::try_from("crm_export").unwrap(),
            description: "Export.".into(),
            input_schema: json!({"type": "object"}),
        },
        source: ToolSource::Api(ApiOperation {
            slug: "crm".into(),
            operation: "export".into(),
            connection: "crm".into(),
            auth: ApiAuth::Bearer,
            method: Method::Post,
            path: "/hook".into(),
            query: Vec::new(),
            body: None,
            allow_slashes: Vec::new(),
            select: None,
        }),
        policy: Policy::default(),
    }
}

/// A gateway whose `crm` sends the deployment's credential, or (with `vault`) each principal's.
fn gateway(store: Arc<dyn Store>, port: u16, vault: Option<Arc<PersonalVault>>) -> Gateway {
    let mut scope = Scope::new(ScopeId::Gateway);
    scope.add(tool()).unwrap();
    let connection = ApiConnection {
        use_egress_allow: true,
        base_url: format!("http://{HOST}:{port}"),
        credential: vault
            .is_none()
            .then(|| CredentialPath::try_from("crm.token").unwrap()),
        per_principal: vault.is_some().then_some(PerPrincipal::Stored),
    };
    let credentials =
        Credentials::from_pairs([("crm.token".to_owned(), "deployment-token".to_owned())]);
    let mut builder = Gateway::builder(store, egress(), Arc::new(credentials))
        .scope(scope)
        .unwrap()
        .connections([("crm".to_owned(), connection)].into());
    if let Some(vault) = vault {
        builder = builder.vault(vault);
    }
    builder.build()
}

fn egress() -> GuardedClient {
    let mut policy = EgressPolicy::default();
    policy.allow_cidrs.push("127.0.0.1/32".parse().unwrap());
    let resolver = StaticResolver::new().with(HOST, [IpAddr::V4(Ipv4Addr::LOCALHOST)]);
    GuardedClient::builder(policy)
        .resolver(Arc::new(resolver))
        .build()
        .unwrap()
}

async fn one_call(store: &SqliteStore, gateway: &Gateway, call_id: String) -> (u64, Duration) {
    let (commits, cpu0) = (store.commits(), cpu());
    let session = gateway
        .open_session("bench", Some("alice".into()), &ScopeId::Gateway)
        .await
        .unwrap();
    let ctx = CallContext {
        scope: ScopeId::Gateway,
        session,
        call_id,
        principal: Some("alice".into()),
        groups: None,
        channel: "bench",
        downstream: Default::default(),
    };
    let outcome = gateway.call(&ctx, "crm_export", json!({})).await.unwrap();
    assert!(outcome.invocation().error.is_none(), "{outcome:?}");
    (store.commits() - commits, cpu() - cpu0)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        SqliteStore::open(dir.path().join("bench.sqlite"), StoreConfig::default())
            .await
            .unwrap(),
    );
    let upstream = Receiver::start().await;
    let shared = Arc::clone(&store) as Arc<dyn Store>;
    let keys = VaultKeys::new(MasterKey::generate(), Vec::new());
    let declared = [("crm".to_owned(), Source::Stored)].into();
    let vault = Arc::new(PersonalVault::new(
        Arc::clone(&shared),
        keys,
        declared,
        (None, egress()),
    ));
    let token = RunCredential::Token(SecretString::from("alice-token".to_owned()));
    vault.set("crm", "alice", &token, "alice").await.unwrap();
    let plain = gateway(Arc::clone(&shared), upstream.port, None);
    let personal = gateway(shared, upstream.port, Some(vault));
    for r in 0..3 {
        let mut totals = [(0u64, Duration::ZERO); 2];
        for i in 0..CALLS {
            for (k, gateway) in [&plain, &personal].into_iter().enumerate() {
                let (commits, cpu) = one_call(&store, gateway, format!("{r}-{k}-{i}")).await;
                totals[k].0 += commits;
                totals[k].1 += cpu;
            }
        }
        let n = u32::try_from(CALLS).unwrap();
        let [without, with] = totals.map(|(c, cpu)| (c as f64 / CALLS as f64, cpu / n));
        let micros = |d: Duration| d.as_secs_f64() * 1e6;
        println!(
            "round {r}: deployment's credential {:.2} commits/call, CPU {:>6.1} µs/call; principal's own {:.2} commits/call, CPU {:>6.1} µs/call; added {:>+6.1} µs",
            without.0,
            micros(without.1),
            with.0,
            micros(with.1),
            micros(with.1) - micros(without.1)
        );
    }
}
