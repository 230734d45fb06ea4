//! Credentials per principal that come from an authorization server (docs/rules.md CALL-14,
//! CALL-15), on both backends, against the testkit's loopback issuer: an account connected
//! with the authorization-code flow and PKCE releases the waiting call, which runs once with
//! that account's token; a connected account about to expire is refreshed; a caller's own
//! token is exchanged (RFC 8693) for each principal, cached, and refused before anything is
//! sent when `may_act` does not name airlock.

use airlock_runtime::oauth::{Actor, AuthorizationServer, Exchange, Grant};
use airlock_runtime::vault::{ConnectError, Source};
use airlock_testkit::{Issuer, KeyKind, Receiver};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use secrecy::SecretString;
use url::Url;

use super::personal::replica_of;
use super::*;

const KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

fn endpoint(issuer: &Issuer, path: &str) -> Url {
    Url::parse(&format!("{}{path}", issuer.url())).unwrap()
}

fn connect_source(issuer: &Issuer) -> Source {
    Source::OAuth(AuthorizationServer {
        authorization_endpoint: endpoint(issuer, "/authorize"),
        token_endpoint: endpoint(issuer, "/token"),
        client_id: "airlock".into(),
        client_secret: None,
        scopes: vec!["crm.read".into()],
        resource: None,
    })
}

/// The `sub` of the bearer token a request carried.
fn subject_of(delivery: &airlock_testkit::Delivery) -> String {
    let header = delivery.header("authorization");
    let token = header.strip_prefix("Bearer ").unwrap();
    let payload = token.split('.').nth(1).unwrap();
    let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
    claims["sub"].as_str().unwrap().to_owned()
}

/// A person's browser: follows `url` to the authorization server, which approves at once and
/// redirects back; returns the `code` and `state` it carries.
async fn approve(url: &Url) -> (String, String) {
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let response = browser.get(url.as_str()).send().await.unwrap();
    assert_eq!(response.status(), 302);
    let back = Url::parse(response.headers()["location"].to_str().unwrap()).unwrap();
    assert!(
        back.as_str()
            .starts_with("https://airlock.example.com/v1/connect/callback")
    );
    let param = |k: &str| {
        back.query_pairs()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.into_owned())
            .unwrap()
    };
    (param("code"), param("state"))
}

/// CALL-15: alice's call waits; the link made for her starts the flow, the state the server
/// sends back finishes it (PKCE verified by the server), the waiting call is released in the
/// same commit and runs once, carrying the token of the account she connected.
pub(super) async fn a_connected_account_releases_the_waiting_call(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some(location) = location(backend, &dir).await else {
        return;
    };
    let (upstream, issuer) = (Receiver::start().await, Issuer::start(KeyKind::Es256).await);
    issuer.set_subject("alice@crm");
    let store = open(&location, StoreConfig::default()).await;
    let (gateway, vault) = replica_of(store, upstream.port, KEY, connect_source(&issuer));
    let ctx = ctx_on(&gateway, "alice", "c1").await;
    let row = gateway
        .call(&ctx, "crm_export", json!({}))
        .await
        .unwrap()
        .into_invocation();
    assert_eq!(row.state, InvocationState::AwaitingCredential);
    assert!(
        row.error
            .unwrap()
            .message
            .contains("POST /v1/credentials/crm/connect")
    );

    let link = vault.connect_link("crm", "alice").unwrap();
    let ticket = link
        .query_pairs()
        .find(|(k, _)| k == "ticket")
        .unwrap()
        .1
        .into_owned();
    assert!(
        vault.begin_connect("other", &ticket).is_err(),
        "a ticket is for its connection"
    );
    let mut forged = ticket.clone();
    forged.insert(12, 'x');
    assert!(vault.begin_connect("crm", &forged).is_err());
    let (code, state) = approve(&vault.begin_connect("crm", &ticket).unwrap()).await;
    let (connection, principal, released) = vault.finish_connect(&state, &code).await.unwrap();
    assert_eq!((connection.as_str(), principal.as_str()), ("crm", "alice"));
    assert_eq!(released, [row.id]);
    let redeem = issuer.token_requests();
    assert_eq!(redeem.len(), 1);
    assert_eq!(redeem[0].grant_type, "authorization_code");
    assert!(redeem[0].form.contains_key("code_verifier"));

    let ran = gateway.continue_approved(row.id).await.unwrap();
    assert_eq!(
        ran.invocation().state,
        InvocationState::Succeeded,
        "{ran:?}"
    );
    let sent = upstream.received();
    assert_eq!(sent.len(), 1);
    assert_eq!(subject_of(&sent[0]), "alice@crm");
    let used = ran.invocation().credential_use.clone().unwrap();
    assert_eq!(used.kind, "oauth");
    assert_eq!(used.issuer.as_deref(), Some(issuer.url().as_str()));
    let replayed = vault.finish_connect(&state, &code).await.unwrap_err();
    assert!(matches!(replayed, ConnectError::Used), "{replayed:?}");
    assert_eq!(
        issuer.token_requests().len(),
        1,
        "a replayed state reaches no server"
    );
}

/// CALL-15: a connected account whose token expires within the refresh skew is refreshed with
/// its refresh token before the call is sent; the call carries the new token.
pub(super) async fn an_expiring_account_is_refreshed_before_the_call(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some(location) = location(backend, &dir).await else {
        return;
    };
    let (upstream, issuer) = (Receiver::start().await, Issuer::start(KeyKind::Es256).await);
    issuer.set_token_lifetime(5);
    let store = open(&location, StoreConfig::default()).await;
    let (gateway, vault) = replica_of(store, upstream.port, KEY, connect_source(&issuer));
    let link = vault.connect_link("crm", "alice").unwrap();
    let ticket = link
        .query_pairs()
        .find(|(k, _)| k == "ticket")
        .unwrap()
        .1
        .into_owned();
    let (code, state) = approve(&vault.begin_connect("crm", &ticket).unwrap()).await;
    vault.finish_connect(&state, &code).await.unwrap();
    let ctx = ctx_on(&gateway, "alice", "c1").await;
    let ran = gateway.call(&ctx, "crm_export", json!({})).await.unwrap();
    assert_eq!(
        ran.invocation().state,
        InvocationState::Succeeded,
        "{ran:?}"
    );
    let grants: Vec<String> = issuer
        .token_requests()
        .into_iter()
        .map(|r| r.grant_type)
        .collect();
    assert_eq!(grants, ["authorization_code", "refresh_token"]);
    assert_eq!(upstream.received().len(), 1);
}

fn exchange_source(issuer: &Issuer, actor: Option<Actor>) -> Source {
    Source::Exchange(Exchange {
        token_endpoint: endpoint(issuer, "/token"),
        client_id: "airlock".into(),
        client_secret: None,
        scopes: vec!["crm.read".into()],
        grant: Grant::TokenExchange {
            audience: Some("https://crm.example".into()),
            resource: None,
            actor,
        },
    })
}

/// A call by `principal` made with the OAuth token `token`.
async fn signed_in(gateway: &Gateway, principal: &str, call: &str, token: &str) -> Outcome {
    let mut ctx = ctx_on(gateway, principal, call).await;
    let subject = Some(SecretString::from(token.to_owned()));
    ctx.downstream = ctx.downstream.signed_in_with(subject);
    gateway.call(&ctx, "crm_export", json!({})).await.unwrap()
}

/// CALL-14: each caller's own token is exchanged for one for the connection; the upstream sees
/// each principal's own subject, a second call of the same caller is answered from the cache,
/// and without a `may_act` naming airlock nothing is sent and the call fails.
pub(super) async fn a_callers_token_is_exchanged_for_its_own_principal(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some(location) = location(backend, &dir).await else {
        return;
    };
    let (upstream, issuer) = (Receiver::start().await, Issuer::start(KeyKind::Es256).await);
    let token = |sub: &str, extra: Value| {
        let mut claims = json!({"iss": issuer.url(), "sub": sub, "exp": 4_000_000_000u64});
        claims
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        issuer.sign(&claims)
    };
    let store = open(&location, StoreConfig::default()).await;
    let (gateway, _) = replica_of(
        Arc::clone(&store),
        upstream.port,
        KEY,
        exchange_source(&issuer, None),
    );
    let alice = token("alice", json!({}));
    for (principal, subject, call) in [
        ("alice", &alice, "a1"),
        ("bob", &token("bob", json!({})), "b1"),
        ("alice", &alice, "a2"),
    ] {
        let ran = signed_in(&gateway, principal, call, subject).await;
        assert_eq!(
            ran.invocation().state,
            InvocationState::Succeeded,
            "{ran:?}"
        );
    }
    let subjects: Vec<String> = upstream.received().iter().map(subject_of).collect();
    assert_eq!(subjects, ["alice", "bob", "alice"]);
    assert_eq!(
        issuer.token_requests().len(),
        2,
        "alice's second call was a cache hit"
    );
    let unsigned = gateway
        .call(
            &ctx_on(&gateway, "alice", "a3").await,
            "crm_export",
            json!({}),
        )
        .await
        .unwrap();
    assert_eq!(
        unsigned.invocation().error.as_ref().unwrap().kind,
        ToolErrorKind::CredentialMissing
    );

    let actor = Actor {
        token: SecretString::from(token("airlock", json!({}))),
        subject: "airlock".into(),
        issuer: None,
    };
    let (acting, _) = replica_of(
        store,
        upstream.port,
        KEY,
        exchange_source(&issuer, Some(actor)),
    );
    let refused = signed_in(&acting, "carol", "c1", &token("carol", json!({}))).await;
    let error = refused.invocation().error.clone().unwrap();
    assert_eq!(error.kind, ToolErrorKind::CredentialInvalid);
    assert!(error.message.contains("may_act"), "{error:?}");
    let allowed = token("dave", json!({"may_act": {"sub": "airlock"}}));
    let ran = signed_in(&acting, "dave", "d1", &allowed).await;
    assert_eq!(
        ran.invocation().state,
        InvocationState::Succeeded,
        "{ran:?}"
    );
    assert_eq!(
        issuer.token_requests().len(),
        3,
        "the refused exchange sent nothing"
    );
}
