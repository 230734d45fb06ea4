//! Credentials per principal on the one path (docs/rules.md CALL-11 … CALL-15, LEDGER-81 …
//! LEDGER-84), on both backends, with two gateways on one database standing for two replicas:
//! a call whose principal has no credential waits without sending anything, and runs once,
//! with that principal's own credential, when they set it; another principal's credential is
//! never sent; a revocation on one replica stops the next call on the other once its copies are
//! refreshed; the ledger records which credential each attempt carried, never the secret.

use std::net::{IpAddr, Ipv4Addr};

use airlock_egress::StaticResolver;
use airlock_runtime::agent::RunCredential;
use airlock_runtime::vault::{PersonalVault, Source, VaultKeys};
use airlock_spec::{ApiAuth, ApiConnection, ApiOperation, MasterKey, Method, PerPrincipal};
use airlock_testkit::Receiver;
use secrecy::SecretString;

use super::*;

const HOST: &str = "api.tenant.example.com";

fn export() -> ToolSpec {
    ToolSpec {
        definition: ToolDefinition {
            name: ToolName::try_from("crm_export").unwrap(),
            description: "Export the CRM.".into(),
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

/// A replica: its gateway and its vault, both on `store`, calling `port` as [`HOST`].
fn replica(store: Arc<dyn Store>, port: u16, key: &str) -> (Gateway, Arc<PersonalVault>) {
    replica_of(store, port, key, Source::Stored)
}

/// [`replica`] whose `crm` takes its credentials from `source`.
pub(super) fn replica_of(
    store: Arc<dyn Store>,
    port: u16,
    key: &str,
    source: Source,
) -> (Gateway, Arc<PersonalVault>) {
    let keys = VaultKeys::new(MasterKey::from_hex(key).unwrap(), Vec::new());
    replica_with_keys(store, port, keys, source)
}

/// [`replica_of`] sealing with `keys`.
fn replica_with_keys(
    store: Arc<dyn Store>,
    port: u16,
    keys: VaultKeys,
    source: Source,
) -> (Gateway, Arc<PersonalVault>) {
    let declared = [("crm".to_owned(), source)].into();
    let mut scope = Scope::new(ScopeId::Gateway);
    scope.add(export()).unwrap();
    let mut policy = EgressPolicy::default();
    policy.allow_cidrs.push("127.0.0.1/32".parse().unwrap());
    let resolver = StaticResolver::new().with(HOST, [IpAddr::V4(Ipv4Addr::LOCALHOST)]);
    let egress = GuardedClient::builder(policy)
        .resolver(Arc::new(resolver))
        .build()
        .unwrap();
    let public_url = Some("https://airlock.example.com".to_owned());
    let vault = Arc::new(PersonalVault::new(
        Arc::clone(&store),
        keys,
        declared,
        (public_url, egress.clone()),
    ));
    let connection = ApiConnection {
        // A loopback test upstream: the operator vouches for it (EGRESS-38).
        use_egress_allow: true,
        base_url: format!("http://{HOST}:{port}"),
        credential: None,
        per_principal: Some(PerPrincipal::Stored),
    };
    let gateway = Gateway::builder(store, egress, Arc::new(Credentials::default()))
        .scope(scope)
        .unwrap()
        .connections([("crm".to_owned(), connection)].into())
        .vault(Arc::clone(&vault))
        .build();
    (gateway, vault)
}

fn token(text: &str) -> RunCredential {
    RunCredential::Token(SecretString::from(text.to_owned()))
}

const KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

/// CALL-12, LEDGER-82: alice's call waits (nothing sent) while only bob has a credential; once
/// alice sets hers it is released in the same commit and runs once, carrying her token; the
/// row's credential use names her and a digest, never the token.
pub(super) async fn a_call_waits_for_its_principals_own_credential_and_runs_once(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some(location) = location(backend, &dir).await else {
        return;
    };
    let upstream = Receiver::start().await;
    let (gateway, vault) = replica(
        open(&location, StoreConfig::default()).await,
        upstream.port,
        KEY,
    );
    vault
        .set("crm", "bob", &token("bob-secret-token"), "bob")
        .await
        .unwrap();

    let ctx = ctx_on(&gateway, "alice", "c1").await;
    let waiting = gateway.call(&ctx, "crm_export", json!({})).await.unwrap();
    assert_eq!(waiting.kind(), OutcomeKind::Parked);
    let row = waiting.into_invocation();
    assert_eq!(row.state, InvocationState::AwaitingCredential);
    let message = &row.error.as_ref().unwrap().message;
    assert!(
        message.contains("`alice`'s credential for connection `crm`"),
        "{message}"
    );
    assert!(message.contains("PUT /v1/credentials/crm"), "{message}");
    assert!(upstream.received().is_empty(), "nothing was sent");

    let released = vault
        .set("crm", "alice", &token("alice-secret-token"), "alice")
        .await
        .unwrap();
    assert_eq!(released, [row.id]);
    assert_eq!(
        gateway.store().get(row.id).await.unwrap().state,
        InvocationState::Approved
    );
    let ran = gateway.continue_approved(row.id).await.unwrap();
    assert_eq!(
        ran.invocation().state,
        InvocationState::Succeeded,
        "{ran:?}"
    );
    let sent = upstream.received();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].header("authorization"), "Bearer alice-secret-token");

    let used = ran.invocation().credential_use.clone().unwrap();
    assert_eq!(
        (used.principal.as_str(), used.kind.as_str()),
        ("alice", "secret")
    );
    assert_eq!(used.digest.len(), 16);
    let uses = [used];
    let stored = gateway.store().credentials(None).await.unwrap();
    let dump = format!(
        "{stored:?}{uses:?}{:?}",
        gateway.store().get(row.id).await.unwrap()
    );
    assert!(
        !dump.contains("alice-secret-token") && !dump.contains("bob-secret-token"),
        "{dump}"
    );
    assert!(stored.iter().all(|c| !c.sealed.contains("secret-token")));
}

/// CALL-13: a revocation made through replica B stops replica A's next call of that principal
/// once A's copies are refreshed (its watch loop does that every 250 ms); the call waits again.
pub(super) async fn a_revocation_on_one_replica_stops_the_next_call_on_another(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some(location) = location(backend, &dir).await else {
        return;
    };
    let upstream = Receiver::start().await;
    let (a, vault_a) = replica(
        open(&location, StoreConfig::default()).await,
        upstream.port,
        KEY,
    );
    let (_b, vault_b) = replica(
        open(&location, StoreConfig::default()).await,
        upstream.port,
        KEY,
    );
    vault_b
        .set("crm", "alice", &token("alice-secret-token"), "alice")
        .await
        .unwrap();
    vault_a.refresh().await;
    let first = a
        .call(&ctx_on(&a, "alice", "c1").await, "crm_export", json!({}))
        .await
        .unwrap();
    assert_eq!(
        first.invocation().state,
        InvocationState::Succeeded,
        "{first:?}"
    );

    assert_eq!(
        vault_b.revoke(Some("crm"), "alice", "ops").await.unwrap(),
        1
    );
    vault_a.refresh().await;
    let next = a
        .call(&ctx_on(&a, "alice", "c2").await, "crm_export", json!({}))
        .await
        .unwrap();
    assert_eq!(
        next.invocation().state,
        InvocationState::AwaitingCredential,
        "{next:?}"
    );
    assert_eq!(
        upstream.received().len(),
        1,
        "the revoked credential was not sent again"
    );
}

/// LEDGER-83: a sealed credential opens only for the connection and principal it was sealed
/// for, and with the vault's key: a key that did not seal it cannot open it, and the call
/// fails `credential_invalid` instead of sending anything.
pub(super) async fn a_credential_opens_only_under_its_own_key(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some(location) = location(backend, &dir).await else {
        return;
    };
    let upstream = Receiver::start().await;
    let (_, vault) = replica(
        open(&location, StoreConfig::default()).await,
        upstream.port,
        KEY,
    );
    vault
        .set("crm", "alice", &token("alice-secret-token"), "alice")
        .await
        .unwrap();
    let other = "ff".repeat(32);
    let (stranger, _) = replica(
        open(&location, StoreConfig::default()).await,
        upstream.port,
        &other,
    );
    let ctx = ctx_on(&stranger, "alice", "c1").await;
    let failed = stranger.call(&ctx, "crm_export", json!({})).await.unwrap();
    let row = failed.into_invocation();
    assert_eq!(row.state, InvocationState::Failed);
    assert_eq!(row.error.unwrap().kind, ToolErrorKind::CredentialInvalid);
    assert!(upstream.received().is_empty());
}

/// LEDGER-83, DECL-93: after a rotation (the new key current, the old one retired), what the
/// old key sealed still opens and is sent; what is set from then on is sealed with the new key,
/// which a process holding only the old key cannot open.
pub(super) async fn a_retired_vault_key_still_opens_what_it_sealed(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some(location) = location(backend, &dir).await else {
        return;
    };
    let upstream = Receiver::start().await;
    let (_, old) = replica(
        open(&location, StoreConfig::default()).await,
        upstream.port,
        KEY,
    );
    old.set("crm", "alice", &token("alice-secret-token"), "alice")
        .await
        .unwrap();
    let new_key = "ab".repeat(32);
    let store = open(&location, StoreConfig::default()).await;
    let keys = VaultKeys::new(
        MasterKey::from_hex(&new_key).unwrap(),
        vec![MasterKey::from_hex(KEY).unwrap()],
    );
    let (rotated, vault) = replica_with_keys(store, upstream.port, keys, Source::Stored);
    let ran = rotated
        .call(
            &ctx_on(&rotated, "alice", "c1").await,
            "crm_export",
            json!({}),
        )
        .await
        .unwrap();
    assert_eq!(
        ran.invocation().state,
        InvocationState::Succeeded,
        "{ran:?}"
    );
    vault
        .set("crm", "bob", &token("bob-secret-token"), "bob")
        .await
        .unwrap();
    let (stale, _) = replica(
        open(&location, StoreConfig::default()).await,
        upstream.port,
        KEY,
    );
    let refused = stale
        .call(&ctx_on(&stale, "bob", "c2").await, "crm_export", json!({}))
        .await
        .unwrap();
    assert_eq!(
        refused.invocation().error.as_ref().unwrap().kind,
        ToolErrorKind::CredentialInvalid
    );
    assert_eq!(upstream.received().len(), 1);
}
