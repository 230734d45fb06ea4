//! `type: api` tools (docs/rules.md DECL-18 to DECL-23, DECL-41): a tenant HTTP API described
//! inline or in `apis/<slug>.yml`; one tool per operation, named `<slug with _>_<operation>`.
//! Reads execute; writes only propose. An operation's `approval` overrides the declaration's.

use serde_json::Value;

use crate::declared::{
    Declared, declare, description, non_empty_list, shared_policy, under_connection,
    unread_confirm, writes_and_mode,
};
use crate::diag::Diag;
use crate::fields::Fields;
use crate::names::{check_slug, check_snake, slug_prefix};
use crate::schema::{check_input_schema, from_parameters};
use crate::tool::{ApiAuth, ApiOperation, Method, Policy, ToolSource};
use crate::tree::Node;

pub(crate) const KEYS: [&str; 10] = [
    "name",
    "type",
    "connection",
    "auth",
    "operations",
    "description",
    "rate_limit",
    "approval",
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
    let policy = shared_policy(f, d);
    let operations: Vec<Operation> = non_empty_list(f, "operations", "operation", d)
        .into_iter()
        .filter_map(|(path, node)| operation(node, &path, d))
        .collect();
    let (Some(slug), Some(connection), Some(auth)) = (slug, connection, auth) else {
        return Vec::new();
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
        "bearer" => Some(ApiAuth::Bearer),
        "basic" => Some(ApiAuth::Basic),
        "header" => crate::connection::header_name(&f, d).map(ApiAuth::Header),
        "query" => f.req_str("param", d).map(ApiAuth::Query),
        other => {
            d.push(
                f.key_at("scheme"),
                &f.key("scheme"),
                format!(
                    "`{other}` is not an auth scheme; use one of: header, bearer, basic, query"
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
        .and_then(|n| request(n, &f.key("request"), &schema, d));
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
    let policy = Policy {
        writes: op.writes,
        mode: op.mode,
        approval: op.approval.unwrap_or(api.policy.approval),
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

struct Request {
    method: Method,
    path: String,
    query: Vec<(String, String)>,
    body: Option<Value>,
    allow_slashes: Vec<String>,
}

fn request(node: &Node, path: &str, schema: &Value, d: &mut Diag) -> Option<Request> {
    let f = Fields::open(node, path, &REQUEST_KEYS, d)?;
    if f.has("headers") {
        d.push(
            f.key_at("headers"),
            &f.key("headers"),
            "`request.headers` is not allowed: authentication goes through `auth`, never around it",
        );
    }
    let method = match f.req_str("method", d).as_deref() {
        Some("GET") => Some(Method::Get),
        Some("POST") => Some(Method::Post),
        Some(other) => {
            d.push(
                f.key_at("method"),
                &f.key("method"),
                format!("`{other}` is not allowed; `method` is GET or POST"),
            );
            None
        }
        None => None,
    };
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
    if body.is_some() && method == Some(Method::Get) {
        d.push(
            f.key_at("body"),
            &f.key("body"),
            "a GET request has no body; use `query`, or `method: POST`",
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
    for name in placeholders.iter().chain(&allow_slashes) {
        if schema.pointer(&format!("/properties/{name}")).is_none() {
            d.push(f.at(), f.path(), format!("`{{{name}}}` names no parameter of this operation; declare it under `parameters`"));
        }
    }
    if f.has("headers") {
        return None;
    }
    Some(Request {
        method: method?,
        path: req_path?,
        query,
        body,
        allow_slashes,
    })
}

/// The path must start with exactly one `/` and carry no query or fragment.
fn check_path(path: &str) -> Result<(), String> {
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

fn query(node: &Node, path: &str, d: &mut Diag) -> Vec<(String, String)> {
    let Some(f) = Fields::open_free(node, path, d) else {
        return Vec::new();
    };
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
fn collect_placeholders(value: &Value, out: &mut Vec<String>) {
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
