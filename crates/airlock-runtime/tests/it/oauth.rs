//! The OAuth client side end to end against the testkit's authorization server on 127.0.0.1,
//! reached only through the egress guard with loopback allowed by policy: the code flow with
//! PKCE, refresh, RFC 8693 and RFC 7523 exchange, `may_act`, and the exchange cache on an
//! injected clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use airlock_egress::{EgressPolicy, GuardedClient};
use airlock_runtime::oauth::{
    Actor, AuthorizationServer, CacheClock, Exchange, ExchangeCache, Grant, OAuthError,
    PkceVerifier, Tokens,
};
use airlock_testkit::{Issuer, KeyKind, TokenRequest};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use secrecy::{ExposeSecret as _, SecretString};
use serde_json::{Value, json};
use url::Url;

const REDIRECT: &str = "https://airlock.example/oauth/callback";
const SECRET: &str = "client-s3cret:+&";

/// The guard as an operator would configure it for an authorization server on loopback.
fn guard() -> GuardedClient {
    let policy = EgressPolicy {
        allow_cidrs: vec!["127.0.0.1/32".parse().unwrap()],
        deadline: Duration::from_secs(10),
        ..EgressPolicy::default()
    };
    GuardedClient::new(policy).unwrap()
}

fn endpoint(issuer: &Issuer, path: &str) -> Url {
    Url::parse(&format!("{}{path}", issuer.url())).unwrap()
}

fn server(issuer: &Issuer, secret: Option<&str>) -> AuthorizationServer {
    AuthorizationServer {
        authorization_endpoint: endpoint(issuer, "/authorize"),
        token_endpoint: endpoint(issuer, "/token"),
        client_id: "airlock".into(),
        client_secret: secret.map(SecretString::from),
        scopes: vec!["crm.read".into(), "crm.write".into()],
        resource: Some("https://crm.example".into()),
    }
}

/// What a person's browser does: follows the authorization URL and lands on the redirect URI;
/// returns the code and state it carries, and the verifier kept meanwhile.
async fn approve(server: &AuthorizationServer, state: &str) -> (String, PkceVerifier) {
    let verifier = PkceVerifier::generate();
    let url = server.authorize_url(REDIRECT, state, &verifier);
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let response = browser.get(url).send().await.unwrap();
    assert_eq!(response.status(), 302);
    let location = response.headers()["location"].to_str().unwrap();
    let landed = Url::parse(location).unwrap();
    assert!(location.starts_with(REDIRECT), "{location}");
    let param = |k: &str| {
        landed
            .query_pairs()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.into_owned())
    };
    assert_eq!(param("state").as_deref(), Some(state), "state comes back");
    (param("code").unwrap(), verifier)
}

/// The claims of a JWT the issuer minted.
fn claims(token: &SecretString) -> Value {
    let payload = token.expose_secret().split('.').nth(1).unwrap();
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
}

fn requests(issuer: &Issuer, grant_type: &str) -> Vec<TokenRequest> {
    let all = issuer.token_requests();
    all.into_iter()
        .filter(|r| r.grant_type == grant_type)
        .collect()
}

fn field<'a>(request: &'a TokenRequest, name: &str) -> Option<&'a str> {
    request.form.get(name).map(String::as_str)
}

#[tokio::test]
async fn the_code_flow_with_pkce_connects_an_account() {
    let issuer = Issuer::start(KeyKind::Es256).await;
    let server = server(&issuer, None);
    let (code, verifier) = approve(&server, "session-1").await;
    let tokens = server
        .redeem(&guard(), &code, &verifier, REDIRECT)
        .await
        .unwrap();
    let access = claims(&tokens.access);
    assert_eq!(access["sub"], "alice");
    assert_eq!(access["aud"], "https://crm.example");
    assert_eq!(access["scope"], "crm.read crm.write");
    assert!(tokens.refresh.is_some());
    assert_eq!(tokens.expires_in, Some(Duration::from_secs(3600)));
    // What went over the wire: the code, its verifier, and the public client's id in the form.
    let sent = &requests(&issuer, "authorization_code")[0];
    assert_eq!(field(sent, "code"), Some(code.as_str()));
    assert_eq!(
        field(sent, "code_verifier"),
        Some(verifier.secret().expose_secret())
    );
    assert_eq!(field(sent, "client_id"), Some("airlock"));
    assert_eq!(sent.basic, None);
    // A code is good once.
    let again = server.redeem(&guard(), &code, &verifier, REDIRECT).await;
    assert!(
        matches!(again, Err(OAuthError::Refused { ref error, .. }) if error == "invalid_grant")
    );
}

#[tokio::test]
async fn a_code_with_the_wrong_verifier_is_refused() {
    let issuer = Issuer::start(KeyKind::Es256).await;
    let server = server(&issuer, None);
    let (code, _kept) = approve(&server, "session-1").await;
    let wrong = PkceVerifier::generate();
    let err = server
        .redeem(&guard(), &code, &wrong, REDIRECT)
        .await
        .unwrap_err();
    let OAuthError::Refused { status, error, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!((*status, error.as_str()), (400, "invalid_grant"));
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains(&code) && !shown.contains(wrong.secret().expose_secret()));
}

#[tokio::test]
async fn a_refresh_rotates_the_refresh_token() {
    let issuer = Issuer::start(KeyKind::Es256).await;
    issuer.set_token_lifetime(5);
    let server = server(&issuer, None);
    let (code, verifier) = approve(&server, "s").await;
    let first = server
        .redeem(&guard(), &code, &verifier, REDIRECT)
        .await
        .unwrap();
    assert_eq!(first.expires_in, Some(Duration::from_secs(5)));
    let old = first.refresh.unwrap();
    let second = server.refresh(&guard(), &old).await.unwrap();
    let new = second.refresh.clone().unwrap();
    assert_ne!(new.expose_secret(), old.expose_secret(), "rotated");
    assert_ne!(second.access.expose_secret(), first.access.expose_secret());
    assert_eq!(claims(&second.access)["sub"], "alice");
    assert_eq!(claims(&second.access)["scope"], "crm.read crm.write");
    // The rotated-away token is spent; the new one works.
    let spent = server.refresh(&guard(), &old).await.unwrap_err();
    assert!(matches!(spent, OAuthError::Refused { ref error, .. } if error == "invalid_grant"));
    server.refresh(&guard(), &new).await.unwrap();
    let sent = &requests(&issuer, "refresh_token")[0];
    assert_eq!(field(sent, "refresh_token"), Some(old.expose_secret()));
    assert_eq!(field(sent, "scope"), None, "the grant keeps its scopes");
}

/// RFC 6749 §6: a server may keep the refresh token; the result then carries the one used.
#[tokio::test]
async fn a_refresh_without_rotation_keeps_the_refresh_token_used() {
    let issuer = Issuer::start(KeyKind::Es256).await;
    issuer.set_refresh_rotation(false);
    let server = server(&issuer, None);
    let (code, verifier) = approve(&server, "s").await;
    let first = server
        .redeem(&guard(), &code, &verifier, REDIRECT)
        .await
        .unwrap();
    let kept = first.refresh.unwrap();
    for _ in 0..2 {
        let again = server.refresh(&guard(), &kept).await.unwrap();
        assert_eq!(again.refresh.unwrap().expose_secret(), kept.expose_secret());
    }
}

#[tokio::test]
async fn a_confidential_client_authenticates_with_basic() {
    let issuer = Issuer::start(KeyKind::Es256).await;
    issuer.require_client("airlock", SECRET);
    let good = server(&issuer, Some(SECRET));
    let (code, verifier) = approve(&good, "s").await;
    good.redeem(&guard(), &code, &verifier, REDIRECT)
        .await
        .unwrap();
    let sent = &requests(&issuer, "authorization_code")[0];
    assert_eq!(sent.basic, Some(("airlock".into(), SECRET.into())));
    assert_eq!(field(sent, "client_secret"), None);
    assert_eq!(field(sent, "client_id"), None);
    // A wrong secret: the server's refusal, with no secret in it.
    let wrong = server(&issuer, Some("not-the-secret"));
    let (code, verifier) = approve(&wrong, "s").await;
    let err = wrong
        .redeem(&guard(), &code, &verifier, REDIRECT)
        .await
        .unwrap_err();
    assert!(
        matches!(err, OAuthError::Refused { status: 401, ref error, .. } if error == "invalid_client"),
        "{err:?}"
    );
    let shown = format!("{err} {err:?} {wrong:?}");
    assert!(
        !shown.contains("not-the-secret") && !shown.contains(&code),
        "{shown}"
    );
}

#[tokio::test]
async fn the_egress_guard_refuses_an_authorization_server_it_does_not_allow() {
    let issuer = Issuer::start(KeyKind::Es256).await;
    let server = server(&issuer, None);
    let strict = GuardedClient::new(EgressPolicy::default()).unwrap();
    let err = server
        .refresh(&strict, &SecretString::from("refresh-1"))
        .await
        .unwrap_err();
    let OAuthError::Unreachable(cause) = &err else {
        panic!("{err:?}");
    };
    assert_eq!(cause.kind(), "blocked_address");
    assert!(issuer.token_requests().is_empty(), "nothing reached it");
}

fn exchange(issuer: &Issuer, grant: Grant, secret: Option<&str>) -> Exchange {
    Exchange {
        token_endpoint: endpoint(issuer, "/token"),
        client_id: "airlock".into(),
        client_secret: secret.map(SecretString::from),
        scopes: vec!["crm.read".into()],
        grant,
    }
}

fn token_exchange(actor: Option<Actor>) -> Grant {
    Grant::TokenExchange {
        audience: Some("crm".into()),
        resource: None,
        actor,
    }
}

/// An access token the issuer signed for `sub`, as airlock's resource server accepted it.
fn caller_token(issuer: &Issuer, sub: &str, may_act: Option<Value>) -> SecretString {
    let mut claims = json!({
        "iss": issuer.url(), "sub": sub, "aud": "https://airlock.example/mcp",
        "exp": 4_000_000_000u64,
    });
    if let Some(may_act) = may_act {
        claims["may_act"] = may_act;
    }
    SecretString::from(issuer.sign(&claims))
}

fn airlock_actor(issuer: &Issuer) -> Actor {
    Actor {
        token: SecretString::from(issuer.sign(&json!({"iss": issuer.url(), "sub": "airlock"}))),
        subject: "airlock".into(),
        issuer: Some(issuer.url()),
    }
}

const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

#[tokio::test]
async fn token_exchange_without_an_actor_impersonates_the_subject() {
    let issuer = Issuer::start(KeyKind::Es256).await;
    let subject = caller_token(&issuer, "alice", None);
    let tokens = exchange(&issuer, token_exchange(None), None)
        .exchange(&guard(), &subject)
        .await
        .unwrap();
    let issued = claims(&tokens.access);
    assert_eq!(
        (&issued["sub"], &issued["aud"]),
        (&json!("alice"), &json!("crm"))
    );
    assert_eq!(issued.get("act"), None);
    assert_eq!(
        tokens.issued_token_type.as_deref(),
        Some("urn:ietf:params:oauth:token-type:access_token")
    );
    let sent = &requests(&issuer, TOKEN_EXCHANGE)[0];
    assert_eq!(field(sent, "subject_token"), Some(subject.expose_secret()));
    assert_eq!(
        field(sent, "subject_token_type"),
        Some("urn:ietf:params:oauth:token-type:access_token")
    );
    assert_eq!(field(sent, "audience"), Some("crm"));
    assert_eq!(field(sent, "scope"), Some("crm.read"));
    assert_eq!(field(sent, "actor_token"), None);
}

#[tokio::test]
async fn token_exchange_with_an_actor_delegates_when_may_act_names_it() {
    let issuer = Issuer::start(KeyKind::Es256).await;
    let may_act = json!({"sub": "airlock", "iss": issuer.url()});
    let subject = caller_token(&issuer, "alice", Some(may_act));
    let actor = airlock_actor(&issuer);
    let actor_token = actor.token.expose_secret().to_owned();
    let tokens = exchange(&issuer, token_exchange(Some(actor)), Some(SECRET))
        .exchange(&guard(), &subject)
        .await
        .unwrap();
    let issued = claims(&tokens.access);
    assert_eq!(issued["sub"], "alice");
    assert_eq!(issued["act"], json!({"sub": "airlock"}));
    let sent = &requests(&issuer, TOKEN_EXCHANGE)[0];
    assert_eq!(field(sent, "actor_token"), Some(actor_token.as_str()));
    assert_eq!(sent.basic, Some(("airlock".into(), SECRET.into())));
}

#[tokio::test]
async fn may_act_absent_or_naming_another_is_refused_before_anything_is_sent() {
    let issuer = Issuer::start(KeyKind::Es256).await;
    let cases = [
        (None, "may_act_missing"),
        (Some(json!({"sub": "mallory"})), "may_act_mismatch"),
        (
            Some(json!({"sub": "airlock", "iss": "https://elsewhere.example"})),
            "may_act_mismatch",
        ),
    ];
    for (may_act, kind) in cases {
        let subject = caller_token(&issuer, "alice", may_act);
        let err = exchange(&issuer, token_exchange(Some(airlock_actor(&issuer))), None)
            .exchange(&guard(), &subject)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), kind, "{err}");
        assert!(
            err.to_string().contains("airlock"),
            "names the actor: {err}"
        );
    }
    assert!(
        issuer.token_requests().is_empty(),
        "no exchange was asked for"
    );
}

#[tokio::test]
async fn jwt_bearer_gets_an_on_behalf_of_token() {
    let issuer = Issuer::start(KeyKind::Rs256).await;
    issuer.require_client("airlock", SECRET);
    let subject = caller_token(&issuer, "alice", None);
    let tokens = exchange(&issuer, Grant::JwtBearer, Some(SECRET))
        .exchange(&guard(), &subject)
        .await
        .unwrap();
    let issued = claims(&tokens.access);
    assert_eq!(
        (&issued["sub"], &issued["scope"]),
        (&json!("alice"), &json!("crm.read"))
    );
    let sent = &requests(&issuer, JWT_BEARER)[0];
    assert_eq!(field(sent, "assertion"), Some(subject.expose_secret()));
    assert_eq!(field(sent, "requested_token_use"), Some("on_behalf_of"));
    assert_eq!(field(sent, "scope"), Some("crm.read"));
    assert_eq!(sent.basic, Some(("airlock".into(), SECRET.into())));
    // A token the issuer never signed is refused by it.
    let forged = SecretString::from(issuer.unsigned(&json!({"sub": "alice"})));
    let err = exchange(&issuer, Grant::JwtBearer, Some(SECRET))
        .exchange(&guard(), &forged)
        .await
        .unwrap_err();
    assert!(matches!(err, OAuthError::Refused { ref error, .. } if error == "invalid_grant"));
}

/// A clock the test moves; starts now.
fn manual_clock() -> (CacheClock, Arc<AtomicU64>) {
    let start = Instant::now();
    let elapsed = Arc::new(AtomicU64::new(0));
    let read = Arc::clone(&elapsed);
    let clock: CacheClock =
        Arc::new(move || start + Duration::from_secs(read.load(Ordering::SeqCst)));
    (clock, elapsed)
}

#[tokio::test]
async fn the_cache_answers_the_same_principal_and_subject_only() {
    let issuer = Issuer::start(KeyKind::Es256).await;
    let cache = ExchangeCache::new();
    let crm = exchange(&issuer, token_exchange(None), None);
    let subject = caller_token(&issuer, "alice", None);
    let exchanges = || requests(&issuer, TOKEN_EXCHANGE).len();
    let first = crm
        .exchange_cached(&guard(), &cache, "alice", &subject)
        .await
        .unwrap();
    let hit = crm
        .exchange_cached(&guard(), &cache, "alice", &subject)
        .await
        .unwrap();
    assert_eq!(exchanges(), 1, "the second was a hit");
    assert_eq!(hit.access.expose_secret(), first.access.expose_secret());
    // Another principal presenting the same token is never answered with alice's entry.
    let other = crm
        .exchange_cached(&guard(), &cache, "bob", &subject)
        .await
        .unwrap();
    assert_eq!(exchanges(), 2, "another principal is a miss");
    assert_ne!(other.access.expose_secret(), first.access.expose_secret());
    // Another subject token of the same principal, or another audience, is a miss too.
    let renewed = caller_token(&issuer, "alice", Some(json!({"sub": "x"})));
    crm.exchange_cached(&guard(), &cache, "alice", &renewed)
        .await
        .unwrap();
    let erp = Exchange {
        grant: Grant::TokenExchange {
            audience: Some("erp".into()),
            resource: None,
            actor: None,
        },
        ..crm.clone()
    };
    erp.exchange_cached(&guard(), &cache, "alice", &subject)
        .await
        .unwrap();
    assert_eq!(exchanges(), 4);
}

#[tokio::test]
async fn a_cached_token_is_served_until_its_expiry_less_the_skew() {
    let issuer = Issuer::start(KeyKind::Es256).await;
    issuer.set_token_lifetime(90);
    let (clock, elapsed) = manual_clock();
    let cache = ExchangeCache::with_clock(clock);
    let crm = exchange(&issuer, token_exchange(None), None);
    let subject = caller_token(&issuer, "alice", None);
    let exchanges = || requests(&issuer, TOKEN_EXCHANGE).len();
    crm.exchange_cached(&guard(), &cache, "alice", &subject)
        .await
        .unwrap();
    // 90 s of life less the 30 s skew: served through second 59, not at second 60.
    elapsed.store(59, Ordering::SeqCst);
    crm.exchange_cached(&guard(), &cache, "alice", &subject)
        .await
        .unwrap();
    assert_eq!(exchanges(), 1, "still fresh at 59 s");
    elapsed.store(60, Ordering::SeqCst);
    crm.exchange_cached(&guard(), &cache, "alice", &subject)
        .await
        .unwrap();
    assert_eq!(exchanges(), 2, "within the skew at 60 s: exchanged again");
    // A token living no longer than the skew is never kept.
    issuer.set_token_lifetime(30);
    let fresh = caller_token(&issuer, "carol", None);
    for _ in 0..2 {
        crm.exchange_cached(&guard(), &cache, "carol", &fresh)
            .await
            .unwrap();
    }
    assert_eq!(exchanges(), 4);
}

#[tokio::test]
async fn forgetting_a_principal_drops_its_entries_only() {
    let issuer = Issuer::start(KeyKind::Es256).await;
    let cache = ExchangeCache::new();
    let crm = exchange(&issuer, token_exchange(None), None);
    let alice = caller_token(&issuer, "alice", None);
    let bob = caller_token(&issuer, "bob", None);
    let exchanges = || requests(&issuer, TOKEN_EXCHANGE).len();
    let call = |principal: &'static str, subject: SecretString| {
        let (crm, cache) = (&crm, &cache);
        async move {
            crm.exchange_cached(&guard(), cache, principal, &subject)
                .await
                .unwrap()
        }
    };
    call("alice", alice.clone()).await;
    call("bob", bob.clone()).await;
    assert_eq!((exchanges(), cache.len()), (2, 2));
    cache.forget_principal("alice");
    call("bob", bob.clone()).await;
    assert_eq!(exchanges(), 2, "bob's entry stays");
    call("alice", alice.clone()).await;
    assert_eq!(exchanges(), 3, "alice's was dropped");
    cache.clear();
    assert!(cache.is_empty());
    call("bob", bob).await;
    assert_eq!(exchanges(), 4, "cleared");
}

#[tokio::test]
async fn no_secret_shows_in_debug_or_errors() {
    let issuer = Issuer::start(KeyKind::Es256).await;
    let server = server(&issuer, Some(SECRET));
    let (code, verifier) = approve(&server, "s").await;
    let tokens: Tokens = server
        .redeem(&guard(), &code, &verifier, REDIRECT)
        .await
        .unwrap();
    let subject = caller_token(&issuer, "alice", None);
    let actor = airlock_actor(&issuer);
    let with_actor = exchange(&issuer, token_exchange(Some(actor.clone())), Some(SECRET));
    let refused = with_actor.exchange(&guard(), &subject).await.unwrap_err();
    let spent = server
        .redeem(&guard(), &code, &verifier, REDIRECT)
        .await
        .unwrap_err();
    let cache = ExchangeCache::new();
    cache.insert(&with_actor.cache_key("alice", &subject), tokens.clone());
    let shown = format!(
        "{tokens:?} {server:?} {verifier:?} {with_actor:?} {refused:?} {refused} {spent:?} {spent} {cache:?}"
    );
    let secrets = [
        tokens.access.expose_secret(),
        tokens.refresh.as_ref().unwrap().expose_secret(),
        SECRET,
        verifier.secret().expose_secret(),
        &code,
        subject.expose_secret(),
        actor.token.expose_secret(),
    ];
    for secret in secrets {
        assert!(!shown.contains(secret), "a secret shows in: {shown}");
    }
}
