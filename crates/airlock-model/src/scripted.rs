//! The scripted model (`provider: scripted`, docs/rules.md MODEL-10 to MODEL-13): answers from
//! a script file read at load, with no network and no model. It is what the quickstart's
//! offline agent runs on, and what tests and benchmarks drive the loop with.
//!
//! Guarantees: stateless — turn N of a conversation is script entry N, where N is the number
//! of assistant messages already in the request, so a run resumed from the ledger gets the
//! same answers; tool call ids are `call_<N>_<i>`; a conversation longer than its script is a
//! clear error, never a made-up answer. Usage is always zero (nothing was spent).

use airlock_spec::{ModelScript, ScriptedConversation, ScriptedTurn};
use futures::future::BoxFuture;

use crate::{ChatRequest, Message, Model, ModelError, TokenSink, ToolCall, Turn, Usage};

/// A model that answers from a script.
#[derive(Debug)]
pub(crate) struct Scripted {
    pub(crate) script: ModelScript,
}

impl Model for Scripted {
    fn turn<'a>(
        &'a self,
        request: &'a ChatRequest,
        tokens: TokenSink<'a>,
    ) -> BoxFuture<'a, Result<Turn, ModelError>> {
        Box::pin(async move {
            let turn = self.answer(request)?;
            if !turn.text.is_empty() {
                tokens(&turn.text);
            }
            Ok(turn)
        })
    }
}

impl Scripted {
    fn answer(&self, request: &ChatRequest) -> Result<Turn, ModelError> {
        let conversation = self.conversation(request)?;
        let n = request
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let Some(entry) = conversation.turns.get(n) else {
            return Err(ModelError::configuration(format!(
                "the script {} has {} turn(s) for this conversation and the model was asked for turn {}",
                self.script.file.display(),
                conversation.turns.len(),
                n + 1
            )));
        };
        Ok(match entry {
            ScriptedTurn::Answer(text) => Turn {
                text: text.clone(),
                tool_calls: Vec::new(),
                usage: Usage::default(),
            },
            ScriptedTurn::Call { text, calls } => Turn {
                text: text.clone(),
                tool_calls: calls
                    .iter()
                    .enumerate()
                    .map(|(i, c)| ToolCall {
                        id: format!("call_{n}_{i}"),
                        name: c.tool.clone(),
                        arguments: c.arguments.clone(),
                    })
                    .collect(),
                usage: Usage::default(),
            },
        })
    }

    /// The conversation chosen by the run's input: its first user message.
    fn conversation(&self, request: &ChatRequest) -> Result<&ScriptedConversation, ModelError> {
        let input = request
            .messages
            .iter()
            .find_map(|m| match m {
                Message::User { text } => Some(text.as_str()),
                Message::Assistant { .. } | Message::ToolResults { .. } => None,
            })
            .unwrap_or_default();
        self.script.conversation_for(input).ok_or_else(|| {
            ModelError::configuration(format!(
                "no conversation of the script {} matches this input, and none is a fallback (without `when_input_contains`)",
                self.script.file.display()
            ))
        })
    }
}
