//! OpenAI-compatible chat completions (docs/rules.md MODEL-2): OpenAI, Ollama, vLLM, llama.cpp,
//! LiteLLM. `POST {endpoint}/chat/completions` with `stream: true` and usage included; text
//! deltas go to the token sink as they arrive, tool-call deltas are put together by index.
//!
//! Guarantees: a tool call's arguments are parsed once the stream ends (text that does not
//! parse is kept as a string for the loop to answer with a tool error); a stream that ends
//! before a finish reason or `[DONE]` is malformed, never a short answer.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use sse_stream::Sse;

use crate::trace::Reply;
use crate::wire::{self, Api, Decoder};
use crate::{ChatRequest, Message, ModelError, ModelErrorKind, TokenSink, ToolCall, Turn, Usage};

/// The default endpoint.
pub const DEFAULT_ENDPOINT: &str = "https://api.openai.com/v1";

/// The wire format of an OpenAI-compatible API.
#[derive(Debug)]
pub(crate) struct OpenAi;

impl Api for OpenAi {
    type Stream = Stream;
    const PROVIDER: &'static str = "openai";

    fn request_body(request: &ChatRequest) -> Value {
        request_body(request)
    }
}

/// The request body: the system prompt first, then the conversation, then the tools.
pub(crate) fn request_body(request: &ChatRequest) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.is_empty() {
        messages.push(json!({"role": "system", "content": request.system}));
    }
    for message in &request.messages {
        push_message(&mut messages, message);
    }
    let mut body = json!({
        "model": request.model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.input_schema
                }})
            })
            .collect();
    }
    if let Some(max) = request.max_tokens {
        body["max_tokens"] = json!(max);
    }
    body
}

fn push_message(out: &mut Vec<Value>, message: &Message) {
    match message {
        Message::User { text } => out.push(json!({"role": "user", "content": text})),
        Message::Assistant { text, tool_calls } => {
            let mut m = json!({"role": "assistant", "content": text});
            if !tool_calls.is_empty() {
                if text.is_empty() {
                    m["content"] = Value::Null;
                }
                m["tool_calls"] = tool_calls
                    .iter()
                    .map(|c| {
                        json!({"id": c.id, "type": "function", "function": {
                            "name": c.name, "arguments": arguments_text(&c.arguments)
                        }})
                    })
                    .collect();
            }
            out.push(m);
        }
        Message::ToolResults { results } => out.extend(
            results
                .iter()
                .map(|r| json!({"role": "tool", "tool_call_id": r.call_id, "content": r.content})),
        ),
    }
}

/// Arguments as the API carries them: JSON text (raw text that never parsed is sent back as
/// the model wrote it).
fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

/// A tool call being put together from its deltas.
#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// The decoder of a chat-completions stream.
#[derive(Debug, Default)]
pub(crate) struct Stream {
    text: String,
    calls: BTreeMap<u64, PartialCall>,
    usage: Usage,
    finished: bool,
    reply: Reply,
}

impl Decoder for Stream {
    fn event(&mut self, event: &Sse, sink: TokenSink<'_>) -> Result<(), ModelError> {
        if event.data.as_deref().map(str::trim) == Some("[DONE]") {
            self.finished = true;
            return Ok(());
        }
        let Some(chunk) = wire::event_json(event)? else {
            return Ok(());
        };
        if let Some(error) = chunk.get("error") {
            let message = wire::provider_message(error.to_string().as_bytes())
                .unwrap_or_else(|| "the provider reported an error in its stream".into());
            return Err(ModelError {
                kind: ModelErrorKind::Provider,
                status: None,
                message,
            });
        }
        if let Some(model) = chunk["model"].as_str() {
            self.reply.model = Some(model.to_owned());
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Usage {
                input_tokens: usage["prompt_tokens"].as_u64().unwrap_or(0),
                output_tokens: usage["completion_tokens"].as_u64().unwrap_or(0),
            };
        }
        for choice in chunk["choices"].as_array().into_iter().flatten() {
            self.choice(choice, sink)?;
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
        if !self.finished {
            return Err(ModelError::malformed(
                "the stream ended before the turn was complete",
            ));
        }
        let tool_calls = self
            .calls
            .into_iter()
            .map(|(index, c)| ToolCall {
                // Some compatible servers send no id; the loop needs one to pair the result.
                id: if c.id.is_empty() {
                    format!("call_{index}")
                } else {
                    c.id
                },
                name: c.name,
                arguments: wire::arguments(&c.arguments),
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
    fn choice(&mut self, choice: &Value, sink: TokenSink<'_>) -> Result<(), ModelError> {
        let delta = &choice["delta"];
        if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            sink(text);
            self.text.push_str(text);
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = call["index"]
                .as_u64()
                .ok_or_else(|| ModelError::malformed("a tool call delta has no index"))?;
            let partial = self.calls.entry(index).or_default();
            if let Some(id) = call["id"].as_str() {
                partial.id = id.to_owned();
            }
            if let Some(name) = call["function"]["name"].as_str() {
                partial.name.push_str(name);
            }
            if let Some(args) = call["function"]["arguments"].as_str() {
                partial.arguments.push_str(args);
            }
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            self.reply.finish_reasons.push(reason.to_owned());
            self.finished = true;
        }
        Ok(())
    }
}
