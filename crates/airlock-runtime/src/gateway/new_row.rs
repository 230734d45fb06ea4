//! The row a call is recorded as: its call, its tool's policy — or, for a call refused before
//! it is recorded (bad arguments, a proposal nobody receives), the policy that never parks it.

use airlock_ledger::{CallKind, NewInvocation, NewSession, RoundUse};
use airlock_spec::{Builtin, ToolSource, ToolSpec};
use serde_json::Value;

use super::CallContext;

/// What a call's record carries beside the call: the round it continues (LEDGER-62) and the
/// new session it opens (LEDGER-90).
#[derive(Default)]
pub(super) struct Carried {
    pub(super) follows: Option<RoundUse>,
    pub(super) opens: Option<NewSession>,
}

pub(super) fn new_invocation(
    ctx: &CallContext,
    spec: &ToolSpec,
    arguments: Value,
    digest: &str,
    invalid: bool,
) -> NewInvocation {
    let mut new = NewInvocation::new(
        ctx.session,
        ctx.call_id.clone(),
        spec.definition.name.as_str(),
        arguments,
        digest,
    );
    new.source_kind = spec.source.kind();
    new.effect = spec.policy.effect;
    new.principal = ctx.principal.clone();
    new.approval_ttl = spec.policy.approval_ttl;
    // No one person's grant stands for a tool's named approvers (LEDGER-77).
    new.grantable = spec.policy.approvers.is_plain();
    if !invalid {
        new.approval = spec.policy.approval;
        new.mode = spec.policy.mode;
        if matches!(spec.source, ToolSource::Builtin(Builtin::AskHuman)) {
            new.kind = CallKind::Question;
        }
    }
    new
}
