//! The endpoint's methods beside tools: `resources/list`, `resources/templates/list`,
//! `resources/read`, `prompts/list`, `prompts/get`, `completion/complete`, and the skills
//! extension's `skills/list` and `skills/get` (SEP-2640), each answered from the host's
//! [`OfferHost`] side (docs/rules.md MCP-54..MCP-62, MCP-88..MCP-91).
//!
//! Guarantees: a scope declares `resources`, `prompts`, `completions` and the
//! `io.modelcontextprotocol/skills` extension only when it has something for them, in
//! `initialize` and `server/discover` alike, and a method of a capability the scope does not
//! declare is -32601 as before; `skills/get` answers only a skill `skills/list` shows the
//! caller (-32602 otherwise, with `error.data.uri`); `subscribe` only to a 2026-07-28 client
//! of a scope with a subscribable resource (MCP-92); never `directoryRead` or
//! `listChanged` (a scope's lists are fixed at boot). Lists are served whole
//! (one page), filtered for their caller. An entry the host hands over that the SDK cannot
//! read is an internal error, never a partly served list.

use rmcp::ErrorData;
use rmcp::model::ErrorCode;
use rmcp::model::{
    CompleteRequestParams, CompleteResult, ExtensionCapabilities, GetSkillResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListSkillsResult,
    PromptsCapability, ResourcesCapability, SKILLS_EXTENSION_ID, ServerCapabilities,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::convert::to_error_data;
use super::request::Admitted;
use crate::host::ToolHost;
use crate::host::{Listed, Offers};

/// Declares exactly the capabilities beside tools the scope of `admitted` has entries for;
/// `resources.subscribe` when a resource of the scope can tell of its updates: a 2026-07-28
/// client hears them on `subscriptions/listen` (MCP-92), a session-era client on its session's
/// stream (MCP-98).
pub(super) fn declare(host: &dyn ToolHost, admitted: &Admitted, caps: &mut ServerCapabilities) {
    caps.resources = None;
    if let Some(extensions) = caps.extensions.as_mut() {
        extensions.remove(SKILLS_EXTENSION_ID);
    }
    caps.extensions.take_if(|e| e.is_empty());
    let Offers {
        resources,
        prompts,
        completions,
        skills,
        subscribe,
    } = host.offers(&admitted.scope);
    if resources {
        let mut declared = ResourcesCapability::default();
        declared.subscribe = subscribe.then_some(true);
        caps.resources = Some(declared);
    }
    if prompts {
        caps.prompts = Some(PromptsCapability::default());
    }
    if completions {
        caps.completions = Some(Map::new());
    }
    if skills {
        // No `directoryRead`: airlock serves a skill's files as its entry lists them (MCP-88).
        caps.extensions
            .get_or_insert_with(ExtensionCapabilities::new)
            .insert(SKILLS_EXTENSION_ID.to_owned(), Map::new());
    }
}

/// `list` for the caller, or -32601 when the scope does not declare its capability.
fn listed(host: &dyn ToolHost, admitted: &Admitted, list: Listed) -> Result<Value, ErrorData> {
    let offers = host.offers(&admitted.scope);
    let declared = match list {
        Listed::Resources | Listed::Templates => offers.resources,
        Listed::Prompts => offers.prompts,
        Listed::Skills => offers.skills,
    };
    if !declared {
        return Err(not_declared(method(list)));
    }
    let entries = host
        .list_offered(&admitted.scope, &admitted.caller, list)
        .map_err(to_error_data)?;
    let key = match list {
        Listed::Resources => "resources",
        Listed::Templates => "resourceTemplates",
        Listed::Prompts => "prompts",
        Listed::Skills => "skills",
    };
    let mut result = Map::new();
    result.insert(
        key.to_owned(),
        Value::Array(entries.into_iter().map(Value::Object).collect()),
    );
    Ok(complete_result(result))
}

/// A method of a capability the scope does not declare: as if it did not exist.
pub(super) fn not_declared(method: &'static str) -> ErrorData {
    ErrorData::new(ErrorCode::METHOD_NOT_FOUND, method, None)
}

fn method(list: Listed) -> &'static str {
    match list {
        Listed::Resources => "resources/list",
        Listed::Templates => "resources/templates/list",
        Listed::Prompts => "prompts/list",
        Listed::Skills => "skills/list",
    }
}

pub(super) fn resources(
    host: &dyn ToolHost,
    admitted: &Admitted,
) -> Result<ListResourcesResult, ErrorData> {
    from_value(listed(host, admitted, Listed::Resources)?)
}

pub(super) fn templates(
    host: &dyn ToolHost,
    admitted: &Admitted,
) -> Result<ListResourceTemplatesResult, ErrorData> {
    from_value(listed(host, admitted, Listed::Templates)?)
}

pub(super) fn prompts(
    host: &dyn ToolHost,
    admitted: &Admitted,
) -> Result<ListPromptsResult, ErrorData> {
    from_value(listed(host, admitted, Listed::Prompts)?)
}

pub(super) fn skills(
    host: &dyn ToolHost,
    admitted: &Admitted,
) -> Result<ListSkillsResult, ErrorData> {
    from_value(listed(host, admitted, Listed::Skills)?)
}

/// `skills/get`: the entry `skills/list` shows the caller under `uri`. A skill withheld or
/// hidden from the caller is answered as one that does not exist (MCP-89).
pub(super) fn skill(
    host: &dyn ToolHost,
    admitted: &Admitted,
    uri: &str,
) -> Result<GetSkillResult, ErrorData> {
    let Value::Object(mut list) = listed(host, admitted, Listed::Skills)? else {
        return Err(ErrorData::internal_error("internal error", None));
    };
    let entries = list.remove("skills").unwrap_or_default();
    let found = entries
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["uri"] == uri);
    let Some(entry) = found else {
        let data = serde_json::json!({ "uri": uri });
        return Err(ErrorData::invalid_params("skill not found", Some(data)));
    };
    let mut result = Map::new();
    result.insert("skill".to_owned(), entry.clone());
    from_value(complete_result(result))
}

pub(super) async fn complete(
    host: &dyn ToolHost,
    admitted: &Admitted,
    request: CompleteRequestParams,
) -> Result<CompleteResult, ErrorData> {
    if !host.offers(&admitted.scope).completions {
        return Err(not_declared("completion/complete"));
    }
    let params = to_map(&request)?;
    let done = host.complete(&admitted.scope, &admitted.caller, params);
    from_value(complete_result(done.await.map_err(to_error_data)?))
}

/// `result` as a final answer: `resultType: "complete"`, which 2026-07-28 requires and rmcp
/// strips for older revisions. An upstream's own `resultType` is not handed on: its input
/// requests reach the client only as `relayed_offer` relays them (MCP-81).
pub(super) fn complete_result(mut result: Map<String, Value>) -> Value {
    result.insert("resultType".into(), Value::String("complete".into()));
    Value::Object(result)
}

/// The request's params in their wire form, without the client's `_meta` (never forwarded).
pub(super) fn to_map<T: Serialize>(request: &T) -> Result<Map<String, Value>, ErrorData> {
    match serde_json::to_value(request) {
        Ok(Value::Object(mut map)) => {
            map.remove("_meta");
            Ok(map)
        }
        _ => Err(ErrorData::internal_error("internal error", None)),
    }
}

pub(super) fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, ErrorData> {
    serde_json::from_value(value).map_err(|e| {
        tracing::error!(%e, "MCP endpoint: an upstream's entry cannot be served");
        ErrorData::internal_error("internal error", None)
    })
}
