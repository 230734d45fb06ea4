//! The endpoint as an OAuth resource server (docs/rules.md AUTH-1..AUTH-15), with the testkit's
//! token issuer on 127.0.0.1 (reached through the egress guard, allowed by `allow_cidrs`) and
//! an injected clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, UNIX_EPOCH};

use airlock_egress::{EgressPolicy, GuardedClient};
use airlock_mcp::{Clock, OAuthSettings, ResourceServer};
use airlock_spec::ScopeId;
use airlock_testkit::{Issuer, KeyKind};
use serde_json::{Value, json};

use super::{Endpoint, Reply, TOKEN};

const START: u64 = 1_900_000_000;
const CALL: &str = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"msg":"hi"}}}"#;

/// A change to a token's claims.
type Edit = Box<dyn FnOnce(&mut Value)>;

struct Fixture {
    issuer: Issuer,
    endpoint: Endpoint,
    now: Arc<AtomicU64>,
}

fn guard(allow_loopback: bool) -> GuardedClient {
    let allow_cidrs = if allow_loopback {
        vec!["127.0.0.1/32".parse().unwrap()]
    } else {
        vec![]
    };
    GuardedClient::new(EgressPolicy {
        allow_cidrs,
        ..EgressPolicy::default()
    })
    .unwrap()
}

pub(super) fn settings(issuer: &Issuer, resource: String) -> OAuthSettings {
    OAuthSettings {
        issuer: issuer.url(),
        jwks_uri: None,
        resource,
        audiences: vec![],
        principal_claim: "sub".into(),
        groups_claim: "groups".into(),
        scopes: vec![
            ("mcp:tools".into(), vec![ScopeId::Gateway]),
            ("mcp:ops".into(), vec![ScopeId::Agent("ops".into())]),
        ],
        algorithms: vec!["RS256".into(), "ES256".into(), "EdDSA".into()],
        leeway: Duration::from_secs(30),
    }
}

impl Fixture {
    async fn start(kind: KeyKind) -> Self {
        Self::start_with(kind, true).await
    }

    async fn start_with(kind: KeyKind, allow_loopback: bool) -> Self {
        let issuer = Issuer::start(kind).await;
        let now = Arc::new(AtomicU64::new(START));
        let clock: Clock = {
            let now = now.clone();
            Arc::new(move || UNIX_EPOCH + Duration::from_secs(now.load(Ordering::SeqCst)))
        };
        let for_endpoint = issuer.clone();
        let endpoint = Endpoint::start_oauth(move |base| {
            ResourceServer::with_clock(settings(&for_endpoint, base), guard(allow_loopback), clock)
                .unwrap()
        })
        .await;
        Self {
            issuer,
            endpoint,
            now,
        }
    }

    fn advance(&self, seconds: u64) {
        self.now.fetch_add(seconds, Ordering::SeqCst);
    }

    fn now(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }

    /// Good claims for `/mcp`, changed by `edit`.
    fn claims(&self, edit: impl FnOnce(&mut Value)) -> Value {
        let mut claims = json!({
            "iss": self.issuer.url(),
            "sub": "ada",
            "aud": self.endpoint.url("/mcp"),
            "exp": self.now() + 300,
            "iat": self.now(),
            "scope": "openid mcp:tools",
            "groups": ["ops", "dev"],
        });
        edit(&mut claims);
        claims
    }

    async fn call(&self, path: &str, token: &str) -> Reply {
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {token}\r\n\
             Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
             MCP-Protocol-Version: 2025-06-18",
            self.endpoint.port
        );
        self.endpoint.raw(&head, CALL).await
    }

    async fn get(&self, path: &str) -> Reply {
        let head = format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{}",
            self.endpoint.port
        );
        self.endpoint.raw(&head, "").await
    }

    fn metadata_url(&self, path: &str) -> String {
        self.endpoint
            .url(&format!("/.well-known/oauth-protected-resource{path}"))
    }

    fn calls(&self) -> usize {
        self.endpoint.host.callers.lock().unwrap().len()
    }
}

/// A 401 for a refused token: the RFC 6750 challenge with the metadata URL, and `why` in both
/// the challenge's description and the JSON-RPC body; the host never asked.
fn assert_refused(f: &Fixture, reply: &Reply, why: &str) {
    assert_eq!(reply.status, 401, "{why}: {}", reply.body);
    let challenge = reply.header("www-authenticate").unwrap();
    assert!(
        challenge.starts_with(&format!(
            r#"Bearer resource_metadata="{}", scope="mcp:tools", error="invalid_token""#,
            f.metadata_url("/mcp")
        )),
        "{challenge}"
    );
    assert!(challenge.contains(why), "{challenge} lacks {why}");
    assert!(
        reply.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains(why)
    );
    assert_eq!(f.calls(), 0, "a refused token reached the host");
}

#[tokio::test]
async fn a_good_token_calls_as_its_principal_with_its_groups() {
    let f = Fixture::start(KeyKind::Es256).await;
    let reply = f.call("/mcp", &f.issuer.sign(&f.claims(|_| {}))).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["result"]["isError"], false);
    // A static token keeps working beside OAuth, with no groups.
    assert_eq!(f.call("/mcp", TOKEN).await.status, 200);
    let callers = f.endpoint.host.callers.lock().unwrap().clone();
    assert_eq!(callers[0].principal, "ada");
    assert_eq!(callers[0].groups, ["ops", "dev"]);
    assert_eq!(callers[1].principal, "alice");
    assert!(callers[1].groups.is_empty());
}

#[tokio::test]
async fn rsa_and_eddsa_keys_verify_and_a_token_for_the_whole_server_is_accepted() {
    for kind in [KeyKind::Rs256, KeyKind::EdDsa] {
        let f = Fixture::start(kind).await;
        let base = f.endpoint.url("");
        let token = f.issuer.sign(&f.claims(|c| c["aud"] = json!([base])));
        assert_eq!(f.call("/mcp", &token).await.status, 200, "{kind:?}");
    }
}

#[tokio::test]
async fn expired_and_not_yet_valid_tokens_are_refused_beyond_the_leeway() {
    let f = Fixture::start(KeyKind::Es256).await;
    let now = f.now();
    let within = f.issuer.sign(&f.claims(|c| c["exp"] = json!(now - 30)));
    assert_eq!(f.call("/mcp", &within).await.status, 200);
    let f = Fixture::start(KeyKind::Es256).await;
    let expired = f.issuer.sign(&f.claims(|c| c["exp"] = json!(now - 31)));
    assert_refused(&f, &f.call("/mcp", &expired).await, "has expired");
    let early = f.issuer.sign(&f.claims(|c| c["nbf"] = json!(now + 31)));
    assert_refused(&f, &f.call("/mcp", &early).await, "not valid yet");
    // The same token once the injected clock reaches it.
    f.advance(1);
    assert_eq!(f.call("/mcp", &early).await.status, 200);
}

#[tokio::test]
async fn wrong_audience_issuer_or_missing_claims_are_refused() {
    let f = Fixture::start(KeyKind::Es256).await;
    let agent = f.endpoint.url("/agents/ops/mcp");
    let cases: [(Edit, &str); 5] = [
        (
            Box::new(|c| c["aud"] = json!("https://other.example.com/mcp")),
            "not meant for this resource",
        ),
        // A token for another endpoint of the same server is not one for this endpoint.
        (
            Box::new(move |c| c["aud"] = json!(agent)),
            "not meant for this resource",
        ),
        (
            Box::new(|c| c["iss"] = json!("http://127.0.0.1:1")),
            "issued by another issuer",
        ),
        (
            Box::new(|c| {
                c.as_object_mut().unwrap().remove("sub");
            }),
            "`sub` claim",
        ),
        (
            Box::new(|c| c["groups"] = json!({"a": 1})),
            "`groups` claim",
        ),
    ];
    for (edit, why) in cases {
        let token = f.issuer.sign(&f.claims(edit));
        assert_refused(&f, &f.call("/mcp", &token).await, why);
    }
}

#[tokio::test]
async fn forged_tokens_are_refused_unknown_kid_none_and_hs_rs_confusion() {
    let f = Fixture::start(KeyKind::Rs256).await;
    let claims = f.claims(|_| {});
    // Warm the key cache so the forgeries are judged against a known set.
    assert_eq!(f.call("/mcp", &f.issuer.sign(&claims)).await.status, 200);
    let calls = f.calls();
    let unpublished = f.issuer.sign_with_unpublished_key("key-9", KeyKind::Rs256);
    let forgeries = [
        (unpublished(&claims), "a key the issuer does not publish"),
        (
            f.issuer.unsigned(&claims),
            "signing algorithm is not accepted",
        ),
        (
            f.issuer.hs256_with_public_key(&claims),
            "signing algorithm is not accepted",
        ),
    ];
    for (token, why) in forgeries {
        let reply = f.call("/mcp", &token).await;
        assert_eq!(reply.status, 401, "{why}");
        assert!(reply.header("www-authenticate").unwrap().contains(why));
    }
    // A valid token's payload with another key's signature: the signature check.
    let good = f.issuer.sign(&claims);
    let other = unpublished(&claims);
    let (head, _) = good.rsplit_once('.').unwrap();
    let spliced = format!("{head}.{}", other.rsplit_once('.').unwrap().1);
    let reply = f.call("/mcp", &spliced).await;
    assert!(
        reply
            .header("www-authenticate")
            .unwrap()
            .contains("signature is not valid")
    );
    assert_eq!(f.calls(), calls, "no forgery reached the host");
}

#[tokio::test]
async fn a_token_without_the_scope_is_a_403_naming_the_scope() {
    let f = Fixture::start(KeyKind::Es256).await;
    let token = f.issuer.sign(&f.claims(|c| c["scope"] = json!("openid")));
    let reply = f.call("/mcp", &token).await;
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert_eq!(
        reply.header("www-authenticate").unwrap(),
        format!(
            r#"Bearer resource_metadata="{}", scope="mcp:tools", error="insufficient_scope", error_description="the access token's scopes do not grant this endpoint""#,
            f.metadata_url("/mcp")
        )
    );
    assert!(
        reply.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`mcp:tools`")
    );
    // `mcp:ops` grants the agent `ops`, not the gateway; `scp` lists count as well.
    let agent = f.endpoint.url("/agents/ops/mcp");
    let token = f.issuer.sign(&f.claims(|c| {
        c.as_object_mut().unwrap().remove("scope");
        c["scp"] = json!(["mcp:ops"]);
        c["aud"] = json!(agent);
    }));
    assert_eq!(f.call("/agents/ops/mcp", &token).await.status, 200);
    assert_eq!(f.calls(), 1);
}

#[tokio::test]
async fn the_401_and_the_metadata_send_the_client_to_the_issuer() {
    let f = Fixture::start(KeyKind::Es256).await;
    let head = format!(
        "POST /agents/ops/mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json",
        f.endpoint.port
    );
    let reply = f.endpoint.raw(&head, CALL).await;
    assert_eq!(reply.status, 401);
    assert_eq!(
        reply.header("www-authenticate").unwrap(),
        format!(
            r#"Bearer resource_metadata="{}", scope="mcp:ops""#,
            f.metadata_url("/agents/ops/mcp")
        )
    );
    let doc = f
        .get("/.well-known/oauth-protected-resource/agents/ops/mcp")
        .await;
    assert_eq!(doc.status, 200);
    assert_eq!(doc.header("access-control-allow-origin"), Some("*"));
    assert_eq!(
        doc.json(),
        json!({
            "resource": f.endpoint.url("/agents/ops/mcp"),
            "authorization_servers": [f.issuer.url()],
            "scopes_supported": ["mcp:ops"],
            "bearer_methods_supported": ["header"],
            "resource_name": "airlock",
        })
    );
    let gateway = f
        .get("/.well-known/oauth-protected-resource/mcp")
        .await
        .json();
    assert_eq!(gateway["resource"], f.endpoint.url("/mcp"));
    let server = f.get("/.well-known/oauth-protected-resource").await.json();
    assert_eq!(server["resource"], f.endpoint.url(""));
    assert_eq!(server["scopes_supported"], json!(["mcp:tools", "mcp:ops"]));
    let missing = f
        .get("/.well-known/oauth-protected-resource/agents/nope/mcp")
        .await;
    assert_eq!(missing.status, 404);
    // airlock is no authorization server: its own AS metadata names the issuer instead.
    let not_as = f.get("/.well-known/oauth-authorization-server").await;
    assert_eq!(not_as.status, 404);
    assert_eq!(not_as.json()["error"], "not_an_authorization_server");
    assert!(
        not_as.json()["error_description"]
            .as_str()
            .unwrap()
            .contains(&f.issuer.url())
    );
}

#[tokio::test]
async fn rotated_keys_are_picked_up_after_a_refresh_and_old_ones_dropped() {
    let f = Fixture::start(KeyKind::Es256).await;
    let old = f.issuer.sign(&f.claims(|_| {}));
    assert_eq!(f.call("/mcp", &old).await.status, 200);
    assert_eq!(f.issuer.jwks_fetches(), 1);
    f.issuer.rotate(KeyKind::Es256);
    let new = f.issuer.sign(&f.claims(|_| {}));
    // Right after a fetch, an unknown kid does not fetch again (rate limit).
    let reply = f.call("/mcp", &new).await;
    assert_eq!(reply.status, 401);
    assert!(
        reply
            .header("www-authenticate")
            .unwrap()
            .contains("does not publish")
    );
    assert_eq!(f.issuer.jwks_fetches(), 1);
    f.advance(10);
    assert_eq!(f.call("/mcp", &new).await.status, 200);
    assert_eq!(f.issuer.jwks_fetches(), 2);
    let reply = f.call("/mcp", &old).await;
    assert_eq!(reply.status, 401, "the rotated-out key is dropped");
    assert_eq!(f.issuer.jwks_fetches(), 2);
    // Once the set has aged out it is fetched again, even for a known kid.
    f.advance(10 * 60);
    let fresh = f.issuer.sign(&f.claims(|_| {}));
    assert_eq!(f.call("/mcp", &fresh).await.status, 200);
    assert_eq!(f.issuer.jwks_fetches(), 3);
}

#[tokio::test]
async fn a_jwks_endpoint_down_is_a_503_and_a_cached_set_bridges_an_outage() {
    let f = Fixture::start(KeyKind::Es256).await;
    f.issuer.set_jwks_up(false);
    let token = f.issuer.sign(&f.claims(|_| {}));
    let reply = f.call("/mcp", &token).await;
    assert_eq!(reply.status, 503, "{}", reply.body);
    assert!(reply.body.contains("keys could not be fetched"));
    assert_eq!(f.call("/mcp", &token).await.status, 503);
    assert_eq!(
        f.issuer.jwks_fetches(),
        1,
        "no second fetch within the rate limit"
    );
    f.issuer.set_jwks_up(true);
    f.advance(10);
    assert_eq!(f.call("/mcp", &token).await.status, 200);
    // Down again after a good fetch: the cached set is used while it is fresh, and for an
    // hour past that; then the request is a 503.
    f.issuer.set_jwks_up(false);
    f.advance(10 * 60);
    let later = f.issuer.sign(&f.claims(|_| {}));
    assert_eq!(f.call("/mcp", &later).await.status, 200);
    assert_eq!(f.issuer.jwks_fetches(), 3);
    f.advance(60 * 60);
    let last = f.issuer.sign(&f.claims(|_| {}));
    assert_eq!(f.call("/mcp", &last).await.status, 503);
}

#[tokio::test]
async fn the_keys_are_fetched_through_the_egress_guard() {
    let f = Fixture::start_with(KeyKind::Es256, false).await;
    let reply = f.call("/mcp", &f.issuer.sign(&f.claims(|_| {}))).await;
    assert_eq!(reply.status, 503, "{}", reply.body);
    assert_eq!(f.issuer.jwks_fetches(), 0, "the guard refused 127.0.0.1");
}
