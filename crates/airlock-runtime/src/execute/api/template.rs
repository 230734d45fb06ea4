//! `{name}` placeholders in the declared path, query and body, and how argument values become
//! text or stay JSON.
//!
//! A placeholder is `{` + `[A-Za-z0-9_]+` + `}`, exactly as the spec crate recognizes it at load
//! time, so every placeholder the executor substitutes was checked against `parameters`. A JSON
//! `null` argument counts as absent: no shorthand parameter type admits `null`, and models send
//! `null` for optional arguments they mean to leave out.

use serde_json::{Map, Value};

/// One piece of a template string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Piece<'a> {
    /// Literal text, copied as is.
    Text(&'a str),
    /// `{name}`: replaced by the argument `name`.
    Placeholder(&'a str),
}

fn is_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Splits a template into literal text and placeholders.
pub(crate) fn pieces(template: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        let after = &rest[start + 1..];
        let Some(end) = after.find('}') else { break };
        let name = &after[..end];
        if start > 0 {
            out.push(Piece::Text(&rest[..start]));
        }
        if is_name(name) {
            out.push(Piece::Placeholder(name));
        } else {
            // Not a placeholder (the spec crate skips it the same way): keep the braces as text.
            out.push(Piece::Text(&rest[start..start + end + 2]));
        }
        rest = &after[end + 1..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    out
}

/// The name, when the whole template is exactly one placeholder (`"{limit}"`).
pub(crate) fn lone_placeholder(template: &str) -> Option<&str> {
    match pieces(template).as_slice() {
        [Piece::Placeholder(name)] => Some(name),
        _ => None,
    }
}

/// The argument `name`, if present and not `null`.
pub(crate) fn argument<'a>(args: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    args.get(name).filter(|v| !v.is_null())
}

/// An argument as text: strings as they are, booleans `true`/`false`, numbers, lists and
/// objects as compact JSON.
pub(crate) fn to_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Substitutes every placeholder with its argument's text; `None` if any argument is absent.
pub(crate) fn substitute(template: &str, args: &Map<String, Value>) -> Option<String> {
    let mut out = String::with_capacity(template.len());
    for piece in pieces(template) {
        match piece {
            Piece::Text(text) => out.push_str(text),
            Piece::Placeholder(name) => out.push_str(&to_text(argument(args, name)?)),
        }
    }
    Some(out)
}

/// Interpolates a JSON body template; `None` means "omit this value".
///
/// A lone placeholder keeps the argument's JSON type (`"{limit}"` with 25 → 25). A string with
/// an absent argument is omitted: its object key or list item is dropped, never sent as `null`,
/// because an upstream reads `null` as "clear this field".
pub(crate) fn interpolate(template: &Value, args: &Map<String, Value>) -> Option<Value> {
    match template {
        Value::String(s) => match lone_placeholder(s) {
            Some(name) => argument(args, name).cloned(),
            None => substitute(s, args).map(Value::String),
        },
        Value::Array(items) => Some(Value::Array(
            items.iter().filter_map(|v| interpolate(v, args)).collect(),
        )),
        Value::Object(map) => Some(Value::Object(
            map.iter()
                .filter_map(|(k, v)| interpolate(v, args).map(|v| (k.clone(), v)))
                .collect(),
        )),
        other => Some(other.clone()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn args(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!("test arguments are objects"),
        }
    }

    #[test]
    fn pieces_match_the_spec_crate() {
        assert_eq!(
            pieces("/a/{id}/b{x}"),
            vec![
                Piece::Text("/a/"),
                Piece::Placeholder("id"),
                Piece::Text("/b"),
                Piece::Placeholder("x")
            ]
        );
        assert_eq!(
            pieces("{a-b}{c}"),
            vec![Piece::Text("{a-b}"), Piece::Placeholder("c")]
        );
        assert_eq!(pieces("{open"), vec![Piece::Text("{open")]);
        assert_eq!(pieces(""), vec![]);
    }

    #[test]
    fn lone_placeholder_only_when_alone() {
        assert_eq!(lone_placeholder("{limit}"), Some("limit"));
        assert_eq!(lone_placeholder(" {limit}"), None);
        assert_eq!(lone_placeholder("{a}{b}"), None);
    }

    #[test]
    fn text_of_values() {
        assert_eq!(to_text(&json!(true)), "true");
        assert_eq!(to_text(&json!(false)), "false");
        assert_eq!(to_text(&json!(25)), "25");
        assert_eq!(to_text(&json!(2.5)), "2.5");
        assert_eq!(to_text(&json!("a b")), "a b");
    }

    #[test]
    fn null_is_absent() {
        let a = args(json!({"x": null}));
        assert_eq!(argument(&a, "x"), None);
        assert_eq!(substitute("v{x}", &a), None);
    }

    #[test]
    fn body_keeps_types_and_drops_absent_values() {
        let a = args(json!({"limit": 25, "flag": true, "name": "Ada"}));
        let body = json!({
            "limit": "{limit}", "flag": "{flag}", "greeting": "hi {name}",
            "gone": "{missing}", "list": ["{name}", "{missing}", 3], "fixed": null
        });
        assert_eq!(
            interpolate(&body, &a),
            Some(json!({
                "limit": 25, "flag": true, "greeting": "hi Ada",
                "list": ["Ada", 3], "fixed": null
            }))
        );
        assert_eq!(interpolate(&json!("{missing}"), &a), None);
    }
}
