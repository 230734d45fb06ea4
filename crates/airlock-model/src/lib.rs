//! The conversation interface between an agent's loop and a model provider (docs/rules.md
//! AGENT rules): one [`Model`] trait whose [`Model::turn`] sends the whole conversation so far and
//! returns the model's next turn — text, tool calls, usage — while streaming its text through a
//! callback. Every type here is serialisable, so a run can store its turns in the ledger and a
//! resumed run can replay them without asking the model again.
//!
//! Guarantees: a provider's credential never appears in a [`ModelError`]; a provider's own error
//! keeps its HTTP status and message, also where it is shown (MODEL-14); a provider's request
//! made under a traced context is a GenAI `chat {model}` span holding no message (OPS-81).
//!
//! [`connect`] turns a manifest's `spec.model` into a [`Model`]: OpenAI-compatible chat
//! completions, Anthropic Messages (both streamed through the egress guard, retried with
//! backoff), or a scripted model that answers from a file. The rules are MODEL-1 to MODEL-14
//! in docs/rules.md.

mod anthropic;
mod connect;
mod openai;
mod retry;
mod scripted;
mod trace;
mod wire;

pub use connect::{connect, connect_with};
pub use retry::{Retry, Sleep, TokioSleep};

/// The default endpoints of the HTTP providers.
pub mod endpoints {
    pub use crate::anthropic::DEFAULT_ENDPOINT as ANTHROPIC;
    pub use crate::openai::DEFAULT_ENDPOINT as OPENAI;
}

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One request for the model's next turn: the whole conversation so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The provider's model id.
    pub model: String,
    /// The system prompt.
    pub system: String,
    /// The conversation, oldest first.
    pub messages: Vec<Message>,
    /// The tools the model may call.
    pub tools: Vec<ToolDef>,
    /// The cap on the turn's output tokens, when the provider needs one.
    pub max_tokens: Option<u32>,
}

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    /// The model-visible name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of its arguments.
    pub input_schema: Value,
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// What the person (or the parent agent) said.
    User {
        /// The text.
        text: String,
    },
    /// A turn of the model.
    Assistant {
        /// Its text (may be empty when it only called tools).
        text: String,
        /// The tools it called, in its order.
        tool_calls: Vec<ToolCall>,
    },
    /// The results of the previous assistant turn's tool calls, one per call.
    ToolResults {
        /// The results, in the calls' order.
        results: Vec<ToolResult>,
    },
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id of the call (echoed back with its result).
    pub id: String,
    /// The tool's model-visible name.
    pub name: String,
    /// The arguments as the model wrote them (an object when they parsed; otherwise the raw text
    /// as a string, so the loop can answer with a clear tool error).
    pub arguments: Value,
}

/// The result of one tool call, as shown to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The [`ToolCall::id`] it answers.
    pub call_id: String,
    /// What the model reads.
    pub content: String,
    /// Whether the call failed.
    pub is_error: bool,
}

/// The model's turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// Its text.
    pub text: String,
    /// The tools it called (empty: the text is the answer).
    pub tool_calls: Vec<ToolCall>,
    /// Tokens spent on this turn.
    pub usage: Usage,
}

/// Tokens spent; summed over a run's turns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Self) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
    }
}

/// Why a turn failed. Shown as `kind: message`, and a provider's refusal with its status
/// (`provider answered 401: invalid x-api-key`, docs/rules.md MODEL-14): the status is what
/// tells an operator a wrong key from a quota or an outage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelError {
    /// The class of failure.
    pub kind: ModelErrorKind,
    /// The provider's HTTP status, when it answered with one.
    pub status: Option<u16>,
    /// The provider's message (or ours); never the credential.
    pub message: String,
}

impl ModelError {
    /// A [`ModelErrorKind::Configuration`] error.
    pub(crate) fn configuration(message: impl Into<String>) -> Self {
        Self {
            kind: ModelErrorKind::Configuration,
            status: None,
            message: message.into(),
        }
    }

    /// A [`ModelErrorKind::Malformed`] error.
    pub(crate) fn malformed(message: impl Into<String>) -> Self {
        Self {
            kind: ModelErrorKind::Malformed,
            status: None,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for ModelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.kind, self.status) {
            (ModelErrorKind::Provider, Some(status)) => {
                write!(f, "provider answered {status}: {}", self.message)
            }
            (kind, Some(status)) => write!(f, "{kind} ({status}): {}", self.message),
            (kind, None) => write!(f, "{kind}: {}", self.message),
        }
    }
}

impl std::error::Error for ModelError {}

/// Classes of [`ModelError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelErrorKind {
    /// The provider answered with an error status (after the retries).
    Provider,
    /// The egress guard refused the provider's address.
    Blocked,
    /// No connection could be made (after the retries).
    Unreachable,
    /// The provider did not answer within the deadline.
    Timeout,
    /// The provider's answer (or stream) could not be understood.
    Malformed,
    /// The manifest's model settings cannot be used (unknown provider, missing credential).
    Configuration,
}

impl std::fmt::Display for ModelErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Provider => "provider error",
            Self::Blocked => "blocked",
            Self::Unreachable => "unreachable",
            Self::Timeout => "timeout",
            Self::Malformed => "malformed answer",
            Self::Configuration => "configuration",
        })
    }
}

/// Receives the model's text as it streams, piece by piece.
pub type TokenSink<'a> = &'a (dyn Fn(&str) + Send + Sync);

/// A model provider.
pub trait Model: Send + Sync + std::fmt::Debug {
    /// Asks for the next turn of `request`'s conversation; streamed text goes to `tokens`
    /// before the turn returns (a provider that cannot stream sends the whole text once).
    fn turn<'a>(
        &'a self,
        request: &'a ChatRequest,
        tokens: TokenSink<'a>,
    ) -> BoxFuture<'a, Result<Turn, ModelError>>;
}
