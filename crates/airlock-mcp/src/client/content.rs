//! Turns a `tools/call` result into airlock's [`ToolResult`] or a tool error.
//!
//! Guarantees: every content block is kept as the server sent it, in order (what an MCP client
//! of airlock is served back, docs/rules.md MCP-33); the model's text joins the text blocks in
//! order with newlines, image and audio blocks becoming `[image: image/png, 1234 bytes]`
//! placeholders (the bytes are never handed to a model) and resources `[resource: uri]`
//! placeholders; `structuredContent` is kept as sent. Works on the result's JSON form, so a new
//! rmcp content type cannot break a call.

use serde_json::Value;

use crate::client::target::ToolResult;
use crate::error::{CallErrorKind, McpCallError};

/// Converts a result (as JSON) into a tool result, or a tool error when `isError` is true.
pub(crate) fn to_tool_result(
    result: &Value,
    relays_round: bool,
) -> Result<ToolResult, McpCallError> {
    if result.get("resultType").and_then(Value::as_str) == Some("input_required") {
        return input_required(result, relays_round);
    }
    let content = result
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let text = content
        .iter()
        .map(block_text)
        .collect::<Vec<_>>()
        .join("\n");
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let message = if text.is_empty() {
            "the tool reported an error without a message".to_owned()
        } else {
            text
        };
        return Err(McpCallError::new(CallErrorKind::ToolError, message));
    }
    Ok(ToolResult {
        text,
        structured: result.get("structuredContent").cloned(),
        content,
        input_required: None,
    })
}

/// An `input_required` answer (MCP-68): kept as `{"inputRequests", "requestState"}` for the
/// endpoint request the call relays a round of; without one nobody could answer it.
fn input_required(result: &Value, relays_round: bool) -> Result<ToolResult, McpCallError> {
    if !relays_round {
        return Err(McpCallError::new(
            CallErrorKind::ToolError,
            "the MCP server asked for the client's input (input_required), and this call has no client to answer it",
        ));
    }
    let requests = result.get("inputRequests").filter(|r| !r.is_null());
    let state = result.get("requestState").filter(|s| !s.is_null());
    let well_formed = requests.is_none_or(Value::is_object)
        && state.is_none_or(Value::is_string)
        && (requests.is_some() || state.is_some());
    if !well_formed {
        return Err(McpCallError::new(
            CallErrorKind::BadReply,
            "the MCP server's input_required answer has neither well-formed inputRequests nor a requestState",
        ));
    }
    Ok(ToolResult {
        text: String::new(),
        structured: None,
        content: Vec::new(),
        input_required: Some(serde_json::json!({
            "inputRequests": requests.cloned().unwrap_or_else(|| Value::Object(serde_json::Map::new())),
            "requestState": state.cloned(),
        })),
    })
}

/// What a model reads of one block: its text, or a placeholder naming what it is.
pub(crate) fn block_text(block: &Value) -> String {
    let str_of = |key: &str| block.get(key).and_then(Value::as_str);
    match str_of("type").unwrap_or_default() {
        "text" => str_of("text").unwrap_or_default().to_owned(),
        kind @ ("image" | "audio") => format!(
            "[{kind}: {}, {} bytes]",
            str_of("mimeType").unwrap_or("unknown type"),
            decoded_len(str_of("data").unwrap_or_default())
        ),
        "resource" => {
            let uri = block
                .pointer("/resource/uri")
                .and_then(Value::as_str)
                .unwrap_or("unknown");
            format!("[resource: {uri}]")
        }
        "resource_link" => format!("[resource link: {}]", str_of("uri").unwrap_or("unknown")),
        other => format!(
            "[{} content]",
            if other.is_empty() { "unknown" } else { other }
        ),
    }
}

/// The decoded size of a base64 payload, without decoding it.
fn decoded_len(data: &str) -> usize {
    let data = data.trim_end();
    let padding = data.bytes().rev().take_while(|&b| b == b'=').count().min(2);
    (data.len() / 4 * 3 + (data.len() % 4).saturating_sub(1)).saturating_sub(padding)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn text_is_joined_and_media_become_placeholders_and_blocks_are_kept() {
        let result = json!({"content": [
            {"type": "text", "text": "a"},
            {"type": "image", "mimeType": "image/png", "data": "AAAA"},
            {"type": "audio", "mimeType": "audio/wav", "data": "AAA="},
            {"type": "resource", "resource": {"uri": "file:///x", "text": "t"}},
            {"type": "resource_link", "uri": "file:///y", "name": "y"},
            {"type": "text", "text": "b"}
        ], "structuredContent": {"n": 1}});
        let out = to_tool_result(&result, false).unwrap();
        assert_eq!(
            out.text,
            "a\n[image: image/png, 3 bytes]\n[audio: audio/wav, 2 bytes]\n[resource: file:///x]\n[resource link: file:///y]\nb"
        );
        assert_eq!(out.structured, Some(json!({"n": 1})));
        assert_eq!(Some(&Value::Array(out.content)), result.get("content"));
    }

    #[test]
    fn is_error_becomes_a_tool_error_with_its_text() {
        let err = to_tool_result(
            &json!({"content": [{"type": "text", "text": "nope"}], "isError": true}),
            false,
        )
        .unwrap_err();
        assert_eq!(err.kind, CallErrorKind::ToolError);
        assert_eq!(err.message, "nope");
    }

    #[test]
    fn base64_lengths() {
        assert_eq!(decoded_len(""), 0);
        assert_eq!(decoded_len("AA=="), 1);
        assert_eq!(decoded_len("AAA="), 2);
        assert_eq!(decoded_len("AAAAAA=="), 4);
        assert_eq!(decoded_len("AAAAAA"), 4);
    }
}
