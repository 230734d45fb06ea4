//! Response handling for api tools: parsing, status kinds, caps and `response.select`.

use std::time::Duration;

use airlock_runtime::ToolErrorKind;
use airlock_runtime::api::{MAX_RESPONSE_BYTES, UpstreamResponse, handle_response};
use serde_json::json;

fn resp<'a>(status: u16, ct: Option<&'a str>, body: &'a [u8]) -> UpstreamResponse<'a> {
    UpstreamResponse {
        status,
        content_type: ct,
        retry_after: None,
        body,
    }
}

#[test]
fn json_and_text() {
    let v = handle_response(
        &resp(200, Some("application/json; charset=utf-8"), br#"{"a":1}"#),
        None,
    )
    .unwrap();
    assert_eq!(v, json!({"a": 1}));
    let v = handle_response(&resp(200, Some("application/problem+json"), b"[1]"), None).unwrap();
    assert_eq!(v, json!([1]));
    let v = handle_response(&resp(200, Some("text/plain"), br#"{"a":1}"#), None).unwrap();
    assert_eq!(v, json!(r#"{"a":1}"#), "declared text stays text");
    let v = handle_response(&resp(200, None, br#"{"a":1}"#), None).unwrap();
    assert_eq!(v, json!({"a": 1}), "undeclared JSON is parsed");
    let v = handle_response(&resp(200, None, b"hello"), None).unwrap();
    assert_eq!(v, json!("hello"));
    let v = handle_response(&resp(204, Some("application/json"), b""), None).unwrap();
    assert_eq!(v, json!(null));
}

#[test]
fn invalid_json_binary_and_oversize_are_errors() {
    let e = handle_response(&resp(200, Some("application/json"), b"{nope"), None).unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::BadResponse);
    let e = handle_response(&resp(200, Some("image/png"), b"\x89PNG"), None).unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::BadResponse);
    assert_eq!(e.message, "the response is not text");
    let e = handle_response(&resp(200, None, b"\xff\xfe\x00"), None).unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::BadResponse);
    let exact = vec![b'a'; MAX_RESPONSE_BYTES];
    assert!(handle_response(&resp(200, Some("text/plain"), &exact), None).is_ok());
    let over = vec![b'a'; MAX_RESPONSE_BYTES + 1];
    let e = handle_response(&resp(200, Some("text/plain"), &over), None).unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::BadResponse);
    assert!(e.message.contains("5242881 bytes"), "{}", e.message);
}

#[test]
fn redirects_are_errors_naming_the_status() {
    let e = handle_response(&resp(302, Some("text/html"), b""), None).unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::BadResponse);
    assert!(e.message.starts_with("HTTP 302:"), "{}", e.message);
}

#[test]
fn error_kinds_per_status() {
    let cases = [
        (400, ToolErrorKind::BadRequest),
        (401, ToolErrorKind::CredentialInvalid),
        (403, ToolErrorKind::CredentialInvalid),
        (404, ToolErrorKind::BadRequest),
        (408, ToolErrorKind::UpstreamError),
        (422, ToolErrorKind::BadRequest),
        (429, ToolErrorKind::RateLimited),
        (500, ToolErrorKind::UpstreamError),
        (503, ToolErrorKind::UpstreamError),
    ];
    for (status, kind) in cases {
        let e = handle_response(&resp(status, Some("text/plain"), b"nope"), None).unwrap_err();
        assert_eq!(e.kind, kind, "{status}");
        assert_eq!(e.message, format!("HTTP {status}: nope"));
    }
}

#[test]
fn error_body_is_cut_at_500_characters() {
    let body = "é".repeat(600);
    let e = handle_response(&resp(500, Some("text/plain"), body.as_bytes()), None).unwrap_err();
    assert_eq!(e.message, format!("HTTP 500: {}", "é".repeat(500)));
    let e = handle_response(
        &resp(500, Some("application/octet-stream"), b"\x00\x01"),
        None,
    )
    .unwrap_err();
    assert_eq!(e.message, "HTTP 500: (a body that is not text)");
}

#[test]
fn rate_limited_carries_retry_after() {
    let mut r = resp(429, Some("text/plain"), b"slow down");
    r.retry_after = Some("30");
    let e = handle_response(&r, None).unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::RateLimited);
    assert_eq!(e.retry_after, Some(Duration::from_secs(30)));
    assert_eq!(e.message, "HTTP 429: slow down");
    r.retry_after = Some("Wed, 21 Oct 2015 07:28:00 GMT");
    assert_eq!(handle_response(&r, None).unwrap_err().retry_after, None);
}

#[test]
fn select_walks_objects_and_arrays() {
    let body = br#"{"data": {"items": [{"id": 7}, {"id": 8}], "total": 2}}"#;
    let ok = |path: &str| handle_response(&resp(200, Some("application/json"), body), Some(path));
    assert_eq!(ok("data.total").unwrap(), json!(2));
    assert_eq!(ok("data.items.1.id").unwrap(), json!(8));
    assert_eq!(ok("data.items").unwrap(), json!([{"id": 7}, {"id": 8}]));
    let e = ok("data.items.5.id").unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::BadResponse);
    assert_eq!(
        e.message,
        "`response.select` is `data.items.5.id`, but segment `5` is missing: `data.items` is an array of 2 items"
    );
    let e = ok("data.nope").unwrap_err();
    assert!(
        e.message
            .contains("segment `nope` is missing: `data` is an object"),
        "{}",
        e.message
    );
    let e = ok("data.total.x").unwrap_err();
    assert!(
        e.message.contains("`data.total` is a number"),
        "{}",
        e.message
    );
    let e = handle_response(&resp(200, Some("text/plain"), b"hi"), Some("a")).unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::BadResponse);
}
