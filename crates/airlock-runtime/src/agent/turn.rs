//! One model turn of a run (docs/rules.md AGENT-5, AGENT-11): the conversation rebuilt from the
//! stored steps, the request, the text streamed to the caller as `token` events, within the
//! run's remaining budget and its cancellation.

use std::time::Duration;

use airlock_model::{ChatRequest, Message, Model, Turn};

use super::Agents;
use super::ctx::{RunCtx, budget_spent};
use super::record::Detail;
use super::types::RunEvent;

/// What asking the model came to.
pub(super) enum Asked {
    /// Its turn.
    Turn(Turn),
    /// Why the run fails.
    Failed(String),
    /// The run was cancelled meanwhile.
    Cancelled,
}

/// Asks the model for the next turn of the conversation the stored steps make, streaming its
/// text to the caller, within the run's remaining budget.
/// The model is offered only the tools of the snapshot the run's caller may see (POLICY-47).
pub(super) async fn ask(
    agents: &Agents,
    ctx: &RunCtx<'_>,
    model: &dyn Model,
    remaining: Duration,
) -> Asked {
    let (principal, groups) = (
        ctx.detail.principal.as_deref(),
        ctx.detail.groups.as_deref(),
    );
    let mut tools = ctx.snapshot.tool_defs();
    tools.retain(|t| {
        agents
            .gateway()
            .may_see(&ctx.scope, principal, groups, &t.name)
    });
    let request = ChatRequest {
        model: ctx.agent.model.model.clone(),
        system: ctx.agent.system_prompt.clone(),
        messages: conversation(ctx),
        tools,
        max_tokens: None,
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let sink = move |text: &str| {
        let _ = tx.send(text.to_owned());
    };
    let turn = model.turn(&request, &sink);
    tokio::pin!(turn);
    let deadline = tokio::time::sleep(remaining);
    tokio::pin!(deadline);
    // Each pass forwards a piece of text or ends; the model's stream is finite.
    let result = loop {
        tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => return Asked::Cancelled,
            Some(text) = rx.recv() => ctx.emit(RunEvent::Token { text }).await,
            result = &mut turn => break result,
            () = &mut deadline => {
                return Asked::Failed(budget_spent(remaining + ctx.elapsed()));
            }
        }
    };
    while let Ok(text) = rx.try_recv() {
        ctx.emit(RunEvent::Token { text }).await;
    }
    match result {
        Ok(turn) => Asked::Turn(turn),
        Err(error) => {
            // The operator's log says why, with the provider's status (MODEL-14); the run's
            // report carries the same text.
            let status = error.status;
            tracing::warn!(run = %ctx.run, kind = %error.kind, status, %error, "the model's turn failed");
            Asked::Failed(format!("model: {error}"))
        }
    }
}

/// The conversation so far: the input, then each step's turn and results.
fn conversation(ctx: &RunCtx<'_>) -> Vec<Message> {
    let mut messages = vec![Message::User {
        text: input_text(&ctx.detail),
    }];
    for step in &ctx.steps {
        messages.push(Message::Assistant {
            text: step.turn.text.clone(),
            tool_calls: step.turn.tool_calls.clone(),
        });
        if let Some(results) = &step.results {
            messages.push(Message::ToolResults {
                results: results.clone(),
            });
        }
    }
    messages
}

fn input_text(detail: &Detail) -> String {
    match &detail.context {
        Some(context) => format!("{}\n\nContext (JSON): {context}", detail.input),
        None => detail.input.clone(),
    }
}
