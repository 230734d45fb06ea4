//! The person at the MCP client settles the caller's own call (docs/rules.md MCP-46..MCP-49):
//! what they may be asked, and their answer recorded as the decision.
//!
//! Guarantees: only a call of a tool declared `approval: caller` waiting for approval, or an
//! `ask_human` question waiting for its answer, is offered to the person at the client. Their
//! answer is recorded under the caller's principal through [`Store::decide_once`], which
//! records the request state's use in the same commit that decides the call and, for an
//! approval, claims it — so of any number of uses of one state exactly one decides, and the
//! call then runs once, here, under the definition it was recorded for. A state used before is
//! a replay; a call someone else decided first is reported as it stands.
//!
//! [`Store::decide_once`]: airlock_ledger::Store::decide_once

use std::time::Duration;

use airlock_ledger::{Decision, InvocationState, LedgerError, StateUse};
use airlock_mcp::{
    Caller, CallerDecision, CallerPrompt, CallerRefusal, CallerUse, HostCall, HostError,
    ParkedStatus,
};
use airlock_spec::{Approval, Builtin, ScopeId, ToolSource};
use serde_json::Value;

use super::McpHost;
use super::internal;
use super::view::host_call;
use crate::gateway::EVENTS;
use crate::outcome::Outcome;

impl McpHost {
    pub(super) fn mcp_caller_prompt(
        &self,
        scope: &ScopeId,
        tool: &str,
        status: ParkedStatus,
        arguments: &Value,
    ) -> Option<CallerPrompt> {
        let spec = self.gateway.scope(scope)?.get(tool)?;
        match (status, &spec.source) {
            (ParkedStatus::AwaitingAnswer, ToolSource::Builtin(Builtin::AskHuman)) => {
                let question = arguments["question"].as_str()?;
                Some(CallerPrompt::Answer {
                    question: question.to_owned(),
                })
            }
            // A tool that names its approvers (POLICY-61) is theirs to approve, not the caller's.
            (ParkedStatus::AwaitingApproval, _)
                if spec.policy.approval == Approval::Caller && spec.policy.approvers.is_plain() =>
            {
                Some(CallerPrompt::Confirm)
            }
            _ => None,
        }
    }

    pub(super) async fn mcp_decide_as_caller(
        &self,
        scope: &ScopeId,
        caller: &Caller,
        used: CallerUse,
    ) -> Result<HostCall, CallerRefusal> {
        let row = self.mcp_row(scope, caller, &used.invocation_id).await?;
        if row.tool != used.tool {
            let id = &used.invocation_id;
            return Err(
                HostError::NotFound(format!("invocation {id} is a call of another tool")).into(),
            );
        }
        // A call recorded for an approver (over an `approval` limit, POLICY-59) is not the
        // caller's to run, whatever state a client holds.
        let named = self
            .gateway
            .scope(scope)
            .and_then(|s| s.get(&row.tool))
            .is_some_and(|spec| !spec.policy.approvers.is_plain());
        // The caller's own decline, too, is a decision its tool's deciders take (POLICY-61).
        let approves = matches!(used.decision, CallerDecision::Approve);
        let declines = matches!(used.decision, CallerDecision::Decline { .. });
        if (approves && row.approval != Approval::Caller) || ((approves || declines) && named) {
            return Err(HostError::InvalidParams(format!(
                "invocation {} waits for an approver: it is over a limit, or its tool names its approvers",
                used.invocation_id
            ))
            .into());
        }
        let (what, decision) = match used.decision {
            CallerDecision::Approve => ("approve", Decision::Approve),
            CallerDecision::Decline { reason } => ("deny", Decision::Deny { reason }),
            CallerDecision::Answer { text } => ("answer", Decision::Answer { text }),
        };
        // A freeze holds decisions that would let the call run, here as on every surface.
        let frozen = crate::decisions::frozen(&self.gateway, row.id, &decision).await;
        if let Some(reason) = frozen.map_err(|e| internal(&e))? {
            return Err(HostError::InvalidParams(reason).into());
        }
        let state = StateUse {
            nonce: used.state_id,
            invocation: row.id,
            by: caller.principal.clone(),
            decision,
        };
        let claim = self.gateway.claim_in_decision(scope, &row.tool);
        let decided = match self.gateway.store().decide_once(state, claim).await {
            Ok(decided) => decided,
            Err(LedgerError::RequestStateUsed { .. }) => return Err(CallerRefusal::Replayed),
            // Decided, expired or moved on by someone else first: report what stands.
            Err(
                LedgerError::AlreadyDecided { .. }
                | LedgerError::WrongState { .. }
                | LedgerError::Expired { .. },
            ) => {
                let id = &used.invocation_id;
                return Ok(self.mcp_await(scope, caller, id, Duration::ZERO).await?);
            }
            Err(e) => return Err(internal(&e.into()).into()),
        };
        // The `decided` event every surface logs (OPS-11): who, what, never the answer's text.
        tracing::info!(
            target: EVENTS,
            id = %decided.id,
            tool = decided.tool,
            by = caller.principal,
            decision = what,
            state = decided.state.as_str(),
            surface = "mcp_input",
            "decided"
        );
        let outcome = match decided.state {
            InvocationState::Running => {
                self.gateway
                    .run_claimed_row(decided, &caller.downstream)
                    .await
            }
            InvocationState::Approved => self.gateway.continue_approved(decided.id).await,
            _ => Ok(Outcome::from_row(decided)),
        };
        Ok(host_call(&outcome.map_err(|e| internal(&e))?))
    }
}
