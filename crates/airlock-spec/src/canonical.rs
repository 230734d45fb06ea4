//! Canonical JSON: one byte string per JSON value, whatever the key order.
//!
//! Objects are written with keys sorted by their UTF-8 bytes, no whitespace, and numbers and
//! strings as `serde_json` writes them. Two values that are equal as JSON (ignoring key order)
//! always give the same bytes, so hashes over canonical JSON identify arguments and definitions.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Writes `value` as canonical JSON (sorted keys, compact).
#[must_use]
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::new();
    write_value(value, &mut out);
    // serde_json writes UTF-8 only; the lossy path is never taken.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// SHA-256 of `bytes`, as 64 lowercase hex characters.
#[must_use]
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Into one buffer, with no string per key or scalar: arguments are hashed on every call.
fn write_value(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push(b'{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_scalar(key, out);
                out.push(b':');
                write_value(item, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(item, out);
            }
            out.push(b']');
        }
        scalar => write_scalar(scalar, out),
    }
}

fn write_scalar<T: serde::Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) {
    // Writing a string, number, bool or null into a Vec cannot fail; null is the defensive
    // fallback.
    if serde_json::to_writer(&mut *out, value).is_err() {
        out.extend_from_slice(b"null");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn escapes_numbers_and_byte_order_are_serde_jsons() {
        let value = json!({"é": "\"x\"\n", "c": 1e21, "k\u{1}": null, "b": -3, "a": 1.5});
        assert_eq!(
            canonical_json(&value),
            r#"{"a":1.5,"b":-3,"c":1e+21,"k\u0001":null,"é":"\"x\"\n"}"#
        );
    }

    #[test]
    fn key_order_does_not_matter() {
        let a = json!({"b": 1, "a": {"y": [1, 2], "x": "s"}});
        let b = json!({"a": {"x": "s", "y": [1, 2]}, "b": 1});
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_eq!(canonical_json(&a), r#"{"a":{"x":"s","y":[1,2]},"b":1}"#);
    }

    #[test]
    fn different_values_differ() {
        assert_ne!(
            canonical_json(&json!({"amount": 5})),
            canonical_json(&json!({"amount": 5000}))
        );
        assert_ne!(
            canonical_json(&json!([1, 2])),
            canonical_json(&json!([2, 1]))
        );
    }

    #[test]
    fn strings_are_escaped() {
        assert_eq!(canonical_json(&json!({"k\"": "a\nb"})), r#"{"k\"":"a\nb"}"#);
    }

    #[test]
    fn sha256_is_hex() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
