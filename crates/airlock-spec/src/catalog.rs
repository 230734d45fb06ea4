//! `catalog/<slug>/integration.yaml`: operator-written integrations (docs/rules.md DECL-44 to
//! DECL-49). Validated strictly: every problem of every catalog file fails the load, with file,
//! line and key. Each action becomes one tool named `<slug with _>_<action>`, which agents
//! enable by slug and action list (`type: integration`, read by [`crate::agent`]).
//!
//! The base URL is the operator's; an action's templates fill the path, query, headers and body
//! only, so no argument can change the host the request (and its credential) goes to.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::declared::{Declared, declare, description, non_empty_list};
use crate::diag::Diag;
use crate::fields::Fields;
use crate::names::{CredentialPath, check_slug, check_snake, slug_prefix};
use crate::policy::Mode;
use crate::refs::Referenced;
use crate::schema::{check_input_schema, from_parameters};
use crate::tool::{ApiAuth, ApiOperation, IntegrationAction, Pagination, Policy, ToolSource};
use crate::tool_api::{Request, Rules, headers, request};
use crate::tree::Node;
use crate::urls::check_credential_url;
use crate::values::{credential_path, refer_credential};

/// The file every catalog directory holds.
pub const INTEGRATION_FILE: &str = "integration.yaml";

/// Most pages one paginated call fetches (DECL-47).
pub const MAX_PAGES: u64 = 100;

const KEYS: [&str; 6] = [
    "name",
    "description",
    "base_url",
    "auth",
    "headers",
    "actions",
];
const ACTION_KEYS: [&str; 7] = [
    "name",
    "description",
    "parameters",
    "request",
    "response",
    "pagination",
    "confirm",
];

/// The validated catalog: each integration's tools, by slug.
pub(crate) type Catalog = BTreeMap<String, Vec<Declared>>;

/// The integration-wide parts every action shares.
struct Integration {
    slug: String,
    base_url: String,
    auth: ApiAuth,
    credential: Option<CredentialPath>,
    headers: Vec<(String, String)>,
}

/// Reads one catalog file of integration `slug` into one tool per action.
pub(crate) fn read_integration(node: &Node, slug: &str, d: &mut Diag) -> Vec<Declared> {
    if let Err(reason) = check_slug(slug, 64) {
        d.push(node.at, "", format!("directory name: {reason}"));
    }
    let Some(f) = Fields::open(node, "", &KEYS, d) else {
        return Vec::new();
    };
    if let Some(name) = f.opt_str("name", d).filter(|n| n != slug) {
        d.push(
            f.key_at("name"),
            "name",
            format!("`{name}` differs from the directory name: an integration's slug is its directory, catalog/{slug}/"),
        );
    }
    f.opt_str("description", d);
    let auth = f.required("auth", d).and_then(|n| auth(n, d));
    let base_url = f.req_str("base_url", d).filter(|url| {
        let with_credential = auth.as_ref().is_some_and(|(a, _)| *a != ApiAuth::None);
        let at = f.key_at("base_url");
        match check_credential_url(url, with_credential) {
            Ok(()) => {
                let reach = crate::Reach::Integration(slug.to_owned());
                d.refer(at, "base_url", Referenced::Url(url.clone(), reach));
            }
            Err(reason) => d.push(at, "base_url", reason),
        }
        true
    });
    let shared = f
        .get("headers")
        .map(|n| headers(n, "headers", d))
        .unwrap_or_default();
    let actions: Vec<Action> = non_empty_list(&f, "actions", "action", d)
        .into_iter()
        .filter_map(|(path, node)| action(node, &path, d))
        .collect();
    for (name, value) in &shared {
        if value.contains('{') {
            d.push(
                f.key_at("headers"),
                &format!("headers.{name}"),
                "integration-wide headers are fixed text; put a templated header under an action's `request.headers`",
            );
        }
    }
    let (Some(base_url), Some((auth, credential))) = (base_url, auth) else {
        return Vec::new();
    };
    let integration = Integration {
        slug: slug.to_owned(),
        base_url,
        auth,
        credential,
        headers: shared,
    };
    actions
        .into_iter()
        .filter_map(|a| declare_action(&integration, a, d))
        .collect()
}

/// `auth: {scheme, header?, credential?}`: `none`, `bearer`, `header` or `basic` (DECL-44).
fn auth(node: &Node, d: &mut Diag) -> Option<(ApiAuth, Option<CredentialPath>)> {
    let f = Fields::open(node, "auth", &["scheme", "header", "credential"], d)?;
    let scheme = match f.req_str("scheme", d)?.as_str() {
        "none" => ApiAuth::None,
        "bearer" => ApiAuth::Bearer,
        "basic" => ApiAuth::Basic,
        "header" => ApiAuth::Header(crate::connection::header_name(&f, d)?),
        other => {
            d.push(
                f.key_at("scheme"),
                "auth.scheme",
                format!("`{other}` is not an auth scheme; use one of: none, bearer, header, basic"),
            );
            return None;
        }
    };
    let credential = f
        .get("credential")
        .and_then(|n| credential_path(n, "auth.credential", d));
    match (&scheme, f.has("credential")) {
        (ApiAuth::None, true) => d.push(
            f.key_at("credential"),
            "auth.credential",
            "`scheme: none` sends no credential; remove `credential`",
        ),
        (ApiAuth::None, false) | (_, true) => {}
        (_, false) => d.push(
            f.at(),
            "auth.credential",
            "`credential` is required: the path of the secret this scheme sends",
        ),
    }
    refer_credential(&f, credential.as_ref(), d);
    Some((scheme, credential))
}

/// One action, validated on its own.
struct Action {
    name: String,
    description: String,
    schema: Value,
    request: Request,
    select: Option<String>,
    pagination: Option<Pagination>,
    confirm: bool,
    at: crate::tree::Pos,
    path: String,
}

fn action(node: &Node, path: &str, d: &mut Diag) -> Option<Action> {
    let f = Fields::open(node, path, &ACTION_KEYS, d)?;
    let name = f.req_str("name", d).filter(|n| {
        check_snake(n)
            .map_err(|r| d.push(f.key_at("name"), &f.key("name"), r))
            .is_ok()
    });
    let description = description(&f, d);
    let schema = from_parameters(f.get("parameters"), &f.key("parameters"), d);
    check_input_schema(&schema, f.key_at("parameters"), &f.key("parameters"), d);
    let request = f
        .required("request", d)
        .and_then(|n| request(n, &f.key("request"), &schema, Rules::Catalog, d));
    let select = f.get("response").and_then(|n| {
        let r = Fields::open(n, &f.key("response"), &["select"], d)?;
        r.opt_str("select", d)
    });
    let pagination = match f.get("pagination") {
        None => Some(None),
        Some(n) => pagination(n, &f.key("pagination"), d).map(Some),
    };
    if f.has("pagination") && select.is_none() {
        d.push(
            f.key_at("pagination"),
            &f.key("pagination"),
            "a paginated action needs `response.select`: the list each page holds",
        );
    }
    let confirm = confirm(&f, request.as_ref(), d);
    Some(Action {
        name: name?,
        description: description?,
        schema,
        request: request?,
        select,
        pagination: pagination?,
        confirm: confirm?,
        at: f.key_at("name"),
        path: f.key("name"),
    })
}

/// `confirm` (DECL-48): optional on a GET (default `false`); a write (any other method) must
/// say it, so no write runs without a person unless its operator wrote so.
fn confirm(f: &Fields<'_>, request: Option<&Request>, d: &mut Diag) -> Option<bool> {
    let confirm = f.opt_bool("confirm", d).ok()?;
    let write = request.filter(|r| r.method != crate::tool::Method::Get);
    match (confirm, write) {
        (Some(c), _) => Some(c),
        (None, None) => Some(false),
        (None, Some(r)) => {
            d.push(
                f.key_at("request"),
                &f.key("confirm"),
                format!(
                    "a {} action must declare `confirm: true` (the person confirms each call) or `confirm: false`",
                    r.method.as_str()
                ),
            );
            None
        }
    }
}

/// `pagination: {style: cursor | page, param, next?, start?, max_pages}` (DECL-47).
fn pagination(node: &Node, path: &str, d: &mut Diag) -> Option<Pagination> {
    let keys = ["style", "param", "next", "start", "max_pages"];
    let f = Fields::open(node, path, &keys, d)?;
    let param = f.req_str("param", d);
    let max_pages = f
        .required("max_pages", d)
        .and_then(|_| f.opt_u64("max_pages", d));
    let max_pages = match max_pages {
        Some(n @ 1..=MAX_PAGES) => u32::try_from(n).ok(),
        Some(_) => {
            d.push(
                f.key_at("max_pages"),
                &f.key("max_pages"),
                format!("expected 1 to {MAX_PAGES} pages"),
            );
            None
        }
        None => None,
    };
    let pagination = match f.req_str("style", d)?.as_str() {
        "cursor" => Pagination::Cursor {
            param: param?,
            next: f.req_str("next", d)?,
            max_pages: max_pages?,
        },
        "page" => Pagination::Page {
            param: param?,
            start: f.opt_u64("start", d).unwrap_or(1),
            max_pages: max_pages?,
        },
        other => {
            d.push(
                f.key_at("style"),
                &f.key("style"),
                format!("`{other}` is not a pagination style; use `cursor` or `page`"),
            );
            return None;
        }
    };
    Some(pagination)
}

fn declare_action(integration: &Integration, a: Action, d: &mut Diag) -> Option<Declared> {
    let final_name = format!("{}_{}", slug_prefix(&integration.slug), a.name);
    let writes = a.request.method != crate::tool::Method::Get;
    let mut headers = integration.headers.clone();
    headers.extend(a.request.headers);
    let source = ToolSource::Integration(IntegrationAction {
        request: ApiOperation {
            slug: integration.slug.clone(),
            operation: a.name,
            connection: format!("catalog/{}", integration.slug),
            auth: integration.auth.clone(),
            method: a.request.method,
            path: a.request.path,
            query: a.request.query,
            body: a.request.body,
            allow_slashes: a.request.allow_slashes,
            select: a.select,
        },
        base_url: integration.base_url.clone(),
        credential: integration.credential.clone(),
        headers,
        pagination: a.pagination,
    });
    let policy = Policy {
        writes,
        mode: Mode::Execute,
        confirm: a.confirm,
        ..Policy::default()
    };
    declare(
        &final_name,
        a.description,
        a.schema,
        source,
        policy,
        (a.at, &a.path),
        d,
    )
}
