//! The executor of catalog integrations (`type: integration`, docs/rules.md DECL-44..DECL-47):
//! the api executor's request building — templates, each value encoded once, the base URL
//! joined with an origin check so no argument changes the host — and its guarded send, plus
//! what only the catalog has: declared headers and pagination.
//!
//! Guarantees: every page goes through the egress guard; a paginated call fetches at most
//! `max_pages` pages and never holds more than [`MAX_RESPONSE_BYTES`] of items; a page cursor
//! from the upstream is only ever a query value (encoded), never a template.

use airlock_egress::GuardedClient;
use airlock_spec::{ApiConnection, Credentials, IntegrationAction, Pagination};
use serde_json::{Map, Value};

use super::api::template::substitute;
use super::api::{ApiRequest, MAX_RESPONSE_BYTES, build_request, select, send};
use crate::ToolError;

/// Runs one action with prepared `arguments`; `idempotency_key` goes with every request of a
/// write (LEDGER-17).
pub(crate) async fn call(
    client: &GuardedClient,
    action: &IntegrationAction,
    credentials: &Credentials,
    arguments: &Value,
    idempotency_key: Option<&str>,
) -> Result<Value, ToolError> {
    let args = arguments.as_object().cloned().unwrap_or_default();
    let first = request(action, credentials, &args, idempotency_key)?;
    let selected = action.request.select.as_deref();
    match (&action.pagination, selected) {
        (Some(pagination), Some(path)) => pages(client, first, path, pagination).await,
        _ => send(client, &first, selected).await,
    }
}

/// The first request: the api executor's, with the declared headers (a header whose
/// placeholder has no argument is left out, like a query value).
fn request(
    action: &IntegrationAction,
    credentials: &Credentials,
    args: &Map<String, Value>,
    idempotency_key: Option<&str>,
) -> Result<ApiRequest, ToolError> {
    let connection = ApiConnection {
        base_url: action.base_url.clone(),
        credential: action.credential.clone(),
        // Not read here: the integration executor always sends through the public-only guard.
        use_egress_allow: false,
        per_principal: None,
    };
    let mut request = build_request(&action.request, &connection, credentials, args)?;
    for (name, template) in &action.headers {
        if let Some(value) = substitute(template, args) {
            request = request.with_header(name, value)?;
        }
    }
    match idempotency_key {
        Some(key) => request.with_idempotency_key(key),
        None => Ok(request),
    }
}

/// Fetches pages until the last one or `max_pages`, concatenating each page's `select`ed list.
async fn pages(
    client: &GuardedClient,
    first: ApiRequest,
    path: &str,
    pagination: &Pagination,
) -> Result<Value, ToolError> {
    let mut items = Items::default();
    match pagination {
        Pagination::Cursor {
            param,
            next,
            max_pages,
        } => {
            let mut request = first;
            for _ in 0..*max_pages {
                let body = send(client, &request, None).await?;
                items.add(list(&body, path)?)?;
                let Some(cursor) = cursor(&body, next) else {
                    break;
                };
                request = request.with_query_pair(param, &cursor);
            }
        }
        Pagination::Page {
            param,
            start,
            max_pages,
        } => {
            for page in (*start..).take(*max_pages as usize) {
                let request = first.clone().with_query_pair(param, &page.to_string());
                let body = send(client, &request, None).await?;
                let list = list(&body, path)?;
                if list.is_empty() {
                    break;
                }
                items.add(list)?;
            }
        }
    }
    Ok(Value::Array(items.values))
}

/// The items gathered so far, bounded like one response.
#[derive(Default)]
struct Items {
    values: Vec<Value>,
    bytes: usize,
}

impl Items {
    fn add(&mut self, list: Vec<Value>) -> Result<(), ToolError> {
        self.bytes += serde_json::to_vec(&list).map_or(0, |v| v.len());
        if self.bytes > MAX_RESPONSE_BYTES {
            return Err(ToolError::bad_response(format!(
                "the pages together are over {MAX_RESPONSE_BYTES} bytes (5 MiB); ask for less"
            )));
        }
        self.values.extend(list);
        Ok(())
    }
}

/// A page's `response.select`, which must be a list.
fn list(body: &Value, path: &str) -> Result<Vec<Value>, ToolError> {
    match select(body, path)? {
        Value::Array(items) => Ok(items.clone()),
        Value::Null => Ok(Vec::new()),
        _ => Err(ToolError::bad_response(format!(
            "`response.select` is `{path}`, but a page holds no list there"
        ))),
    }
}

/// The next cursor at dotted path `next`, if there is one (absent, `null`, `""` or `false` end).
fn cursor(body: &Value, next: &str) -> Option<String> {
    match select(body, next).ok()? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}
