//! `connections/<name>.yml`: one remote MCP server whose tools join the gateway scope as
//! `<name>__<tool>` after boot-time discovery (docs/rules.md DECL-9 to DECL-13, DECL-16).
//!
//! Rules: `url` required; `transport` only `http`; `auth.type` bearer | header (header needs a
//! non-reserved `auth.header`); `auth.credential` is a dotted path; `approval` never | once |
//! always; `effect` at_most_once | idempotent (never transactional); credentials only over
//! https except to loopback; the file name is the namespace.

use std::path::PathBuf;
use std::time::Duration;

use crate::diag::Diag;
use crate::fields::Fields;
use crate::names::{CredentialPath, check_namespace};
use crate::policy::{Approval, Effect};
use crate::refs::Referenced;
use crate::tool::{McpAuth, McpProtocol};
use crate::tree::Node;
use crate::urls::check_credential_url;
use crate::values::{credential_path, duration, refer_credential};

/// A validated connection file.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionSpec {
    /// The file stem: tools are `<namespace>__<remote tool>`.
    pub namespace: String,
    /// The file, for messages.
    pub file: PathBuf,
    /// `url`: the MCP endpoint.
    pub url: String,
    /// `auth.type` (+ `auth.header`).
    pub auth: McpAuth,
    /// `auth.credential`.
    pub credential: Option<CredentialPath>,
    /// `approval` (default `never`).
    pub approval: Approval,
    /// `effect` (default `at_most_once`).
    pub effect: Effect,
    /// `protocol` (default `legacy`).
    pub protocol: McpProtocol,
    /// `approval_ttl`: overrides the server default for this connection's calls.
    pub approval_ttl: Option<Duration>,
}

const KEYS: [&str; 7] = [
    "url",
    "transport",
    "auth",
    "approval",
    "effect",
    "protocol",
    "approval_ttl",
];

/// Headers a declaration may not set: the transport, the egress guard or airlock owns them (one
/// that carried a credential would load green and then fail every call; `Idempotency-Key`
/// carries the call's key, LEDGER-17). Also every `proxy-*` header but `Proxy-Authorization`,
/// as the guard refuses them.
const RESERVED_HEADERS: [&str; 15] = [
    "host",
    "content-type",
    "content-length",
    "accept",
    "accept-encoding",
    "connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "keep-alive",
    "proxy-connection",
    "mcp-session-id",
    "mcp-protocol-version",
    "idempotency-key",
];

pub(crate) fn is_reserved_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    RESERVED_HEADERS.contains(&name.as_str())
        || (name.starts_with("proxy-") && name != "proxy-authorization")
}

/// Validates one connection file's tree.
pub(crate) fn read_connection(
    node: &Node,
    namespace: &str,
    d: &mut Diag,
) -> Option<ConnectionSpec> {
    if let Err(reason) = check_namespace(namespace) {
        d.push(node.at, "", format!("file name: {reason}"));
    }
    let f = Fields::open(node, "", &KEYS, d)?;
    let url = f.req_str("url", d);
    if let Some(transport) = f.opt_str("transport", d).filter(|t| t != "http") {
        d.push(
            f.key_at("transport"),
            "transport",
            format!("transport `{transport}` is not supported; only `http` (v1)"),
        );
    }
    let (auth, credential) = f
        .get("auth")
        .map_or((Some(McpAuth::None), None), |n| auth(n, d));
    let approval = f.word::<Approval>("approval", d);
    let effect = effect(&f, d);
    let protocol = protocol(&f, d);
    let approval_ttl = f
        .get("approval_ttl")
        .and_then(|n| duration(n, "approval_ttl", d));
    let with_credential = auth.as_ref().is_some_and(|a| *a != McpAuth::None);
    if let Some(url) = &url {
        match check_credential_url(url, with_credential) {
            Ok(()) => d.refer(
                f.key_at("url"),
                "url",
                Referenced::Url(url.clone(), crate::Reach::Operator),
            ),
            Err(reason) => d.push(f.key_at("url"), "url", reason),
        }
    }
    Some(ConnectionSpec {
        namespace: namespace.to_owned(),
        file: d.file().to_path_buf(),
        url: url?,
        auth: auth?,
        credential,
        approval: approval.ok()?.unwrap_or_default(),
        effect: effect?,
        protocol: protocol?,
        approval_ttl,
    })
}

fn auth(node: &Node, d: &mut Diag) -> (Option<McpAuth>, Option<CredentialPath>) {
    let Some(f) = Fields::open(node, "auth", &["type", "header", "credential"], d) else {
        return (None, None);
    };
    let credential = f
        .required("credential", d)
        .and_then(|n| credential_path(n, "auth.credential", d));
    refer_credential(&f, credential.as_ref(), d);
    let auth = match f.req_str("type", d).as_deref() {
        Some("bearer") => {
            if f.has("header") {
                d.push(
                    f.key_at("header"),
                    "auth.header",
                    "`header` applies only to `type: header`",
                );
            }
            Some(McpAuth::Bearer)
        }
        Some("header") => header_name(&f, d).map(McpAuth::Header),
        Some(other) => {
            d.push(
                f.key_at("type"),
                "auth.type",
                format!("`{other}` is not an auth type; use `bearer` or `header`"),
            );
            None
        }
        None => None,
    };
    (auth, credential)
}

/// Reads and checks `header` (for `type`/`scheme: header`): `[A-Za-z0-9-]{1,64}`, not reserved.
pub(crate) fn header_name(f: &Fields<'_>, d: &mut Diag) -> Option<String> {
    let name = f.req_str("header", d)?;
    let valid = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if !valid {
        d.push(
            f.key_at("header"),
            &f.key("header"),
            format!("`{name}` is not a header name (1-64 letters, digits and `-`)"),
        );
        return None;
    }
    if is_reserved_header(&name) {
        let owner = if name.eq_ignore_ascii_case("idempotency-key") {
            "airlock sends the call's idempotency key in it"
        } else {
            "the transport sets it"
        };
        d.push(
            f.key_at("header"),
            &f.key("header"),
            format!("`{name}` is a reserved header: {owner}, so it cannot carry a credential"),
        );
        return None;
    }
    Some(name)
}

/// Reads `effect` for a remote tool: `transactional` is refused with the reason.
pub(crate) fn effect(f: &Fields<'_>, d: &mut Diag) -> Option<Effect> {
    match f.word::<Effect>("effect", d) {
        Ok(Some(Effect::Transactional)) => {
            d.push(
                f.key_at("effect"),
                &f.key("effect"),
                "`transactional` is not available for a remote tool: a remote call cannot join a database transaction; use `at_most_once` (a crash parks the call in doubt for a person) or `idempotent` (you assert the remote operation is safe to repeat)",
            );
            None
        }
        Ok(effect) => Some(effect.unwrap_or_default()),
        Err(()) => None,
    }
}

/// Reads `protocol`: legacy | auto | 2026-07-28.
pub(crate) fn protocol(f: &Fields<'_>, d: &mut Diag) -> Option<McpProtocol> {
    let Some(word) = f.opt_str("protocol", d) else {
        return if f.get("protocol").is_some() {
            None
        } else {
            Some(McpProtocol::Legacy)
        };
    };
    let parsed = McpProtocol::parse(&word);
    if parsed.is_none() {
        d.push(
            f.key_at("protocol"),
            &f.key("protocol"),
            format!("`{word}` is not one of {}", McpProtocol::WORDS.join(" | ")),
        );
    }
    parsed
}
