//! A client's answers to relayed elicitations, checked against what was asked (docs/rules.md
//! MCP-87) before they go upstream.
//!
//! Guarantees:
//! - What a round asked is kept sealed in its state ([`asked`]): the `requestedSchema` of each
//!   form-mode `elicitation/create` request, as relayed (rebuilt, MCP-73), under its key. The
//!   client cannot change it: the state is authenticated.
//! - [`check`] refuses, with -32602 naming the request's key and the field, a response to such
//!   a request whose `action` is not `accept`, `decline` or `cancel`, or that accepts with
//!   content not matching the schema: not an object, a required field missing, a value of
//!   another type, a string outside `minLength`/`maxLength` or not among its `enum`/`oneOf`
//!   values, a number outside `minimum`/`maximum`, a list of choices not among its items'
//!   values or outside `minItems`/`maxItems`. Nothing is recorded or sent upstream then, and
//!   the state stays unused: the client may answer again. A field the schema does not name is
//!   not judged (JSON Schema's default; the official conformance suite's own answers carry
//!   such fields).
//! - Responses to other requests (sampling, roots, URL-mode elicitations) and keys nobody
//!   asked go on as sent (MCP-70): the upstream judges those.
//! - A `tasks/update` (MCP-84) is checked the same way against what the upstream's task waits
//!   on when it arrives, there being no state to seal it in.

use rmcp::ErrorData;
use rmcp::model::InputRequests;
use serde_json::{Map, Value, json};

/// The `requestedSchema` of each form-mode elicitation among `requests`, by key.
pub(super) fn asked(requests: &InputRequests) -> Map<String, Value> {
    requests
        .iter()
        .filter_map(|(key, request)| {
            let request = serde_json::to_value(request).ok()?;
            if request["method"] != "elicitation/create" {
                return None;
            }
            let schema = request["params"].get("requestedSchema")?;
            Some((key.clone(), schema.clone()))
        })
        .collect()
}

/// Refuses the first response that does not answer its request as `schemas` asked.
///
/// # Errors
/// -32602 naming the response's key and the field at fault.
pub(super) fn check<'a>(
    schemas: &Map<String, Value>,
    responses: impl IntoIterator<Item = (&'a String, &'a Value)>,
) -> Result<(), ErrorData> {
    for (key, response) in responses {
        let Some(schema) = schemas.get(key) else {
            continue;
        };
        answer(schema, response).map_err(|mismatch| refused(key, mismatch))?;
    }
    Ok(())
}

/// What is wrong with one response: the field (`None`: the response itself) and why.
#[derive(Debug, PartialEq)]
struct Mismatch {
    field: Option<String>,
    why: String,
}

impl Mismatch {
    fn of_response(why: impl Into<String>) -> Self {
        Self {
            field: None,
            why: why.into(),
        }
    }
}

fn refused(key: &str, mismatch: Mismatch) -> ErrorData {
    let Mismatch { field, why } = mismatch;
    let place = match &field {
        Some(field) => format!("inputResponses.{key}.content.{field}"),
        None => format!("inputResponses.{key}"),
    };
    ErrorData::invalid_params(
        format!("{place}: {why}"),
        Some(json!({ "inputResponse": key, "field": field })),
    )
}

/// [`check`] for the `result` a client answered an `elicitation/create` sent on its call's
/// stream with (MCP-96): -32602 naming `result.content.<field>`.
pub(super) fn check_result(schema: &Value, result: &Value) -> Result<(), ErrorData> {
    answer(schema, result).map_err(|Mismatch { field, why }| {
        let place = match &field {
            Some(field) => format!("result.content.{field}"),
            None => "result".to_owned(),
        };
        ErrorData::invalid_params(format!("{place}: {why}"), Some(json!({ "field": field })))
    })
}

/// One elicitation result against the schema its request asked with.
fn answer(schema: &Value, response: &Value) -> Result<(), Mismatch> {
    let action = response.get("action").and_then(Value::as_str);
    match action {
        Some("accept") => {}
        Some("decline" | "cancel") => return Ok(()),
        _ => {
            return Err(Mismatch::of_response(
                "`action` must be `accept`, `decline` or `cancel`",
            ));
        }
    }
    let empty = Map::new();
    let content = match response.get("content") {
        None => &empty,
        Some(Value::Object(content)) => content,
        Some(_) => return Err(Mismatch::of_response("`content` must be an object")),
    };
    let properties = schema["properties"].as_object().unwrap_or(&empty);
    let required = schema["required"].as_array().map_or(&[][..], Vec::as_slice);
    let missing = required
        .iter()
        .filter_map(Value::as_str)
        .find(|name| !content.contains_key(*name));
    if let Some(name) = missing {
        return Err(at(name, "is required"));
    }
    for (name, value) in content {
        if let Some(property) = properties.get(name) {
            field(property, value).map_err(|why| at(name, why))?;
        }
    }
    Ok(())
}

fn at(field: &str, why: impl Into<String>) -> Mismatch {
    Mismatch {
        field: Some(field.to_owned()),
        why: why.into(),
    }
}

/// One value against its property's schema (MCP's primitive schemas).
fn field(schema: &Value, value: &Value) -> Result<(), String> {
    match schema["type"].as_str().unwrap_or_default() {
        "string" => {
            let text = value.as_str().ok_or("must be a string")?;
            string(schema, text)
        }
        "number" => number(schema, value.as_f64().ok_or("must be a number")?),
        "integer" => {
            let whole = value.as_f64().filter(|n| n.fract() == 0.0);
            number(schema, whole.ok_or("must be an integer")?)
        }
        "boolean" => value
            .is_boolean()
            .then_some(())
            .ok_or_else(|| "must be a boolean".into()),
        "array" => choices(schema, value.as_array().ok_or("must be a list")?),
        // The relay rebuilt the request from MCP's schemas: nothing else reaches a client.
        _ => Ok(()),
    }
}

fn string(schema: &Value, text: &str) -> Result<(), String> {
    let length = text.chars().count() as u64;
    if let Some(min) = schema["minLength"].as_u64().filter(|min| length < *min) {
        return Err(format!("must be at least {min} characters"));
    }
    if let Some(max) = schema["maxLength"].as_u64().filter(|max| length > *max) {
        return Err(format!("must be at most {max} characters"));
    }
    match allowed(schema) {
        Some(values) if !values.contains(&text) => Err(format!("must be one of {values:?}")),
        _ => Ok(()),
    }
}

/// The values a single choice may take: `enum`, or the `const` of each `oneOf`/`anyOf`.
fn allowed(schema: &Value) -> Option<Vec<&str>> {
    if let Some(values) = schema["enum"].as_array() {
        return Some(values.iter().filter_map(Value::as_str).collect());
    }
    let titled = schema["oneOf"].as_array().or(schema["anyOf"].as_array())?;
    Some(titled.iter().filter_map(|c| c["const"].as_str()).collect())
}

fn number(schema: &Value, n: f64) -> Result<(), String> {
    if let Some(min) = schema["minimum"].as_f64().filter(|min| n < *min) {
        return Err(format!("must be at least {min}"));
    }
    if let Some(max) = schema["maximum"].as_f64().filter(|max| n > *max) {
        return Err(format!("must be at most {max}"));
    }
    Ok(())
}

/// A multi-select answer: strings among its items' values, as many as allowed.
fn choices(schema: &Value, picked: &[Value]) -> Result<(), String> {
    let count = picked.len() as u64;
    if let Some(min) = schema["minItems"].as_u64().filter(|min| count < *min) {
        return Err(format!("must hold at least {min} choices"));
    }
    if let Some(max) = schema["maxItems"].as_u64().filter(|max| count > *max) {
        return Err(format!("must hold at most {max} choices"));
    }
    let values = allowed(&schema["items"]).unwrap_or_default();
    for choice in picked {
        match choice.as_str() {
            Some(text) if values.contains(&text) => {}
            _ => return Err(format!("must hold only choices among {values:?}")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 2, "maxLength": 5},
                "age": {"type": "integer", "minimum": 0, "maximum": 130},
                "score": {"type": "number", "maximum": 1.5},
                "ok": {"type": "boolean"},
                "size": {"type": "string", "enum": ["s", "m"]},
                "tier": {"type": "string", "oneOf": [{"const": "gold", "title": "Gold"}]},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]},
                    "minItems": 1, "maxItems": 2},
            },
            "required": ["name"],
        })
    }

    fn accept(content: Value) -> Value {
        let mut accepted = json!({"action": "accept"});
        accepted["content"] = content;
        accepted
    }

    /// The field a mismatch names, or `None` when the answer passes.
    fn fault(response: &Value) -> Option<Option<String>> {
        answer(&schema(), response).err().map(|m| m.field)
    }

    #[test]
    fn answers_as_asked_pass() {
        let full = json!({"name": "Alice", "age": 30, "score": 1.5, "ok": true, "size": "m",
            "tier": "gold", "tags": ["a", "b"]});
        assert_eq!(fault(&accept(full)), None);
        let unasked = json!({"name": "Al", "note": {"any": "thing"}});
        assert_eq!(
            fault(&accept(unasked)),
            None,
            "a field not asked is not judged"
        );
        assert_eq!(fault(&accept(json!({"name": "Al", "age": 30.0}))), None);
        assert_eq!(fault(&json!({"action": "decline"})), None);
        assert_eq!(fault(&json!({"action": "cancel", "content": 3})), None);
    }

    #[test]
    fn each_mismatch_names_its_field() {
        let name = |content: Value| fault(&accept(content));
        let field = |f: &str| Some(Some(f.to_owned()));
        assert_eq!(name(json!({})), field("name"), "required");
        assert_eq!(name(json!({"name": 7})), field("name"), "type");
        assert_eq!(name(json!({"name": "A"})), field("name"), "minLength");
        assert_eq!(
            name(json!({"name": "Alexander"})),
            field("name"),
            "maxLength"
        );
        assert_eq!(
            name(json!({"name": "Al", "age": 1.5})),
            field("age"),
            "integer"
        );
        assert_eq!(
            name(json!({"name": "Al", "age": -1})),
            field("age"),
            "minimum"
        );
        assert_eq!(
            name(json!({"name": "Al", "score": 2})),
            field("score"),
            "maximum"
        );
        assert_eq!(
            name(json!({"name": "Al", "score": "1"})),
            field("score"),
            "number"
        );
        assert_eq!(
            name(json!({"name": "Al", "ok": "yes"})),
            field("ok"),
            "boolean"
        );
        assert_eq!(
            name(json!({"name": "Al", "size": "xl"})),
            field("size"),
            "enum"
        );
        assert_eq!(
            name(json!({"name": "Al", "tier": "tin"})),
            field("tier"),
            "oneOf"
        );
        assert_eq!(
            name(json!({"name": "Al", "tags": []})),
            field("tags"),
            "minItems"
        );
        assert_eq!(
            name(json!({"name": "Al", "tags": ["a", "c"]})),
            field("tags"),
            "items"
        );
        assert_eq!(
            fault(&json!({"action": "accept", "content": []})),
            Some(None)
        );
        assert_eq!(fault(&json!({"action": "sure"})), Some(None));
    }

    #[test]
    fn a_refusal_is_invalid_params_naming_the_key_and_field() {
        let schemas = Map::from_iter([("user".to_owned(), schema())]);
        let bad = accept(json!({"name": "Al", "age": "old"}));
        let responses = Map::from_iter([("user".to_owned(), bad)]);
        let refused = check(&schemas, &responses).unwrap_err();
        assert_eq!(refused.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert!(
            refused
                .message
                .starts_with("inputResponses.user.content.age: "),
            "{}",
            refused.message
        );
        assert_eq!(
            refused.data,
            Some(json!({"inputResponse": "user", "field": "age"}))
        );
        let unasked = Map::from_iter([("other".to_owned(), json!(3))]);
        assert!(
            check(&schemas, &unasked).is_ok(),
            "an unasked key goes on as sent"
        );
    }
}
