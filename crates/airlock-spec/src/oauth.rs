//! `[mcp.oauth]` of `airlock.toml`: the issuer whose access tokens the MCP endpoint accepts
//! (docs/rules.md DECL-73..DECL-76). Guarantees: every key is checked where it is written
//! (file, line, key); HMAC algorithms and `none` are refused; the scope map is explicit and
//! names only real scopes; URLs are http(s) and references `airlock check` resolves.

use std::time::Duration;

use crate::diag::Diag;
use crate::fields::Fields;
use crate::refs::Referenced;
use crate::scope::ScopeId;
use crate::tree::{Node, Pos};
use crate::values::duration;

/// Algorithms accepted when `algorithms` is not set: every asymmetric one.
pub const DEFAULT_OAUTH_ALGORITHMS: [&str; 9] = [
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA",
];
/// Default `leeway` on `exp` and `nbf`: 30 s.
pub const DEFAULT_OAUTH_LEEWAY: Duration = Duration::from_secs(30);
/// The largest `leeway` accepted: 5 minutes.
const MAX_LEEWAY: Duration = Duration::from_secs(300);

const KEYS: [&str; 9] = [
    "issuer",
    "jwks_uri",
    "resource",
    "audience",
    "principal_claim",
    "groups_claim",
    "scopes",
    "algorithms",
    "leeway",
];

/// The validated `[mcp.oauth]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthSpec {
    /// `issuer`: the issuer identifier, an http(s) URL (`iss` must equal it).
    pub issuer: String,
    /// `jwks_uri`: where the keys are; `None`: from the issuer's RFC 8414 metadata.
    pub jwks_uri: Option<String>,
    /// `resource`: this server's origin as clients reach it (default `[server] public_url`).
    pub resource: Option<String>,
    /// `audience`: more `aud` values accepted (default none).
    pub audience: Vec<String>,
    /// `principal_claim` (default `sub`).
    pub principal_claim: String,
    /// `groups_claim` (default `groups`).
    pub groups_claim: String,
    /// `[mcp.oauth.scopes]`: token scope → the airlock scopes it grants, in file order.
    pub scopes: Vec<(String, Vec<ScopeId>)>,
    /// `algorithms` (default [`DEFAULT_OAUTH_ALGORITHMS`]).
    pub algorithms: Vec<String>,
    /// `leeway` (default 30 s, at most 5 m).
    pub leeway: Duration,
}

/// Reads `[mcp.oauth]`; `None` when it has errors (each reported).
pub(crate) fn read_oauth(node: &Node, d: &mut Diag) -> Option<OAuthSpec> {
    let f = Fields::open(node, "mcp.oauth", &KEYS, d)?;
    let issuer = f
        .req_str("issuer", d)
        .filter(|u| http_url(&f, "issuer", u, d));
    let jwks_uri = f
        .opt_str("jwks_uri", d)
        .filter(|u| http_url(&f, "jwks_uri", u, d));
    let resource = f
        .opt_str("resource", d)
        .filter(|u| check_resource(u, f.key_at("resource"), "mcp.oauth.resource", d));
    let principal_claim = claim_name(&f, "principal_claim", "sub", d);
    let groups_claim = claim_name(&f, "groups_claim", "groups", d);
    let audience = f
        .opt_str_list("audience", d)
        .unwrap_or_default()
        .into_iter()
        .map(|(a, _)| a)
        .collect();
    let algorithms = algorithms(&f, d);
    let leeway = leeway(&f, d);
    let scopes = scopes(&f, d);
    if let Some(uri) = jwks_uri.as_ref().or(issuer.as_ref()) {
        let key = if jwks_uri.is_some() {
            "jwks_uri"
        } else {
            "issuer"
        };
        d.refer(
            f.key_at(key),
            &f.key(key),
            Referenced::Url(uri.clone(), crate::Reach::Operator),
        );
    }
    Some(OAuthSpec {
        issuer: issuer?,
        jwks_uri,
        resource,
        audience,
        principal_claim,
        groups_claim,
        scopes: scopes?,
        algorithms,
        leeway,
    })
}

/// `url` is an http(s) URL with a host, without a fragment (DECL-73).
fn http_url(f: &Fields<'_>, key: &str, url: &str, d: &mut Diag) -> bool {
    let ok = url::Url::parse(url).is_ok_and(|u| {
        matches!(u.scheme(), "http" | "https") && u.host_str().is_some() && u.fragment().is_none()
    });
    if !ok {
        d.push(
            f.key_at(key),
            &f.key(key),
            format!("`{url}` is not an http(s) URL such as `https://auth.example.com`"),
        );
    }
    ok
}

/// The resource is an origin: scheme, host and port only, because the endpoints' resource
/// URLs and their RFC 9728 metadata paths are built under it (DECL-74).
fn check_resource(url: &str, at: Pos, key: &str, d: &mut Diag) -> bool {
    let ok = url::Url::parse(url).is_ok_and(|u| {
        matches!(u.scheme(), "http" | "https")
            && u.host_str().is_some()
            && u.path() == "/"
            && u.query().is_none()
            && u.fragment().is_none()
    });
    if !ok {
        d.push(
            at,
            key,
            format!(
                "`{url}` is not an origin such as `https://airlock.example.com` (no path): the \
                 MCP endpoints' resource URLs are built under it"
            ),
        );
    }
    ok
}

/// `[mcp.oauth] resource` defaults to `[server] public_url`, which must then be an origin;
/// with neither, the endpoints have no resource URL to give clients (DECL-74).
pub(crate) fn oauth_resource(
    oauth: Option<&mut OAuthSpec>,
    public_url: Option<&str>,
    at: Pos,
    d: &mut Diag,
) {
    let Some(oauth) = oauth.filter(|o| o.resource.is_none()) else {
        return;
    };
    match public_url {
        Some(url) if check_resource(url, at, "server.public_url", d) => {
            oauth.resource = Some(url.to_owned());
        }
        Some(_) => {}
        None => d.push(
            at,
            "mcp.oauth.resource",
            "set `resource` (this server's origin as clients reach it, e.g.              `https://airlock.example.com`) or [server] public_url",
        ),
    }
}

fn claim_name(f: &Fields<'_>, key: &str, default: &str, d: &mut Diag) -> String {
    match f.opt_str(key, d) {
        Some(name) if name.trim().is_empty() => {
            d.push(f.key_at(key), &f.key(key), "must name a claim");
            default.to_owned()
        }
        Some(name) => name,
        None => default.to_owned(),
    }
}

/// Asymmetric algorithms only (DECL-76): with an HMAC algorithm the issuer's public key would
/// be the secret, and `none` is no signature at all.
fn algorithms(f: &Fields<'_>, d: &mut Diag) -> Vec<String> {
    let Some(list) = f.opt_str_list("algorithms", d) else {
        return DEFAULT_OAUTH_ALGORITHMS.map(str::to_owned).to_vec();
    };
    if list.is_empty() {
        d.push(
            f.key_at("algorithms"),
            &f.key("algorithms"),
            "an empty list accepts no token; name algorithms, or remove the key",
        );
    }
    for (name, at) in &list {
        if !DEFAULT_OAUTH_ALGORITHMS.contains(&name.as_str()) {
            d.push(
                *at,
                &f.key("algorithms"),
                format!(
                    "`{name}` is not accepted (never `none` nor an HMAC algorithm); expected \
                     some of: {}",
                    DEFAULT_OAUTH_ALGORITHMS.join(", ")
                ),
            );
        }
    }
    list.into_iter().map(|(name, _)| name).collect()
}

fn leeway(f: &Fields<'_>, d: &mut Diag) -> Duration {
    let Some(leeway) = f
        .get("leeway")
        .and_then(|n| duration(n, "mcp.oauth.leeway", d))
    else {
        return DEFAULT_OAUTH_LEEWAY;
    };
    if leeway > MAX_LEEWAY {
        d.push(
            f.key_at("leeway"),
            &f.key("leeway"),
            "at most 5m: a longer leeway keeps expired tokens valid",
        );
    }
    leeway.min(MAX_LEEWAY)
}

/// `[mcp.oauth.scopes]`: required, each token scope a word granting a non-empty list of
/// airlock scopes (DECL-75). Deny by default: a token scope not listed grants nothing.
fn scopes(f: &Fields<'_>, d: &mut Diag) -> Option<Vec<(String, Vec<ScopeId>)>> {
    let node = f.required("scopes", d)?;
    let table = Fields::open_free(node, &f.key("scopes"), d)?;
    if table.entries().is_empty() {
        d.push(
            table.at(),
            table.path(),
            "name at least one token scope and the airlock scopes it grants, e.g. \
             `\"mcp:tools\" = [\"gateway\"]`",
        );
    }
    let mut out = Vec::new();
    for entry in table.entries() {
        let key = table.key(&entry.key);
        let word = !entry.key.is_empty()
            && entry
                .key
                .chars()
                .all(|c| c.is_ascii_graphic() && c != '"' && c != '\\');
        if !word {
            d.push(
                entry.key_at,
                &key,
                "a token scope is printable ASCII without spaces, `\"` or `\\`",
            );
        }
        let grants = scope_list(&entry.value, &key, d);
        out.push((entry.key.clone(), grants));
    }
    Some(out)
}

fn scope_list(node: &Node, key: &str, d: &mut Diag) -> Vec<ScopeId> {
    let items = match node.to_json() {
        serde_json::Value::Array(items) if !items.is_empty() => items,
        _ => {
            d.push(
                node.at,
                key,
                "expected a non-empty list of airlock scopes (\"gateway\", \"agent:<name>\")",
            );
            return Vec::new();
        }
    };
    items
        .iter()
        .filter_map(|item| {
            let parsed = item.as_str().map(str::parse::<ScopeId>);
            match parsed {
                Some(Ok(scope)) => Some(scope),
                Some(Err(reason)) => {
                    d.push(node.at, key, reason.to_string());
                    None
                }
                None => {
                    d.push(node.at, key, "expected \"gateway\" or \"agent:<name>\"");
                    None
                }
            }
        })
        .collect()
}
