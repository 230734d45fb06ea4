//! The access policy on the one path (docs/rules.md POLICY-43 … POLICY-49): which tools a
//! caller sees, and whether its call is granted and under which approval.
//!
//! Guarantees: a caller authenticated by a token (the MCP endpoint, the run API and the runs
//! it starts) is held to `[[access]]`; the local CLI (`airlock call`, `airlock run`) acts as
//! the operator and is not. A refused call is recorded `denied` by the access policy in the
//! commit that records it, so it is never runnable, and the caller reads the reason.

use airlock_ledger::{Refusal, Refuser};
use airlock_spec::{AccessPolicy, Approval, Principal, ScopeId, Verdict};

use super::{CallContext, Gateway};

impl Gateway {
    /// The policy's verdict on `tool` for the caller of `ctx`.
    pub(super) fn verdict(&self, ctx: &CallContext, tool: &str) -> Verdict {
        verdict(
            &self.access,
            &ctx.scope,
            ctx.principal.as_deref(),
            ctx.groups.as_deref(),
            tool,
        )
    }

    /// Whether the caller `principal` with `groups` (`None`: the operator's CLI) may see
    /// `tool` of `scope`: what `tools/list` and a run's model are shown.
    #[must_use]
    pub fn may_see(
        &self,
        scope: &ScopeId,
        principal: Option<&str>,
        groups: Option<&[String]>,
        tool: &str,
    ) -> bool {
        verdict(&self.access, scope, principal, groups, tool) != Verdict::Refused
    }
}

fn verdict(
    access: &AccessPolicy,
    scope: &ScopeId,
    principal: Option<&str>,
    groups: Option<&[String]>,
    tool: &str,
) -> Verdict {
    match (principal, groups) {
        (Some(name), Some(groups)) => access.verdict(scope, Principal { name, groups }, tool),
        // Not a token's caller: the operator at the deployment, whom the policy does not bind.
        _ => Verdict::Granted { approval: None },
    }
}

/// What a refused caller reads, and what the row records as the denial's reason.
pub(super) fn refusal(ctx: &CallContext, tool: &str) -> Refusal {
    let who = ctx.principal.as_deref().unwrap_or_default();
    let reason = format!(
        "not permitted: no [[access]] rule grants `{tool}` in scope {} to principal {who}; nothing was run",
        ctx.scope
    );
    Refusal {
        by: Refuser::AccessPolicy,
        reason,
    }
}

/// The approval a granted call is recorded under: the policy's override, else the declared.
pub(super) fn approval(verdict: Verdict, declared: Approval) -> Approval {
    match verdict {
        Verdict::Granted {
            approval: Some(approval),
        } => approval,
        Verdict::Granted { approval: None } | Verdict::Refused => declared,
    }
}
