//! Who may decide a call and how many must approve it (docs/rules.md POLICY-61): its tool's
//! `approvers:`, applied on every surface before the ledger is asked.
//!
//! Guarantees: a decider not named in `deciders` (nor standing in for one by a delegation in
//! force, nor named by the call's escalation) decides nothing (a withdrawal by the caller
//! and a caller's recorded outcome are not decisions of a decider); with `forbid_self` the
//! call's own principal may not approve it; with a quorum above one an approval is a vote
//! ([`Invocations::vote`]): the call is approved by the vote that completes the quorum, in the
//! ledger, once, whatever the number of replicas. A call whose tool the surface cannot find
//! (no declarations, or a tool no longer declared) is decided by the plain rules.
//!
//! [`Invocations::vote`]: airlock_ledger::Invocations::vote

use airlock_ledger::{Decision, Invocation, InvocationId, LedgerError, Slots, Store};
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
    let mut also: Vec<String> = match &approvers.escalate {
        Some(e) if store.escalated(id).await? => e.to.clone(),
        _ => Vec::new(),
    };
    // Standing in for a decider who delegated their role (POLICY-64): as that decider — who
    // votes once, and whose own call it may not approve either.
    let mut voter = decider.to_owned();
    if !approvers.deciders.is_empty() && !approvers.deciders.iter().any(|d| d == decider) {
        let delegations = store.delegations_to(decider.to_owned()).await?;
        if let Some(d) = delegations
            .iter()
            .find(|d| approvers.deciders.contains(&d.from))
        {
            also.push(decider.to_owned());
            voter.clone_from(&d.from);
        }
    }
    let refused = refusal(&approvers, &also, principal.as_deref(), decider, decision)
        .or_else(|| refusal(&approvers, &also, principal.as_deref(), &voter, decision));
    if let Some(reason) = refused {
        return Err(LedgerError::DecisionRefused { id, reason });
    }
    let voted = approvers.quorum > 1 || !approvers.slots.is_empty();
    if voted && matches!(decision, Decision::Edit { .. }) {
        // One person's edit cannot stand for a quorum's approval of other arguments.
        return Err(LedgerError::DecisionRefused {
            id,
            reason: "its tool needs more than one approval, and an edit would stand for all of \
                     them: deny it, and have the call made again with the arguments it needs"
                .to_owned(),
        });
    }
    match decision {
        Decision::Approve if voted => {
            let slots = slots(&approvers, &voter);
            let voted = store.vote(id, &voter, approvers.quorum, slots).await?;
            Ok(voted.invocation)
        }
        _ => store.decide(id, decider, decision.clone()).await,
    }
}

/// The slots `voter` may fill (POLICY-65), for the ledger to choose among in the vote's own
/// transaction; `None` without slots.
fn slots(approvers: &Approvers, voter: &str) -> Option<Slots> {
    if approvers.slots.is_empty() {
        return None;
    }
    let mine = approvers
        .slots
        .iter()
        .filter(|s| s.deciders.iter().any(|d| d == voter))
        .map(|s| s.name.clone())
        .collect();
    Some(Slots {
        order: approvers.slots.iter().map(|s| s.name.clone()).collect(),
        mine,
        stages: approvers.stages,
    })
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
    also: &[String],
    principal: Option<&str>,
    decider: &str,
    decision: &Decision,
) -> Option<String> {
    // The caller's own acts are not a decider's: it may always withdraw or report.
    if matches!(decision, Decision::Withdraw | Decision::Record { .. }) {
        return None;
    }
    let named = |names: &[String]| names.iter().any(|d| d == decider);
    let in_a_slot = approvers.slots.iter().any(|s| named(&s.deciders));
    let listed = !approvers.deciders.is_empty() || !approvers.slots.is_empty();
    if listed && !named(&approvers.deciders) && !in_a_slot && !named(also) {
        return Some(format!(
            "{decider} is not one of this call's deciders ({})",
            approvers.deciders.join(", ")
        ));
    }
    let approves = matches!(decision, Decision::Approve | Decision::Edit { .. });
    if approvers.forbid_self && approves && principal == Some(decider) {
        return Some(format!(
            "{decider} made this call and may not approve it (`forbid_self`)"
        ));
    }
    None
}
