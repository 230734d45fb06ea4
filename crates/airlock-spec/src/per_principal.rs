//! `per_principal = true` on a `[connections.<name>]` entry of `airlock.toml`: every principal
//! calls the connection with a credential of their own (docs/rules.md DECL-91 … DECL-93).
//!
//! Guarantees: a per-principal connection names no deployment-wide `credential` (a call must
//! never fall back to the operator's secret); where a person's credential comes from is one of
//! three — a secret the person sets, an account connected through `[connections.<name>.oauth]`,
//! or the caller's own OAuth token exchanged through `[connections.<name>.token_exchange]` —
//! never two; every endpoint is an http(s) URL (https unless loopback, since codes, secrets and
//! tokens travel to it), checked where it is written and resolved by `airlock check`; every key
//! is checked at its file, line and key.

use crate::diag::Diag;
use crate::fields::Fields;
use crate::names::CredentialPath;
use crate::tree::Node;
use crate::values::{credential_at, secret_url};

/// Where each principal's credential for a connection comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PerPrincipal {
    /// Each person sets a secret of their own (CLI, API, inbox).
    Stored,
    /// Each person connects their account: authorization code with PKCE, refreshed by airlock.
    OAuth(ConnectOAuth),
    /// The caller's OAuth access token is exchanged for one for this connection on each call.
    Exchange(TokenExchange),
}

/// `[connections.<name>.oauth]`: the upstream's authorization server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectOAuth {
    /// `authorization_endpoint`: where the person is sent to consent.
    pub authorization_endpoint: String,
    /// `token_endpoint`: where codes and refresh tokens are redeemed.
    pub token_endpoint: String,
    /// `client_id`: airlock's client at that server.
    pub client_id: String,
    /// `client_secret`: credential path of the client's secret (none: a public client).
    pub client_secret: Option<CredentialPath>,
    /// `scopes` asked for.
    pub scopes: Vec<String>,
    /// `resource` (RFC 8707) asked for, if the server needs one.
    pub resource: Option<String>,
}

/// `[connections.<name>.token_exchange]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenExchange {
    /// `grant`: `token_exchange` (RFC 8693) or `jwt_bearer` (RFC 7523, on-behalf-of).
    pub grant: ExchangeGrant,
    /// `token_endpoint`.
    pub token_endpoint: String,
    /// `client_id`.
    pub client_id: String,
    /// `client_secret`: credential path of the client's secret.
    pub client_secret: Option<CredentialPath>,
    /// `scopes` asked for.
    pub scopes: Vec<String>,
    /// `audience` (RFC 8693 only).
    pub audience: Option<String>,
    /// `resource` (RFC 8693 only).
    pub resource: Option<String>,
    /// `actor_token`: credential path of airlock's own token, sent as the actor (RFC 8693).
    pub actor_token: Option<CredentialPath>,
    /// `actor`: the subject of the actor token, which the caller's token's `may_act` must name.
    pub actor: Option<String>,
}

/// The grant of a token exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExchangeGrant {
    /// RFC 8693 token exchange.
    TokenExchange,
    /// RFC 7523 JWT bearer assertion (Entra's on-behalf-of).
    JwtBearer,
}

const OAUTH_KEYS: [&str; 6] = [
    "authorization_endpoint",
    "token_endpoint",
    "client_id",
    "client_secret",
    "scopes",
    "resource",
];

const EXCHANGE_KEYS: [&str; 9] = [
    "grant",
    "token_endpoint",
    "client_id",
    "client_secret",
    "scopes",
    "audience",
    "resource",
    "actor_token",
    "actor",
];

/// What the rest of `airlock.toml` provides that a credential source needs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Available {
    /// `[mcp.oauth]`: only a caller authenticated by OAuth has a token to exchange.
    pub(crate) mcp_oauth: bool,
    /// `[server] public_url`: where the authorization server sends the person back.
    pub(crate) public_url: bool,
}

/// Reads where a per-principal connection's credentials come from; `c` is the connection's
/// table. `None` when something is wrong (each problem reported).
pub(crate) fn read_per_principal(
    c: &Fields<'_>,
    has: Available,
    d: &mut Diag,
) -> Option<PerPrincipal> {
    if c.has("oauth") && !has.public_url {
        d.push(
            c.key_at("oauth"),
            &c.key("oauth"),
            "`oauth` needs `[server] public_url`: the authorization server sends each person back to `<public_url>/v1/connect/callback`",
        );
    }
    if c.has("token_exchange") && !has.mcp_oauth {
        d.push(
            c.key_at("token_exchange"),
            &c.key("token_exchange"),
            "`token_exchange` needs `[mcp.oauth]`: only a caller authenticated by OAuth has a token to exchange",
        );
    }
    if c.has("credential") {
        d.push(
            c.key_at("credential"),
            &c.key("credential"),
            "`credential` is not allowed with `per_principal = true`: each principal's own credential is sent, never a shared one",
        );
    }
    match (c.get("oauth"), c.get("token_exchange")) {
        (Some(_), Some(node)) => {
            d.push(
                node.at,
                &c.key("token_exchange"),
                "`oauth` and `token_exchange` cannot both be set: a person's credential comes from one place",
            );
            None
        }
        (Some(node), None) => read_oauth(node, &c.key("oauth"), d).map(PerPrincipal::OAuth),
        (None, Some(node)) => {
            read_exchange(node, &c.key("token_exchange"), d).map(PerPrincipal::Exchange)
        }
        (None, None) => Some(PerPrincipal::Stored),
    }
}

/// `oauth` or `token_exchange` on a connection that is not per principal.
pub(crate) fn refuse_without_per_principal(c: &Fields<'_>, d: &mut Diag) {
    for key in ["oauth", "token_exchange"] {
        if c.has(key) {
            d.push(
                c.key_at(key),
                &c.key(key),
                format!("`{key}` needs `per_principal = true`: it says where each principal's credential comes from"),
            );
        }
    }
}

fn read_oauth(node: &Node, path: &str, d: &mut Diag) -> Option<ConnectOAuth> {
    let f = Fields::open(node, path, &OAUTH_KEYS, d)?;
    let authorization_endpoint = secret_url(&f, "authorization_endpoint", d);
    let token_endpoint = secret_url(&f, "token_endpoint", d);
    let client_id = f.req_str("client_id", d);
    let client_secret = credential_at(&f, "client_secret", d);
    let scopes = scopes(&f, d);
    let resource = f.opt_str("resource", d);
    Some(ConnectOAuth {
        authorization_endpoint: authorization_endpoint?,
        token_endpoint: token_endpoint?,
        client_id: client_id?,
        client_secret,
        scopes,
        resource,
    })
}

fn read_exchange(node: &Node, path: &str, d: &mut Diag) -> Option<TokenExchange> {
    let f = Fields::open(node, path, &EXCHANGE_KEYS, d)?;
    let grant = grant(&f, d);
    let token_endpoint = secret_url(&f, "token_endpoint", d);
    let client_id = f.req_str("client_id", d);
    let client_secret = credential_at(&f, "client_secret", d);
    let actor_token = credential_at(&f, "actor_token", d);
    let actor = f.opt_str("actor", d);
    let exchange = TokenExchange {
        grant: grant?,
        token_endpoint: token_endpoint?,
        client_id: client_id?,
        client_secret,
        scopes: scopes(&f, d),
        audience: f.opt_str("audience", d),
        resource: f.opt_str("resource", d),
        actor_token,
        actor,
    };
    check_exchange(&f, &exchange, d).then_some(exchange)
}

/// The actor token and the name `may_act` must give go together, and only with RFC 8693.
fn check_exchange(f: &Fields<'_>, e: &TokenExchange, d: &mut Diag) -> bool {
    let mut ok = true;
    if e.grant == ExchangeGrant::JwtBearer {
        for key in ["audience", "resource", "actor_token", "actor"] {
            if f.has(key) {
                ok = false;
                d.push(
                    f.key_at(key),
                    &f.key(key),
                    format!("`{key}` belongs to `grant = \"token_exchange\"`; a jwt_bearer exchange sends the caller's token as its only assertion"),
                );
            }
        }
    }
    if e.actor_token.is_some() != e.actor.is_some() {
        ok = false;
        let key = if e.actor.is_some() {
            "actor"
        } else {
            "actor_token"
        };
        d.push(
            f.key_at(key),
            &f.key(key),
            "`actor_token` and `actor` go together: `actor` is the actor token's subject, which the caller's token must name in `may_act`",
        );
    }
    ok
}

fn grant(f: &Fields<'_>, d: &mut Diag) -> Option<ExchangeGrant> {
    match f.req_str("grant", d)?.as_str() {
        "token_exchange" => Some(ExchangeGrant::TokenExchange),
        "jwt_bearer" => Some(ExchangeGrant::JwtBearer),
        other => {
            d.push(
                f.key_at("grant"),
                &f.key("grant"),
                format!("unknown grant `{other}`: expected `token_exchange` (RFC 8693) or `jwt_bearer` (RFC 7523)"),
            );
            None
        }
    }
}

fn scopes(f: &Fields<'_>, d: &mut Diag) -> Vec<String> {
    f.opt_str_list("scopes", d)
        .unwrap_or_default()
        .into_iter()
        .map(|(s, _)| s)
        .collect()
}
