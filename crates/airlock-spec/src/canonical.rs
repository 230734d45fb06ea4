//! Canonical JSON: one byte string per JSON value, whatever the key order.
//!
//! Objects are written with keys sorted by their UTF-8 bytes, no whitespace, and numbers and
//! strings as `serde_json` writes them. Two values that are equal as JSON (ignoring key order)
//! always give the same bytes, so hashes over canonical JSON identify arguments and definitions.

use std::io::Write;

use serde::Serialize;
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

/// `sha256_hex(canonical_json(value))`, with the canonical JSON fed to the hash as it is
/// written instead of built first: a call's arguments may be megabytes, hashed on every call.
#[must_use]
pub fn canonical_sha256(value: &Value) -> String {
    let mut hasher = Sha256::new();
    write_value(value, &mut hasher);
    hex::encode(hasher.finalize())
}

/// `sha256_hex` of what `serde_json` writes for `value` (compact), fed to the hash as it is
/// written: no buffer of the whole text.
#[must_use]
pub fn json_sha256<T: Serialize + ?Sized>(value: &T) -> String {
    let mut hasher = Sha256::new();
    // Writing into a hasher cannot fail; a value that cannot serialize hashes what was written.
    let _ = serde_json::to_writer(&mut hasher, value);
    hex::encode(hasher.finalize())
}

/// Into one writer (a buffer or a hasher), with no string per key or scalar: arguments are
/// hashed on every call.
fn write_value<W: Write>(value: &Value, out: &mut W) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            put(out, b"{");
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    put(out, b",");
                }
                write_scalar(key, out);
                put(out, b":");
                write_value(item, out);
            }
            put(out, b"}");
        }
        Value::Array(items) => {
            put(out, b"[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    put(out, b",");
                }
                write_value(item, out);
            }
            put(out, b"]");
        }
        scalar => write_scalar(scalar, out),
    }
}

/// Writing into a `Vec` or a hasher cannot fail.
fn put<W: Write>(out: &mut W, bytes: &[u8]) {
    let _ = out.write_all(bytes);
}

fn write_scalar<T: Serialize + ?Sized, W: Write>(value: &T, out: &mut W) {
    // Writing a string, number, bool or null into a Vec or a hasher cannot fail; null is the
    // defensive fallback.
    if serde_json::to_writer(&mut *out, value).is_err() {
        put(out, b"null");
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

    /// The streamed hashes are the hashes of the built text.
    #[test]
    fn streamed_hashes_match_the_text() {
        let value = json!({"é": "\"x\"\n", "b": [1, {"z": null, "a": 2.5}], "a": "t"});
        assert_eq!(
            canonical_sha256(&value),
            sha256_hex(canonical_json(&value).as_bytes())
        );
        assert_eq!(
            json_sha256(&value),
            sha256_hex(&serde_json::to_vec(&value).unwrap())
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
