//! Who may decide a call and how many must approve it (docs/rules.md POLICY-61): its tool's
//! `approvers:`, applied on every surface before the ledger is asked.
//!
//! Guarantees: a decider not named in `deciders` decides nothing (a withdrawal by the caller
//! and a caller's recorded outcome are not decisions of a decider); with `forbid_self` the
//! call's own principal may not approve it; with a quorum above one an approval is a vote
//! ([`Invocations::vote`]): the call is approved by the vote that completes the quorum, in the
//! ledger, once, whatever the number of replicas. A call whose tool the surface cannot find
//! (no declarations, or a tool no longer declared) is decided by the plain rules.
//!
//! [`Invocations::vote`]: airlock_ledger::Invocations::vote

use airlock_ledger::{Decision, Invocation, InvocationId, LedgerError, Store};
use airlock_spec::Approvers;

use super::Judged;

/// Takes `decision` on `id` by `decider` under its tool's approvers.
pub(super) async fn take(
    store: &dyn Store,
    id: InvocationId,
    decider: &str,
    decision: &Decision,
    judged: &Judged<'_>,
) -> Result<Invocation, LedgerError> {
    let Some((approvers, principal)) = of(store, id, judged).await? else {
        return store.decide(id, decider, decision.clone()).await;
    };
    // Escalated (POLICY-63): its `to` may decide too.
    let escalated_to = match &approvers.escalate {
        Some(e) if store.escalated(id).await? => e.to.as_slice(),
        _ => &[],
    };
    if let Some(reason) = refusal(
        &approvers,
        escalated_to,
        principal.as_deref(),
        decider,
        decision,
    ) {
        return Err(LedgerError::DecisionRefused { id, reason });
    }
    match decision {
        Decision::Approve if approvers.quorum > 1 => {
            Ok(store.vote(id, decider, approvers.quorum).await?.invocation)
        }
        _ => store.decide(id, decider, decision.clone()).await,
    }
}

/// A batch decision (DECIDE-19) or a grant (POLICY-62) is refused for a call whose tool names
/// its approvers: one person's act cannot stand for them.
pub(super) async fn refuse_in_batch(
    store: &dyn Store,
    id: InvocationId,
    judged: &Judged<'_>,
) -> Result<(), LedgerError> {
    match of(store, id, judged).await? {
        Some((approvers, _)) if !approvers.is_plain() => Err(LedgerError::DecisionRefused {
            id,
            reason:
                "its tool names its approvers (`approvers:`): decide it on its own, without a grant"
                    .to_owned(),
        }),
        _ => Ok(()),
    }
}

/// The approvers of `id`'s tool and the call's principal, when the tool's declaration names
/// any beyond the plain rule.
async fn of(
    store: &dyn Store,
    id: InvocationId,
    judged: &Judged<'_>,
) -> Result<Option<(Approvers, Option<String>)>, LedgerError> {
    let row = store.get(id).await?;
    let opened = store.get_session(row.session_id).await?;
    let Some(scope) = crate::session::scope(&opened) else {
        return Ok(None);
    };
    let approvers = judged
        .tool(&scope, &row.tool)
        .map(|spec| spec.policy.approvers.clone())
        .filter(|a| !a.is_plain());
    Ok(approvers.map(|a| (a, row.principal)))
}

/// Why `decider` may not take `decision` under `approvers` on a call of `principal`.
fn refusal(
    approvers: &Approvers,
    escalated_to: &[String],
    principal: Option<&str>,
    decider: &str,
    decision: &Decision,
) -> Option<String> {
    // The caller's own acts are not a decider's: it may always withdraw or report.
    if matches!(decision, Decision::Withdraw | Decision::Record { .. }) {
        return None;
    }
    let named = |names: &[String]| names.iter().any(|d| d == decider);
    if !approvers.deciders.is_empty() && !named(&approvers.deciders) && !named(escalated_to) {
        return Some(format!(
            "{decider} is not one of this call's deciders ({})",
            approvers.deciders.join(", ")
        ));
    }
    if approvers.forbid_self && matches!(decision, Decision::Approve) && principal == Some(decider)
    {
        return Some(format!(
            "{decider} made this call and may not approve it (`forbid_self`)"
        ));
    }
    None
}
