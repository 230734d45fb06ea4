//! A token issuer on 127.0.0.1: signing keys (RS256, ES256, EdDSA), their JWKS, the RFC 8414
//! metadata document, and a signing helper that also forges the tokens an attacker would send
//! (`alg: none`, HS256 keyed with the RSA public key). [`crate::Issuer::start`] also serves a
//! small authorization server (`authorize`, `register`, and `token` with PKCE, refresh, RFC 8693
//! token exchange and RFC 7523 jwt-bearer) for SDK clients and airlock's own OAuth client.
//!
//! Tests control what the JWKS endpoint serves: rotate keys, take it down, count its fetches;
//! and what the token endpoint does: the access tokens' lifetime, a required client, and the
//! record of every request it received.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::authorize;
use crate::keys::{IssuerState, KeyKind, SigningKey, lock, mint, signed};
use crate::listen::serve;
use crate::token::{self, TokenRequest};

/// A token issuer and authorization server on 127.0.0.1 (see the module docs).
#[derive(Clone)]
pub struct Issuer {
    port: u16,
    state: Arc<Mutex<IssuerState>>,
}

impl Issuer {
    /// An issuer holding one key of `kind` (kid `key-1`), its JWKS up.
    pub async fn start(kind: KeyKind) -> Self {
        let state = Arc::new(Mutex::new(IssuerState {
            keys: vec![SigningKey::generate(kind, "key-1".to_owned())],
            next_kid: 2,
            jwks_up: true,
            jwks_fetches: 0,
            origin: String::new(),
            subject: "alice".to_owned(),
            authorize: crate::keys::Grants::default(),
            minted: HashMap::new(),
            token_lifetime: 3600,
            client: None,
            token_requests: Vec::new(),
        }));
        let app = Router::new()
            .route("/jwks.json", get(jwks))
            .route("/.well-known/oauth-authorization-server", get(metadata))
            .merge(authorize::router())
            .route("/token", post(token::token))
            .with_state(state.clone());
        let port = serve(app, 0).await;
        lock(&state).origin = format!("http://127.0.0.1:{port}");
        Self { port, state }
    }

    /// The issuer identifier (`iss`), also its base URL: `http://127.0.0.1:PORT`.
    #[must_use]
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Where its JWKS is served.
    #[must_use]
    pub fn jwks_uri(&self) -> String {
        format!("{}/jwks.json", self.url())
    }

    /// The kid of the key [`Issuer::sign`] uses (the newest).
    #[must_use]
    pub fn kid(&self) -> String {
        lock(&self.state)
            .keys
            .last()
            .map(|k| k.kid.clone())
            .expect("the issuer holds a key")
    }

    /// `claims` signed with the newest key, its kid in the header. The token endpoint takes
    /// it as a token it signed (a subject, actor or assertion token of an exchange).
    #[must_use]
    pub fn sign(&self, claims: &Value) -> String {
        mint(&mut lock(&self.state), claims)
    }

    /// `claims` signed with a fresh key the JWKS never shows, under `kid`.
    pub fn sign_with_unpublished_key(&self, kid: &str, kind: KeyKind) -> impl Fn(&Value) -> String {
        let key = SigningKey::generate(kind, kid.to_owned());
        move |claims| {
            let header = json!({"alg": key.alg(), "typ": "at+jwt", "kid": key.kid});
            signed(&header, claims, |m| key.sign(m))
        }
    }

    /// An unsigned token: `alg: none`, an empty signature, the newest key's kid.
    #[must_use]
    pub fn unsigned(&self, claims: &Value) -> String {
        let header = json!({"alg": "none", "typ": "at+jwt", "kid": self.kid()});
        signed(&header, claims, |_| Vec::new())
    }

    /// The key-confusion forgery: HS256 with the newest key's public bytes as the HMAC secret,
    /// under that key's kid.
    #[must_use]
    pub fn hs256_with_public_key(&self, claims: &Value) -> String {
        let state = lock(&self.state);
        let key = state.keys.last().expect("the issuer holds a key");
        let secret = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, &key.public_bytes());
        let header = json!({"alg": "HS256", "typ": "JWT", "kid": key.kid});
        signed(&header, claims, |m| {
            aws_lc_rs::hmac::sign(&secret, m).as_ref().to_vec()
        })
    }

    /// Replaces every key with one new key of `kind`; returns its kid.
    pub fn rotate(&self, kind: KeyKind) -> String {
        let mut state = lock(&self.state);
        let kid = format!("key-{}", state.next_kid);
        state.next_kid += 1;
        state.keys = vec![SigningKey::generate(kind, kid.clone())];
        kid
    }

    /// Takes the JWKS endpoint down (503) or brings it back.
    pub fn set_jwks_up(&self, up: bool) {
        lock(&self.state).jwks_up = up;
    }

    /// How many times the JWKS was asked for (down or up).
    #[must_use]
    pub fn jwks_fetches(&self) -> usize {
        lock(&self.state).jwks_fetches
    }

    /// The `sub` the authorization endpoint grants tokens to from now on (default `alice`).
    pub fn set_subject(&self, subject: &str) {
        subject.clone_into(&mut lock(&self.state).subject);
    }

    /// The lifetime of the access tokens the token endpoint issues (`expires_in`; default
    /// 3600 seconds).
    pub fn set_token_lifetime(&self, seconds: u64) {
        lock(&self.state).token_lifetime = seconds;
    }

    /// Whether a refresh rotates the refresh token (default: yes). Without rotation the token
    /// endpoint answers a refresh with no `refresh_token`, and the one used stays good.
    pub fn set_refresh_rotation(&self, rotate: bool) {
        lock(&self.state).authorize.rotate = rotate;
    }

    /// From now on the token endpoint requires this client id and secret by HTTP Basic, and
    /// answers any other request `invalid_client` (401).
    pub fn require_client(&self, id: &str, secret: &str) {
        lock(&self.state).client = Some((id.to_owned(), secret.to_owned()));
    }

    /// Every request the token endpoint received, in order, refused ones included.
    #[must_use]
    pub fn token_requests(&self) -> Vec<TokenRequest> {
        lock(&self.state).token_requests.clone()
    }
}

async fn jwks(State(state): State<Arc<Mutex<IssuerState>>>) -> Response {
    let mut state = lock(&state);
    state.jwks_fetches += 1;
    if !state.jwks_up {
        return (StatusCode::SERVICE_UNAVAILABLE, "down").into_response();
    }
    let keys: Vec<Value> = state.keys.iter().map(SigningKey::jwk).collect();
    axum::Json(json!({"keys": keys})).into_response()
}

async fn metadata(State(state): State<Arc<Mutex<IssuerState>>>) -> Response {
    let origin = lock(&state).origin.clone();
    axum::Json(json!({
        "issuer": origin,
        "authorization_endpoint": format!("{origin}/authorize"),
        "token_endpoint": format!("{origin}/token"),
        "registration_endpoint": format!("{origin}/register"),
        "jwks_uri": format!("{origin}/jwks.json"),
        "response_types_supported": ["code"],
        "grant_types_supported": [
            "authorization_code", "refresh_token",
            "urn:ietf:params:oauth:grant-type:token-exchange",
            "urn:ietf:params:oauth:grant-type:jwt-bearer",
        ],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none", "client_secret_basic"],
    }))
    .into_response()
}
