//! The issuer's state: its signing keys (RS256, ES256, EdDSA), the tokens it minted, and the
//! authorization codes, refresh tokens, clients and token requests of its authorization
//! server, shared by `issuer` (keys, JWKS, forgeries), `authorize` and `token` (the OAuth
//! endpoints). Tokens are signed here, as compact JWS.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::KeySize;
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair, RSA_PKCS1_SHA256,
    RsaKeyPair,
};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

/// The kinds of signing key the issuer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// RSA 2048, RS256.
    Rs256,
    /// P-256, ES256.
    Es256,
    /// Ed25519, EdDSA.
    EdDsa,
}

pub(crate) enum Pair {
    Rsa(RsaKeyPair),
    Ec(EcdsaKeyPair),
    Ed(Ed25519KeyPair),
}

pub(crate) struct SigningKey {
    pub(crate) kid: String,
    kind: KeyKind,
    pair: Pair,
}

impl SigningKey {
    pub(crate) fn generate(kind: KeyKind, kid: String) -> Self {
        let pair = match kind {
            KeyKind::Rs256 => Pair::Rsa(RsaKeyPair::generate(KeySize::Rsa2048).expect("RSA key")),
            KeyKind::Es256 => Pair::Ec(
                EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).expect("P-256 key"),
            ),
            KeyKind::EdDsa => Pair::Ed(Ed25519KeyPair::generate().expect("Ed25519 key")),
        };
        Self { kid, kind, pair }
    }

    pub(crate) fn alg(&self) -> &'static str {
        match self.kind {
            KeyKind::Rs256 => "RS256",
            KeyKind::Es256 => "ES256",
            KeyKind::EdDsa => "EdDSA",
        }
    }

    /// The public half as a JWK.
    pub(crate) fn jwk(&self) -> Value {
        let (kid, alg) = (&self.kid, self.alg());
        match &self.pair {
            Pair::Rsa(pair) => {
                let public = pair.public_key();
                json!({"kty": "RSA", "kid": kid, "use": "sig", "alg": alg,
                    "n": b64(public.modulus().big_endian_without_leading_zero()),
                    "e": b64(public.exponent().big_endian_without_leading_zero())})
            }
            Pair::Ec(pair) => {
                // An uncompressed point: 0x04, then x and y, 32 bytes each.
                let point = pair.public_key().as_ref();
                json!({"kty": "EC", "kid": kid, "use": "sig", "alg": alg, "crv": "P-256",
                    "x": b64(&point[1..33]), "y": b64(&point[33..65])})
            }
            Pair::Ed(pair) => json!({"kty": "OKP", "kid": kid, "use": "sig", "alg": alg,
                "crv": "Ed25519", "x": b64(pair.public_key().as_ref())}),
        }
    }

    pub(crate) fn sign(&self, message: &[u8]) -> Vec<u8> {
        match &self.pair {
            Pair::Rsa(pair) => {
                let mut signature = vec![0; pair.public_modulus_len()];
                pair.sign(
                    &RSA_PKCS1_SHA256,
                    &SystemRandom::new(),
                    message,
                    &mut signature,
                )
                .expect("RSA signature");
                signature
            }
            Pair::Ec(pair) => pair
                .sign(&SystemRandom::new(), message)
                .expect("ECDSA signature")
                .as_ref()
                .to_vec(),
            Pair::Ed(pair) => pair.sign(message).as_ref().to_vec(),
        }
    }

    /// The bytes an attacker would find public: the RSA key's PKCS#1 DER (any key's public
    /// bytes for the others).
    pub(crate) fn public_bytes(&self) -> Vec<u8> {
        match &self.pair {
            Pair::Rsa(pair) => pair.public_key().as_ref().to_vec(),
            Pair::Ec(pair) => pair.public_key().as_ref().to_vec(),
            Pair::Ed(pair) => pair.public_key().as_ref().to_vec(),
        }
    }
}

pub(crate) struct IssuerState {
    pub(crate) keys: Vec<SigningKey>,
    pub(crate) next_kid: usize,
    pub(crate) jwks_up: bool,
    pub(crate) jwks_fetches: usize,
    pub(crate) origin: String,
    /// What `token` puts in the tokens it issues.
    pub(crate) subject: String,
    pub(crate) authorize: Grants,
    /// Every token signed by [`mint`], with its claims: what "a token it signed" means to the
    /// token endpoint's exchange grants.
    pub(crate) minted: HashMap<String, Value>,
    /// The lifetime (`expires_in`, seconds) of the access tokens the token endpoint issues.
    pub(crate) token_lifetime: u64,
    /// When set, the token endpoint requires this client id and secret by HTTP Basic.
    pub(crate) client: Option<(String, String)>,
    /// Every request the token endpoint received, in order.
    pub(crate) token_requests: Vec<crate::TokenRequest>,
}

/// Codes handed out and not yet redeemed, live refresh tokens, and clients registered.
pub(crate) struct Grants {
    pub(crate) codes: HashMap<String, Pending>,
    /// Codes and refresh tokens handed out so far: each one's number, so none repeats.
    pub(crate) issued: usize,
    /// Live refresh tokens (with rotation, a refresh spends the one used).
    pub(crate) refresh: HashMap<String, Granted>,
    /// Whether a refresh issues a new refresh token and spends the one used (the default).
    pub(crate) rotate: bool,
    pub(crate) clients: usize,
}

impl Default for Grants {
    fn default() -> Self {
        Self {
            codes: HashMap::new(),
            issued: 0,
            refresh: HashMap::new(),
            rotate: true,
            clients: 0,
        }
    }
}

/// What an authorization code stands for.
pub(crate) struct Pending {
    pub(crate) challenge: String,
    pub(crate) redirect_uri: String,
    pub(crate) granted: Granted,
}

/// What a code or a refresh token grants: tokens for this subject, resource and scope.
#[derive(Clone)]
pub(crate) struct Granted {
    pub(crate) subject: String,
    pub(crate) resource: Option<String>,
    pub(crate) scope: Option<String>,
}

pub(crate) fn lock(state: &Mutex<IssuerState>) -> MutexGuard<'_, IssuerState> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

pub(crate) fn signed(header: &Value, claims: &Value, sign: impl Fn(&[u8]) -> Vec<u8>) -> String {
    let message = format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    );
    let signature = sign(message.as_bytes());
    format!("{message}.{}", b64(&signature))
}

/// `claims` signed with the newest key, its kid in the header, and remembered as minted.
pub(crate) fn mint(state: &mut IssuerState, claims: &Value) -> String {
    let key = state.keys.last().expect("the issuer holds a key");
    let header = json!({"alg": key.alg(), "typ": "at+jwt", "kid": key.kid});
    let token = signed(&header, claims, |m| key.sign(m));
    state.minted.insert(token.clone(), claims.clone());
    token
}
