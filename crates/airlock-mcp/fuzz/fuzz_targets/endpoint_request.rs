//! Fuzzes the MCP endpoint's request admission (the body's one parse and the JSON-RPC checks,
//! docs/rules.md MCP-8) and checks the answer, not only the absence of panics:
//! - a body declared `application/json` that is not JSON is refused 400 with -32700 and id
//!   `null`; one that is JSON is either handed on or refused 400 with -32600 or -32602, the
//!   id echoed from the message;
//! - a refusal is always a JSON-RPC 2.0 error object sent as `application/json`;
//! - a body not declared JSON is never refused here (rmcp answers it later), and what is handed
//!   on is the parsed body's method, id and params.
//!
//! Input format: the `Content-Type` header's bytes, a newline, then the body.
#![no_main]

use airlock_mcp::fuzzing::{Answer, parse_request};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

fn declares_json(content_type: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(content_type) else {
        return false;
    };
    let essence = text.split(';').next().unwrap_or_default();
    // The endpoint reads the header as visible ASCII; any other byte (even a valid
    // `obs-text` one) leaves the body undeclared, for rmcp to refuse with 415.
    text.bytes()
        .all(|b| b == b'\t' || (0x20..0x7f).contains(&b))
        && essence.trim().eq_ignore_ascii_case("application/json")
}

fn check_refusal(status: u16, content_type: Option<&[u8]>, body: &[u8], parsed: Option<&Value>) {
    assert_eq!(status, 400);
    assert_eq!(content_type, Some(&b"application/json"[..]));
    let answer: Value = serde_json::from_slice(body).expect("the refusal is JSON");
    assert_eq!(answer["jsonrpc"], "2.0");
    let code = answer["error"]["code"].as_i64().expect("an error code");
    assert!(answer["error"]["message"].is_string());
    match parsed {
        None => {
            assert_eq!(code, -32700);
            assert_eq!(answer["id"], Value::Null);
        }
        Some(message) => {
            assert!(code == -32600 || code == -32602, "code {code}");
            assert_eq!(answer["id"], message["id"]);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let split = data.iter().position(|&b| b == b'\n').unwrap_or(data.len());
    let (content_type, body) = (&data[..split], &data[(split + 1).min(data.len())..]);
    let parsed = serde_json::from_slice::<Value>(body).ok();
    match parse_request(content_type, body) {
        Answer::Admitted { method, id, params } => {
            let message = parsed.unwrap_or(Value::Null);
            if declares_json(content_type) {
                assert!(message.is_object(), "a non-object handed on: {message}");
                assert_eq!(message["jsonrpc"], json!("2.0"));
            }
            assert_eq!(method, message["method"].as_str().unwrap_or_default());
            assert_eq!(id, message["id"]);
            assert_eq!(params, message["params"]);
        }
        Answer::Refused {
            status,
            content_type: answer_type,
            body: answer,
        } => {
            assert!(declares_json(content_type), "an undeclared body refused");
            check_refusal(status, answer_type.as_deref(), &answer, parsed.as_ref());
        }
    }
});
