//! The request path: placeholder values encoded and checked, then joined structurally onto the
//! connection's base URL.
//!
//! Guarantees (docs/rules.md EGRESS-5, DECL-21, DECL-22):
//! - a placeholder value is percent-encoded with no safe characters (only `A-Za-z0-9-._~` stay);
//! - a value containing `/` or `\` is refused unless the parameter is in `allow_slashes` (then
//!   each segment is encoded and `/` kept); `..` is refused in the raw, once-decoded and
//!   twice-decoded value, because an upstream or a proxy may decode once or twice more;
//! - the declared path must start with exactly one `/`; it is appended to the base URL's own
//!   path with the URL type's path setter, never by string concatenation or `Url::join`, and the
//!   result must keep the base URL's origin and be exactly the path asked for (no dot-segment
//!   or other rewriting by the parser).

use std::borrow::Cow;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use serde_json::{Map, Value};
use url::Url;

use super::template::{Piece, argument, pieces, to_text};
use crate::ToolError;

/// Everything but the unreserved characters of RFC 3986.
const VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Literal text of the declared path: what the URL parser would encode in a path anyway (and
/// `\`, which it reads as `/`), so that the join can demand an exact match. `%` is not in the
/// set: an escape written in the declaration stays one escape.
const LITERAL: &AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'^')
    .add(b'|')
    .add(b'\\');

/// Renders the declared path template into an encoded path.
pub(crate) fn render_path(
    template: &str,
    args: &Map<String, Value>,
    allow_slashes: &[String],
) -> Result<String, ToolError> {
    let mut out = String::with_capacity(template.len());
    for piece in pieces(template) {
        match piece {
            Piece::Text(text) => out.extend(utf8_percent_encode(text, LITERAL)),
            Piece::Placeholder(name) => {
                let value = argument(args, name).ok_or_else(|| {
                    ToolError::bad_arguments(format!(
                        "path parameter `{name}` is missing; it is needed to build the URL"
                    ))
                })?;
                let slashes = allow_slashes.iter().any(|s| s == name);
                out.push_str(&encode_value(name, &to_text(value), slashes)?);
            }
        }
    }
    Ok(out)
}

/// Checks and encodes one path value.
fn encode_value(name: &str, raw: &str, allow_slashes: bool) -> Result<String, ToolError> {
    let refuse = |why: &str| ToolError::bad_arguments(format!("path parameter `{name}` {why}"));
    if raw.is_empty() {
        return Err(refuse(
            "is empty; an empty value would address another resource",
        ));
    }
    let once = decode(raw);
    let twice = decode(&once);
    for form in [raw, &once, &twice] {
        if form.contains("..") {
            return Err(refuse(
                "contains `..` (also checked once and twice percent-decoded)",
            ));
        }
        if form.contains('\\') || (!allow_slashes && form.contains('/')) {
            return Err(refuse(
                "contains `/` or `\\` (also checked percent-decoded); only parameters listed in `allow_slashes` may contain `/`",
            ));
        }
    }
    let mut encoded = Vec::new();
    for segment in raw.split('/') {
        // `.` is unreserved and would stay as is, and the URL parser drops a `.` segment.
        if segment.is_empty() || segment == "." {
            return Err(refuse("has an empty or `.` segment between slashes"));
        }
        encoded.push(utf8_percent_encode(segment, VALUE).to_string());
    }
    Ok(encoded.join("/"))
}

fn decode(text: &str) -> String {
    match percent_decode_str(text).decode_utf8_lossy() {
        Cow::Borrowed(s) => s.to_owned(),
        Cow::Owned(s) => s,
    }
}

/// Parses a connection's base URL. Errors name the connection, never the URL, which could hold
/// userinfo.
pub(crate) fn parse_base(base_url: &str, connection: &str) -> Result<Url, ToolError> {
    let refuse = |why: &str| {
        ToolError::bad_declaration(format!("connection `{connection}`: the base URL {why}"))
    };
    let url = Url::parse(base_url).map_err(|_| refuse("does not parse"))?;
    if !matches!(url.scheme(), "http" | "https") || url.cannot_be_a_base() {
        return Err(refuse("must be an http or https URL"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(refuse(
            "must not contain userinfo; credentials go through `auth`",
        ));
    }
    if url.fragment().is_some() {
        return Err(refuse("must not contain a fragment"));
    }
    Ok(url)
}

/// Appends an encoded `path` to the base URL's own path, structurally.
pub(crate) fn join(base: &Url, path: &str) -> Result<Url, ToolError> {
    if !path.starts_with('/') || path.starts_with("//") {
        // Without exactly one leading `/`, `@other.com/x` concatenated onto the base would send
        // the call, and the credential, to another host.
        return Err(ToolError::bad_declaration(
            "the request path must start with exactly one `/`",
        ));
    }
    let wanted = format!("{}{path}", base.path().trim_end_matches('/'));
    let mut url = base.clone();
    url.set_path(&wanted);
    if url.path() != wanted {
        // The parser resolved a dot segment or re-encoded something: the request would not go
        // where the declaration says.
        return Err(ToolError::bad_declaration(
            "the request path would be rewritten by the URL parser (a `.` or `..` segment?)",
        ));
    }
    let same_origin = url.scheme() == base.scheme()
        && url.host() == base.host()
        && url.port_or_known_default() == base.port_or_known_default()
        && url.username() == base.username()
        && url.password() == base.password();
    if !same_origin {
        return Err(ToolError::bad_declaration(
            "joining the request path changed the host, scheme or port; refused",
        ));
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::ToolErrorKind;

    fn render(template: &str, args: Value, allow: &[&str]) -> Result<String, ToolError> {
        let Value::Object(args) = args else {
            unreachable!("test arguments are objects")
        };
        let allow: Vec<String> = allow.iter().map(|s| (*s).to_owned()).collect();
        render_path(template, &args, &allow)
    }

    #[test]
    fn values_are_encoded_with_no_safe_characters() {
        assert_eq!(
            render("/c/{id}", json!({"id": "a b?#&=+:@!$'()*,;é"}), &[]).unwrap(),
            "/c/a%20b%3F%23%26%3D%2B%3A%40%21%24%27%28%29%2A%2C%3B%C3%A9"
        );
        assert_eq!(
            render("/c/{id}", json!({"id": "A-z.0_9~"}), &[]).unwrap(),
            "/c/A-z.0_9~"
        );
        assert_eq!(
            render("/c/{id}", json!({"id": "50%"}), &[]).unwrap(),
            "/c/50%25"
        );
    }

    #[test]
    fn scalars_are_stringified() {
        assert_eq!(
            render("/{a}/{b}/{c}", json!({"a": true, "b": 7, "c": false}), &[]).unwrap(),
            "/true/7/false"
        );
    }

    #[test]
    fn slashes_and_dots() {
        for bad in [
            "a/b",
            "..",
            "a..b",
            "..%2F",
            "%2e%2e",
            "%252e%252e",
            "a%2Fb",
            "a%252Fb",
            "a\\b",
        ] {
            let e = render("/c/{id}", json!({"id": bad}), &[]).unwrap_err();
            assert_eq!(e.kind, ToolErrorKind::BadArguments, "{bad}");
        }
        assert_eq!(
            render("/f/{p}", json!({"p": "dir/sub file"}), &["p"]).unwrap(),
            "/f/dir/sub%20file"
        );
        for bad in [
            "dir/../x",
            "dir/%2e%2e/x",
            "/abs",
            "dir//x",
            "dir/./x",
            "dir/",
        ] {
            assert!(
                render("/f/{p}", json!({"p": bad}), &["p"]).is_err(),
                "{bad}"
            );
        }
        assert!(render("/c/{id}", json!({"id": "."}), &[]).is_err());
        assert!(render("/c/{id}", json!({"id": ""}), &[]).is_err());
    }

    #[test]
    fn missing_value_is_an_error() {
        let e = render("/c/{id}", json!({}), &[]).unwrap_err();
        assert_eq!(e.kind, ToolErrorKind::BadArguments);
        assert!(e.message.contains("`id`"));
    }

    #[test]
    fn join_is_structural() {
        let base = Url::parse("https://api.example.com/api/v1/").unwrap();
        assert_eq!(
            join(&base, "/x").unwrap().as_str(),
            "https://api.example.com/api/v1/x"
        );
        let base = Url::parse("https://api.example.com").unwrap();
        assert_eq!(
            join(&base, "/@other.com/x").unwrap().as_str(),
            "https://api.example.com/@other.com/x"
        );
        for bad in [
            "@other.com/x",
            "//other.com/x",
            "x",
            "",
            "/a/../b",
            "/a/%2e%2e/b",
            "/./a",
        ] {
            let e = join(&base, bad).unwrap_err();
            assert_eq!(e.kind, ToolErrorKind::BadDeclaration, "{bad}");
        }
    }

    #[test]
    fn base_url_errors_name_the_connection_only() {
        let e = parse_base("https://user:hunter2@api.example.com", "erp").unwrap_err();
        assert!(e.message.contains("`erp`"));
        assert!(!e.message.contains("hunter2"));
        assert!(parse_base("ftp://x.example.com", "erp").is_err());
        assert!(parse_base("not a url", "erp").is_err());
        assert!(parse_base("https://x.example.com/#f", "erp").is_err());
    }
}
