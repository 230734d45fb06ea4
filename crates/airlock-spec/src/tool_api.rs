//! `type: api` tools (docs/rules.md DECL-18 to DECL-23, DECL-41, DECL-88): a tenant HTTP API
//! described inline or in `apis/<slug>.yml`; one tool per operation, named
//! `<slug with _>_<operation>`.
//! Reads execute; writes only propose. An operation's `approval` overrides the declaration's.
//! A read (a GET declared `writes: false`) is `idempotent` whatever the declaration says, so an
//! unanswered read fails as a tool error and never waits for a person; `effect` (DECL-88)
//! applies to the writes, `at_most_once` by default.

use serde_json::Value;

use crate::connection::effect;
use crate::declared::{
    Declared, declare, description, non_empty_list, shared_policy, under_connection,
    unread_confirm, writes_and_mode,
};
use crate::diag::Diag;
use crate::fields::Fields;
use crate::names::{check_slug, check_snake, slug_prefix};
use crate::policy::Effect;
use crate::schema::{check_input_schema, from_parameters};
use crate::tool::{ApiAuth, ApiOperation, Method, Policy, ToolSource};
use crate::tree::Node;

pub(crate) const KEYS: [&str; 13] = [
    "name",
    "type",
    "connection",
    "auth",
    "effect",
    "operations",
    "description",
    "rate_limit",
    "limits",
    "approval",
    "approvers",
    "base_url",
    "confirm",
];
const OP_KEYS: [&str; 9] = [
    "name",
    "description",
    "writes",
    "mode",
    "approval",
    "parameters",
    "request",
    "response",
    "confirm",
];
const REQUEST_KEYS: [&str; 6] = [
    "method",
    "path",
    "query",
    "body",
    "headers",
    "allow_slashes",
];

/// The declaration-wide parts every operation shares.
struct Api {
    slug: String,
    connection: String,
    auth: ApiAuth,
    policy: Policy,
}

/// Reads one `type: api` entry of `spec.tools` into one tool per operation.
pub(crate) fn read_api(f: &Fields<'_>, d: &mut Diag) -> Vec<Declared> {
    if f.has("base_url") {
        d.push(
            f.key_at("base_url"),
            &f.key("base_url"),
            "`base_url` is not allowed in the spec: it comes from the connection",
        );
    }
    unread_confirm(f, "api", d);
    let slug = f.req_str("name", d).filter(|s| {
        check_slug(s, 64)
            .map_err(|r| d.push(f.key_at("name"), &f.key("name"), r))
            .is_ok()
    });
    let connection = f.req_str("connection", d);
    let auth = f
        .required("auth", d)
        .and_then(|n| auth(n, &f.key("auth"), d));
    let write_effect = effect(f, d);
    let policy = shared_policy(f, d);
    let operations: Vec<Operation> = non_empty_list(f, "operations", "operation", d)
        .into_iter()
        .filter_map(|(path, node)| operation(node, &path, d))
        .collect();
    let (Some(slug), Some(connection), Some(auth), Some(write_effect)) =
        (slug, connection, auth, write_effect)
    else {
        return Vec::new();
    };
    let policy = Policy {
        effect: write_effect,
        ..policy
    };
    let api = Api {
        slug,
        connection,
        auth,
        policy,
    };
    let tools = operations
        .into_iter()
        .filter_map(|op| declare_operation(&api, op, d))
        .collect();
    under_connection(f, tools)
}

fn auth(node: &Node, path: &str, d: &mut Diag) -> Option<ApiAuth> {
    let f = Fields::open(node, path, &["scheme", "header", "param"], d)?;
    match f.req_str("scheme", d)?.as_str() {
        // An API without auth says so (DECL-18, DECL-86): the call carries no credential.
        "none" => Some(ApiAuth::None),
        "bearer" => Some(ApiAuth::Bearer),
        "basic" => Some(ApiAuth::Basic),
        "header" => crate::connection::header_name(&f, d).map(ApiAuth::Header),
        "query" => f.req_str("param", d).map(ApiAuth::Query),
        other => {
            d.push(
                f.key_at("scheme"),
                &f.key("scheme"),
                format!(
                    "`{other}` is not an auth scheme; use one of: header, bearer, basic, query, none"
                ),
            );
            None
        }
    }
}

/// One operation, validated on its own (the declaration-wide parts may have failed).
struct Operation {
    name: String,
    description: String,
    writes: bool,
    mode: crate::policy::Mode,
    /// `approval` of this operation; the declaration's when absent.
    approval: Option<crate::policy::Approval>,
    schema: Value,
    request: Request,
    select: Option<String>,
    at: crate::tree::Pos,
    path: String,
}

fn operation(node: &Node, path: &str, d: &mut Diag) -> Option<Operation> {
    let f = Fields::open(node, path, &OP_KEYS, d)?;
    unread_confirm(&f, "api", d);
    let name = f.req_str("name", d).filter(|n| {
        check_snake(n)
            .map_err(|r| d.push(f.key_at("name"), &f.key("name"), r))
            .is_ok()
    });
    let description = description(&f, d);
    let writes_mode = writes_and_mode(&f, d);
    let approval = f.word::<crate::policy::Approval>("approval", d);
    let schema = from_parameters(f.get("parameters"), &f.key("parameters"), d);
    // The schema the model sees has the same limits as a declared one (DECL-23).
    check_input_schema(&schema, f.key_at("parameters"), &f.key("parameters"), d);
    let request = f
        .required("request", d)
        .and_then(|n| request(n, &f.key("request"), &schema, Rules::Api, d));
    let select = f.get("response").and_then(|n| {
        let r = Fields::open(n, &f.key("response"), &["select"], d)?;
        r.opt_str("select", d)
    });
    let ((writes, mode), at, path) = (writes_mode?, f.key_at("name"), f.key("name"));
    Some(Operation {
        name: name?,
        description: description?,
        writes,
        mode,
        approval: approval.ok()?,
        schema,
        request: request?,
        select,
        at,
        path,
    })
}

fn declare_operation(api: &Api, op: Operation, d: &mut Diag) -> Option<Declared> {
    let final_name = format!("{}_{}", slug_prefix(&api.slug), op.name);
    let source = ToolSource::Api(ApiOperation {
        slug: api.slug.clone(),
        operation: op.name,
        connection: api.connection.clone(),
        auth: api.auth.clone(),
        method: op.request.method,
        path: op.request.path,
        query: op.request.query,
        body: op.request.body,
        allow_slashes: op.request.allow_slashes,
        select: op.select,
    });
    // A read changes nothing, so its unanswered request is an ordinary failure, never a
    // call in doubt (LEDGER-71). A read is a `GET` declared `writes: false`: a `POST` may not
    // be safe to repeat whatever its declaration says (the same rule decides which calls
    // carry an idempotency key), and a `GET` declared `writes: true` says it is not one.
    let reads = !op.writes && op.request.method == Method::Get;
    let policy = Policy {
        writes: op.writes,
        mode: op.mode,
        approval: op.approval.unwrap_or(api.policy.approval),
        effect: if reads {
            Effect::Idempotent
        } else {
            api.policy.effect
        },
        ..api.policy.clone()
    };
    declare(
        &final_name,
        op.description,
        op.schema,
        source,
        policy,
        (op.at, &op.path),
        d,
    )
}

/// A request as declared: a tenant API's, or a catalog action's.
pub(crate) struct Request {
    pub(crate) method: Method,
    pub(crate) path: String,
    pub(crate) query: Vec<(String, String)>,
    pub(crate) body: Option<Value>,
    pub(crate) allow_slashes: Vec<String>,
    /// `request.headers` (catalog actions only), values templated.
    pub(crate) headers: Vec<(String, String)>,
}

/// Whose request is read: a tenant's `type: api` (GET or POST, no headers, DECL-21) or an
/// operator's catalog action (any of the five methods, headers, DECL-45).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rules {
    Api,
    Catalog,
}

impl Rules {
    fn methods(self) -> &'static [Method] {
        match self {
            Self::Api => &[Method::Get, Method::Post],
            Self::Catalog => &[
                Method::Get,
                Method::Post,
                Method::Put,
                Method::Patch,
                Method::Delete,
            ],
        }
    }
}

pub(crate) fn request(
    node: &Node,
    path: &str,
    schema: &Value,
    rules: Rules,
    d: &mut Diag,
) -> Option<Request> {
    let f = Fields::open(node, path, &REQUEST_KEYS, d)?;
    if f.has("headers") && rules == Rules::Api {
        d.push(
            f.key_at("headers"),
            &f.key("headers"),
            "`request.headers` is not allowed: authentication goes through `auth`, never around it",
        );
    }
    let headers = match rules {
        Rules::Api => Vec::new(),
        Rules::Catalog => f
            .get("headers")
            .map(|n| headers(n, &f.key("headers"), d))
            .unwrap_or_default(),
    };
    let method = f.req_str("method", d).and_then(|word| {
        let found = rules.methods().iter().find(|m| m.as_str() == word).copied();
        if found.is_none() {
            let names: Vec<&str> = rules.methods().iter().map(|m| m.as_str()).collect();
            d.push(
                f.key_at("method"),
                &f.key("method"),
                format!(
                    "`{word}` is not allowed; `method` is one of: {}",
                    names.join(", ")
                ),
            );
        }
        found
    });
    let req_path = f.req_str("path", d).filter(|p| {
        check_path(p)
            .map_err(|r| d.push(f.key_at("path"), &f.key("path"), r))
            .is_ok()
    });
    let query = f
        .get("query")
        .map(|n| query(n, &f.key("query"), d))
        .unwrap_or_default();
    let body = f.get("body").map(crate::tree::Node::to_json);
    if let Some(method) = method.filter(|m| body.is_some() && !m.has_body()) {
        let m = method.as_str();
        d.push(
            f.key_at("body"),
            &f.key("body"),
            format!("a {m} request has no body; use `query`, or `method: POST`"),
        );
    }
    let allow_slashes: Vec<String> = f
        .opt_str_list("allow_slashes", d)
        .unwrap_or_default()
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    let mut placeholders = Vec::new();
    collect_placeholders(
        &Value::String(req_path.clone().unwrap_or_default()),
        &mut placeholders,
    );
    query
        .iter()
        .for_each(|(_, v)| collect_placeholders(&Value::String(v.clone()), &mut placeholders));
    if let Some(body) = &body {
        collect_placeholders(body, &mut placeholders);
    }
    headers
        .iter()
        .for_each(|(_, v)| collect_placeholders(&Value::String(v.clone()), &mut placeholders));
    for name in placeholders.iter().chain(&allow_slashes) {
        if schema.pointer(&format!("/properties/{name}")).is_none() {
            d.push(f.at(), f.path(), format!("`{{{name}}}` names no parameter of this operation; declare it under `parameters`"));
        }
    }
    if f.has("headers") && rules == Rules::Api {
        return None;
    }
    Some(Request {
        method: method?,
        path: req_path?,
        query,
        body,
        allow_slashes,
        headers,
    })
}

/// The path must start with exactly one `/` and carry no query or fragment.
pub(crate) fn check_path(path: &str) -> Result<(), String> {
    if !path.starts_with('/') {
        return Err(format!(
            "`{path}` must start with `/`: without it the path could change the host the credential goes to"
        ));
    }
    if path.starts_with("//") {
        return Err(format!(
            "`{path}` starts with `//`, which names another host; start with a single `/`"
        ));
    }
    if path.contains(['?', '#']) {
        return Err(format!(
            "`{path}` has a query or fragment; put query parameters under `query`"
        ));
    }
    Ok(())
}

/// Headers an operator sets (DECL-45): each a valid name that neither the transport, airlock
/// nor `auth` owns; values are strings, templated like the query.
pub(crate) fn headers(node: &Node, path: &str, d: &mut Diag) -> Vec<(String, String)> {
    let Some(f) = Fields::open_free(node, path, d) else {
        return Vec::new();
    };
    string_map(&f, d)
        .into_iter()
        .filter(|(name, _)| match header_problem(name) {
            Some(reason) => {
                d.push(f.key_at(name), &f.key(name), reason);
                false
            }
            None => true,
        })
        .collect()
}

fn header_problem(name: &str) -> Option<String> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if !valid {
        return Some(format!(
            "`{name}` is not a header name (1-64 letters, digits and `-`)"
        ));
    }
    let owned = crate::connection::is_reserved_header(name)
        || ["authorization", "proxy-authorization", "cookie"]
            .iter()
            .any(|h| name.eq_ignore_ascii_case(h));
    owned.then(|| format!("`{name}` cannot be set here: the transport, airlock or `auth` owns it"))
}

fn query(node: &Node, path: &str, d: &mut Diag) -> Vec<(String, String)> {
    let Some(f) = Fields::open_free(node, path, d) else {
        return Vec::new();
    };
    string_map(&f, d)
}

/// A mapping of strings (numbers and booleans written as text).
fn string_map(f: &Fields<'_>, d: &mut Diag) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in f.entries() {
        match &entry.value.value {
            crate::tree::NodeValue::Str(s) => out.push((entry.key.clone(), s.clone())),
            crate::tree::NodeValue::Int(_)
            | crate::tree::NodeValue::Float(_)
            | crate::tree::NodeValue::Bool(_) => {
                out.push((entry.key.clone(), entry.value.to_json().to_string()));
            }
            _ => d.push(
                entry.key_at,
                &f.key(&entry.key),
                format!("expected a string, found {}", entry.value.kind()),
            ),
        }
    }
    out
}

/// Every `{name}` placeholder in strings of `value`.
pub(crate) fn collect_placeholders(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => {
            let mut rest = s.as_str();
            while let Some(start) = rest.find('{') {
                let after = &rest[start + 1..];
                let Some(end) = after.find('}') else { break };
                let name = &after[..end];
                if !name.is_empty()
                    && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                    && !out.iter().any(|n| n == name)
                {
                    out.push(name.to_owned());
                }
                rest = &after[end + 1..];
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_placeholders(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_placeholders(v, out)),
        _ => {}
    }
}
