//! Input schemas: the `parameters` shorthand of api operations, and the limits every
//! schema must meet (docs/rules.md DECL-26: `type: object`, at most 8 levels deep, at most
//! 16 KiB; DECL-37: it compiles).
//!
//! [`compile_input_schema`] is the one compilation of an input schema: the load checks declared
//! schemas with it, and the runtime builds every argument check with it, so a schema that loads
//! is a schema the runtime can check calls against. It compiles without network or file access
//! (`jsonschema` default features are off): a `$ref` to a remote document fails to compile
//! instead of fetching anything.

use serde_json::{Map, Value, json};

use crate::diag::{Diag, child};
use crate::fields::Fields;
use crate::tree::{Node, Pos};

/// Deepest schema accepted; the root object is level 1.
pub const MAX_SCHEMA_DEPTH: usize = 8;
/// Largest schema accepted, as compact JSON, in bytes.
pub const MAX_SCHEMA_BYTES: usize = 16 * 1024;

const PARAM_TYPES: [&str; 6] = ["string", "integer", "number", "boolean", "array", "object"];
const PARAM_KEYS: [&str; 6] = [
    "type",
    "description",
    "required",
    "enum",
    "default",
    "items",
];

/// Builds the JSON Schema of an operation from its `parameters` mapping.
pub(crate) fn from_parameters(node: Option<&Node>, path: &str, d: &mut Diag) -> Value {
    let mut properties = Map::new();
    let mut required = Vec::new();
    let Some(node) = node else {
        return object_schema(properties, required);
    };
    let Some(params) = Fields::open_free(node, path, d).map(|f| f.entries()) else {
        return object_schema(properties, required);
    };
    for entry in params {
        let key_path = child(path, &entry.key);
        if let Some((schema, is_required)) = parameter(&entry.value, &key_path, d) {
            if is_required {
                required.push(Value::String(entry.key.clone()));
            }
            properties.insert(entry.key.clone(), schema);
        }
    }
    object_schema(properties, required)
}

fn object_schema(properties: Map<String, Value>, required: Vec<Value>) -> Value {
    let mut schema = json!({"type": "object"});
    schema["properties"] = Value::Object(properties);
    if !required.is_empty() {
        schema["required"] = Value::Array(required);
    }
    schema
}

fn parameter(node: &Node, path: &str, d: &mut Diag) -> Option<(Value, bool)> {
    let f = Fields::open(node, path, &PARAM_KEYS, d)?;
    let ty = f.req_str("type", d)?;
    if !PARAM_TYPES.contains(&ty.as_str()) {
        d.push(
            f.key_at("type"),
            &f.key("type"),
            format!(
                "`{ty}` is not a parameter type; use one of: {}",
                PARAM_TYPES.join(", ")
            ),
        );
        return None;
    }
    let mut schema = json!({"type": ty});
    if let Some(description) = f.opt_str("description", d) {
        schema["description"] = Value::String(description);
    }
    if let Some(node) = f.get("enum") {
        match node.to_json() {
            Value::Array(values) if !values.is_empty() => schema["enum"] = Value::Array(values),
            _ => d.push(
                f.key_at("enum"),
                &f.key("enum"),
                "expected a non-empty list of allowed values",
            ),
        }
    }
    if let Some(node) = f.get("default") {
        schema["default"] = node.to_json();
    }
    match (f.get("items"), ty.as_str()) {
        (Some(items), "array") => match items.to_json() {
            Value::Object(items) => schema["items"] = Value::Object(items),
            _ => d.push(
                f.key_at("items"),
                &f.key("items"),
                "expected a schema mapping such as `{type: string}`",
            ),
        },
        (Some(_), _) => d.push(
            f.key_at("items"),
            &f.key("items"),
            "`items` applies only to `type: array`",
        ),
        (None, _) => {}
    }
    let required = f.opt_bool("required", d).ok().flatten().unwrap_or(false);
    Some((schema, required))
}

/// Compiles `schema` for validating arguments.
///
/// # Errors
/// The validator's reason, with where in the schema it applies, when it does not compile.
pub fn compile_input_schema(schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::validator_for(schema).map_err(|e| {
        let at = e.instance_path().as_str();
        let at = if at.is_empty() { "/" } else { at };
        format!("the input schema does not compile (at {at}): {e}")
    })
}

/// Checks a declared input schema: `type: object`, depth and size limits, and that it compiles.
pub(crate) fn check_input_schema(schema: &Value, at: Pos, path: &str, d: &mut Diag) {
    if let Err(reason) = compile_input_schema(schema) {
        d.push(at, path, reason);
    }
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        d.push(at, path, "the input schema must have `type: object`");
    }
    let depth = depth(schema);
    if depth > MAX_SCHEMA_DEPTH {
        d.push(
            at,
            path,
            format!("the input schema is {depth} levels deep; the limit is {MAX_SCHEMA_DEPTH}"),
        );
    }
    let size = serde_json::to_string(schema).map_or(usize::MAX, |s| s.len());
    if size > MAX_SCHEMA_BYTES {
        d.push(
            at,
            path,
            format!(
                "the input schema is {size} bytes as compact JSON; the limit is {MAX_SCHEMA_BYTES}"
            ),
        );
    }
}

/// Nesting depth of objects and lists; a scalar is 0, `{}` is 1.
fn depth(value: &Value) -> usize {
    match value {
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A schema whose root object is level 1 and which reaches exactly `levels` levels.
    fn nested(levels: usize) -> Value {
        let mut schema = json!({"type": "string"});
        for _ in 1..levels {
            schema = json!({"type": "object", "x": schema});
        }
        if levels == 1 {
            json!({"type": "object"})
        } else {
            schema
        }
    }

    fn issues(schema: &Value) -> Vec<String> {
        let mut d = Diag::new(std::path::Path::new("f.yml"));
        check_input_schema(schema, Pos::default(), "input_schema", &mut d);
        d.into_issues().into_iter().map(|i| i.reason).collect()
    }

    #[test]
    fn depth_counts_the_root_as_one() {
        assert_eq!(depth(&nested(1)), 1);
        assert_eq!(depth(&nested(8)), 8);
        assert!(issues(&nested(8)).is_empty());
        assert_eq!(
            issues(&nested(9)),
            vec!["the input schema is 9 levels deep; the limit is 8"]
        );
    }

    #[test]
    fn size_limit_is_16_kib_inclusive() {
        let base = json!({"type": "object", "description": ""});
        let overhead = serde_json::to_string(&base).unwrap().len();
        let exact =
            json!({"type": "object", "description": "x".repeat(MAX_SCHEMA_BYTES - overhead)});
        assert!(issues(&exact).is_empty());
        let over =
            json!({"type": "object", "description": "x".repeat(MAX_SCHEMA_BYTES - overhead + 1)});
        assert_eq!(
            issues(&over),
            vec!["the input schema is 16385 bytes as compact JSON; the limit is 16384"]
        );
    }

    /// DECL-37: the validator's refusal is a load problem, not a call left unchecked.
    #[test]
    fn a_schema_the_validator_refuses_is_a_problem() {
        let bad_type =
            issues(&json!({"type": "object", "properties": {"a": {"type": "nonsense"}}}));
        assert_eq!(bad_type.len(), 1, "{bad_type:?}");
        assert!(
            bad_type[0].starts_with("the input schema does not compile (at /properties/a/type): "),
            "{bad_type:?}"
        );
        let bad_pattern = issues(
            &json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "(["}}}),
        );
        assert_eq!(bad_pattern.len(), 1, "{bad_pattern:?}");
        assert!(
            bad_pattern[0].contains("does not compile"),
            "{bad_pattern:?}"
        );
        let remote = issues(&json!({"type": "object", "$ref": "https://example.com/s.json"}));
        assert!(
            remote.iter().any(|r| r.contains("does not compile")),
            "{remote:?}"
        );
    }

    #[test]
    fn type_must_be_object() {
        assert_eq!(
            issues(&json!({"type": "string"})),
            vec!["the input schema must have `type: object`"]
        );
    }
}
