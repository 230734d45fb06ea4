//! Anthropic Messages (docs/rules.md MODEL-2): `POST {endpoint}/messages` with `x-api-key`,
//! `anthropic-version: 2023-06-01` and `stream: true`; text blocks go to the token sink as
//! they arrive, `tool_use` blocks are put together from their partial JSON.
//!
//! Guarantees: tool results travel as `tool_result` blocks of a user message, each with its
//! call's id and error flag; `max_tokens` is always sent (the API requires it; default 4096);
//! an `error` event is a provider error with the provider's message; a stream without
//! `message_stop` is malformed.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use sse_stream::Sse;

use crate::trace::Reply;
use crate::wire::{self, Api, Decoder};
use crate::{ChatRequest, Message, ModelError, ModelErrorKind, TokenSink, ToolCall, Turn, Usage};

/// The default endpoint.
pub const DEFAULT_ENDPOINT: &str = "https://api.anthropic.com/v1";
/// The API version sent in `anthropic-version`.
pub(crate) const API_VERSION: &str = "2023-06-01";
/// `max_tokens` when the request sets none.
pub(crate) const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The wire format of the Anthropic Messages API.
#[derive(Debug)]
pub(crate) struct Anthropic;

impl Api for Anthropic {
    type Stream = Stream;
    const PROVIDER: &'static str = "anthropic";

    fn request_body(request: &ChatRequest) -> Value {
        request_body(request)
    }
}

/// The request body.
pub(crate) fn request_body(request: &ChatRequest) -> Value {
    let messages: Vec<Value> = request.messages.iter().map(message).collect();
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        "messages": messages,
        "stream": true,
    });
    if !request.system.is_empty() {
        body["system"] = json!(request.system);
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
            .collect();
    }
    body
}

fn message(message: &Message) -> Value {
    match message {
        Message::User { text } => json!({"role": "user", "content": text}),
        Message::Assistant { text, tool_calls } => {
            let mut blocks = Vec::with_capacity(tool_calls.len() + 1);
            if !text.is_empty() || tool_calls.is_empty() {
                blocks.push(json!({"type": "text", "text": text}));
            }
            blocks.extend(tool_calls.iter().map(|c| {
                // The API takes an object; arguments that never parsed are sent as none.
                let input = if c.arguments.is_object() {
                    c.arguments.clone()
                } else {
                    json!({})
                };
                json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input})
            }));
            json!({"role": "assistant", "content": blocks})
        }
        Message::ToolResults { results } => {
            let blocks: Vec<Value> = results
                .iter()
                .map(|r| {
                    json!({"type": "tool_result", "tool_use_id": r.call_id,
                           "content": r.content, "is_error": r.is_error})
                })
                .collect();
            json!({"role": "user", "content": blocks})
        }
    }
}

/// A content block being put together.
#[derive(Debug)]
enum Block {
    Text,
    ToolUse {
        id: String,
        name: String,
        json: String,
    },
    /// A block type this adapter does not use (thinking, …): skipped.
    Other,
}

/// The decoder of a Messages stream.
#[derive(Debug, Default)]
pub(crate) struct Stream {
    text: String,
    blocks: BTreeMap<u64, Block>,
    usage: Usage,
    stopped: bool,
    reply: Reply,
}

impl Decoder for Stream {
    fn event(&mut self, event: &Sse, sink: TokenSink<'_>) -> Result<(), ModelError> {
        let Some(data) = wire::event_json(event)? else {
            return Ok(());
        };
        match data["type"].as_str().unwrap_or_default() {
            "message_start" => {
                if let Some(model) = data["message"]["model"].as_str() {
                    self.reply.model = Some(model.to_owned());
                }
                let usage = &data["message"]["usage"];
                self.usage.input_tokens = usage["input_tokens"].as_u64().unwrap_or(0);
                self.usage.output_tokens = usage["output_tokens"].as_u64().unwrap_or(0);
            }
            "content_block_start" => self.start(&data)?,
            "content_block_delta" => self.delta(&data, sink)?,
            "message_delta" => {
                if let Some(reason) = data["delta"]["stop_reason"].as_str() {
                    self.reply.finish_reasons.push(reason.to_owned());
                }
                if let Some(out) = data["usage"]["output_tokens"].as_u64() {
                    // Cumulative: the last value is the turn's.
                    self.usage.output_tokens = out;
                }
            }
            "message_stop" => self.stopped = true,
            "error" => {
                let message = wire::provider_message(data.to_string().as_bytes())
                    .unwrap_or_else(|| "the provider reported an error in its stream".into());
                return Err(ModelError {
                    kind: ModelErrorKind::Provider,
                    status: None,
                    message,
                });
            }
            // `ping`, `content_block_stop` and event types added later carry nothing we read.
            _ => {}
        }
        Ok(())
    }

    fn streamed(&self) -> bool {
        !self.text.is_empty()
    }

    fn reply(&self) -> &Reply {
        &self.reply
    }

    fn finish(self) -> Result<Turn, ModelError> {
        if !self.stopped {
            return Err(ModelError::malformed(
                "the stream ended before the turn was complete",
            ));
        }
        let tool_calls = self
            .blocks
            .into_values()
            .filter_map(|b| match b {
                Block::ToolUse { id, name, json } => Some(ToolCall {
                    id,
                    name,
                    arguments: wire::arguments(&json),
                }),
                Block::Text | Block::Other => None,
            })
            .collect();
        Ok(Turn {
            text: self.text,
            tool_calls,
            usage: self.usage,
        })
    }
}

impl Stream {
    fn index(data: &Value) -> Result<u64, ModelError> {
        data["index"]
            .as_u64()
            .ok_or_else(|| ModelError::malformed("a content block event has no index"))
    }

    fn start(&mut self, data: &Value) -> Result<(), ModelError> {
        let index = Self::index(data)?;
        let block = &data["content_block"];
        let block = match block["type"].as_str() {
            Some("text") => Block::Text,
            Some("tool_use") => Block::ToolUse {
                id: block["id"].as_str().unwrap_or_default().to_owned(),
                name: block["name"].as_str().unwrap_or_default().to_owned(),
                json: String::new(),
            },
            _ => Block::Other,
        };
        self.blocks.insert(index, block);
        Ok(())
    }

    fn delta(&mut self, data: &Value, sink: TokenSink<'_>) -> Result<(), ModelError> {
        let index = Self::index(data)?;
        let delta = &data["delta"];
        match (self.blocks.get_mut(&index), delta["type"].as_str()) {
            (Some(Block::Text), Some("text_delta")) => {
                let text = delta["text"].as_str().unwrap_or_default();
                if !text.is_empty() {
                    sink(text);
                    self.text.push_str(text);
                }
                Ok(())
            }
            (Some(Block::ToolUse { json, .. }), Some("input_json_delta")) => {
                json.push_str(delta["partial_json"].as_str().unwrap_or_default());
                Ok(())
            }
            (None, _) => Err(ModelError::malformed(
                "a content block delta came before its block started",
            )),
            (Some(_), Some("text_delta" | "input_json_delta")) => Err(ModelError::malformed(
                "a content block delta does not match its block",
            )),
            // Deltas of kinds this adapter does not read (thinking, signatures, citations).
            (Some(_), _) => Ok(()),
        }
    }
}
