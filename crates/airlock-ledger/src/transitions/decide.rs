//! Decisions by named people, and the transactional effect mode.
//!
//! A decision is one compare-and-swap from a parked state; the first decision stands and every
//! later one is refused with the first decider's name. Expiry is applied before deciding, so an
//! overdue row is expired (and stays expired) instead of approved.

use std::time::Duration;

use serde_json::json;

use crate::sql::tx::{LedgerTx, TxTool};
use crate::transitions::batch::Batch;
use crate::transitions::expiry::load_current;
use crate::transitions::lease::{CLAIM_FROM, claimed, finished};
use crate::transitions::runs::check_run_open;
use crate::vocabulary::error::{LedgerError, ToolError, ToolErrorKind};
use crate::vocabulary::ids::InvocationId;
use crate::vocabulary::model::{
    CallerOutcome, Decision, DecisionRecord, Invocation, ResolutionRecord,
};
use crate::vocabulary::state::{DecisionKind, InvocationState as S, Resolution};

const APPROVE_FROM: &[S] = &[S::AwaitingApproval, S::Proposed];
// A call waiting for its principal's credential may be denied or withdrawn (LEDGER-82).
const DENY_FROM: &[S] = &[
    S::AwaitingApproval,
    S::AwaitingAnswer,
    S::AwaitingCredential,
    S::Proposed,
];
const ANSWER_FROM: &[S] = &[S::AwaitingAnswer];
const RESOLVE_FROM: &[S] = &[S::InDoubt];
const RECORD_FROM: &[S] = &[S::Proposed];
const WITHDRAW_FROM: &[S] = &[
    S::AwaitingApproval,
    S::AwaitingAnswer,
    S::AwaitingCredential,
];

fn expected_for(decision: &Decision) -> &'static [S] {
    match decision {
        Decision::Approve | Decision::Edit { .. } => APPROVE_FROM,
        Decision::Deny { .. } => DENY_FROM,
        Decision::Answer { .. } => ANSWER_FROM,
        Decision::Resolve { .. } => RESOLVE_FROM,
        Decision::Record { .. } => RECORD_FROM,
        Decision::Withdraw => WITHDRAW_FROM,
    }
}

/// Why `decision` cannot apply to `inv` as it stands.
fn refuse(inv: &Invocation, decision: &Decision) -> LedgerError {
    if inv.state == S::Expired {
        return LedgerError::Expired {
            id: inv.id,
            expires_at: inv.expires_at.unwrap_or(inv.updated_at),
        };
    }
    let first = match decision {
        Decision::Resolve { .. } => inv
            .resolution
            .as_ref()
            .map(|r| (r.by.clone(), format!("resolved: {}", r.resolution))),
        _ => inv
            .decision
            .as_ref()
            .map(|d| (d.by.clone(), d.decision.to_string())),
    };
    match first {
        Some((by, decision)) => LedgerError::AlreadyDecided {
            id: inv.id,
            by,
            decision,
        },
        None => LedgerError::WrongState {
            id: inv.id,
            expected: expected_for(decision),
            actual: inv.state,
        },
    }
}

pub(crate) async fn decide(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    id: InvocationId,
    by: &str,
    decision: &Decision,
) -> Result<Invocation, LedgerError> {
    if let Some(problem) = decision.problem() {
        return Err(LedgerError::Invalid(problem.to_owned()));
    }
    let inv = load_current(tx, batch, id).await?;
    if !expected_for(decision).contains(&inv.state) {
        return Err(refuse(&inv, decision));
    }
    // A proposal outlives its run (AGENT-31): the run that made it may have ended any way.
    if inv.state != S::Proposed {
        check_run_open(tx, &inv).await?;
    }
    let mut next = inv.clone();
    let record = |kind, reason| DecisionRecord {
        by: by.to_owned(),
        decision: kind,
        reason,
        at: batch.now,
    };
    match decision {
        Decision::Approve => {
            next.state = S::Approved;
            next.decision = Some(record(DecisionKind::Approved, None));
        }
        // DECIDE-20: the proposed arguments stay as recorded (and hashed); these run.
        Decision::Edit { arguments } => {
            next.state = S::Approved;
            next.approved_arguments = Some(arguments.clone());
            next.decision = Some(record(DecisionKind::Edited, None));
        }
        Decision::Deny { reason } => {
            next.state = S::Denied;
            next.decision = Some(record(DecisionKind::Denied, Some(reason.clone())));
        }
        Decision::Withdraw => {
            next.state = S::Denied;
            next.decision = Some(record(DecisionKind::Withdrawn, None));
        }
        Decision::Answer { text } => {
            next.state = S::Succeeded;
            next.result = Some(json!({ "answer": text }));
            next.decision = Some(record(DecisionKind::Answered, Some(text.clone())));
        }
        Decision::Resolve { resolution, note } => {
            next.state = match resolution {
                Resolution::Ran => S::Resolved,
                Resolution::DidNotRun => S::Approved,
                // Never runs: nothing can claim an `abandoned` row (LEDGER-2).
                Resolution::Abandoned => S::Abandoned,
            };
            next.lease = None;
            next.resolution = Some(ResolutionRecord {
                by: by.to_owned(),
                resolution: *resolution,
                note: note.clone(),
                at: batch.now,
            });
        }
        // DECIDE-13: the caller's own outcome settles the proposal; airlock never runs it.
        Decision::Record { outcome } => {
            let reason = match outcome {
                CallerOutcome::Completed { result } => {
                    next.state = S::Succeeded;
                    next.result = Some(result.clone());
                    None
                }
                CallerOutcome::ToolError { message } => {
                    next.state = S::Failed;
                    next.error = Some(ToolError::new(ToolErrorKind::ToolFailed, message.clone()));
                    None
                }
                CallerOutcome::Rejected { reason } => {
                    next.state = S::Denied;
                    Some(reason.clone())
                }
            };
            next.decision = Some(record(DecisionKind::Recorded, reason));
        }
    }
    next.expires_at = None;
    batch
        .save_or(tx, &inv, next, |now| {
            // Still waiting, undecided: a vote or an escalation moved it on (LEDGER-76, 78),
            // not a decision — decided again from the row as it stands.
            if expected_for(decision).contains(&now.state) && now.decision.is_none() {
                LedgerError::Database(crate::support::deferred::lost_race())
            } else {
                refuse(now, decision)
            }
        })
        .await
}

/// A vote toward a quorum, as it stands after it was counted.
#[derive(Debug, Clone, PartialEq)]
pub struct Voted {
    /// The row: still waiting, or approved by the vote that completed its quorum.
    pub invocation: Invocation,
    /// Who has approved it so far, in the order they voted.
    pub voters: Vec<String>,
}

/// One decider's approval of a call that needs `needed` distinct approvals (docs/rules.md
/// LEDGER-76). Each vote is a compare-and-swap of the row — a new version that leaves it
/// waiting, with its audit event — so concurrent votes on any replica are counted one after
/// another; the vote that completes the quorum makes it `approved`, its decision by every
/// voter. A decider votes once; a row no longer waiting is refused as a decision would be.
pub(crate) async fn vote(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    id: InvocationId,
    by: &str,
    needed: u32,
    slots: Option<&Slots>,
) -> Result<Voted, LedgerError> {
    let inv = load_current(tx, batch, id).await?;
    if !APPROVE_FROM.contains(&inv.state) {
        return Err(refuse(&inv, &Decision::Approve));
    }
    if inv.state != S::Proposed {
        check_run_open(tx, &inv).await?;
    }
    let votes = votes_in(tx, id).await?;
    if votes.iter().any(|(v, _)| v == by) {
        return Err(LedgerError::AlreadyDecided {
            id,
            by: by.to_owned(),
            decision: "voted to approve".to_owned(),
        });
    }
    // The slot is chosen here, from the votes as they stand in this transaction.
    let slot = match slots {
        Some(slots) => Some(
            slots
                .seat(&votes, by)
                .map_err(|reason| LedgerError::DecisionRefused { id, reason })?,
        ),
        None => None,
    };
    tx.inner
        .execute(
            "INSERT INTO approval_votes (invocation_id, voter, slot, at) VALUES ($1, $2, $3, $4)",
            &[
                id.to_string().into(),
                by.to_owned().into(),
                slot.clone().into(),
                crate::vocabulary::clock::to_micros(batch.now).into(),
            ],
        )
        .await?;
    let mut voters: Vec<String> = votes.into_iter().map(|(v, _)| v).collect();
    voters.push(by.to_owned());
    let mut next = inv.clone();
    if voters.len() >= usize::try_from(needed).unwrap_or(usize::MAX) {
        next.state = S::Approved;
        next.expires_at = None;
        next.decision = Some(DecisionRecord {
            by: voters.join(", "),
            decision: DecisionKind::Approved,
            reason: None,
            at: batch.now,
        });
    }
    match batch.save(tx, &inv, next).await? {
        Some(invocation) => Ok(Voted { invocation, voters }),
        // Another vote or decision moved the row meanwhile: counted again from the start.
        None => Err(LedgerError::Database(crate::support::deferred::lost_race())),
    }
}

/// The roles a quorum needs filled by different people (POLICY-65), as a vote sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slots {
    /// Every slot's name, in order.
    pub order: Vec<String>,
    /// The slots this voter may fill.
    pub mine: Vec<String>,
    /// Filled in order: only the first open slot takes a vote.
    pub stages: bool,
}

impl Slots {
    /// The slot `by`'s vote fills, given the `votes` cast: the first open one they may fill
    /// (with `stages`, the first open one, which they must be able to fill); or why none.
    fn seat(&self, votes: &[(String, Option<String>)], by: &str) -> Result<String, String> {
        let filled = |name: &String| votes.iter().any(|(_, s)| s.as_ref() == Some(name));
        let mut open = self.order.iter().filter(|name| !filled(name));
        let found = if self.stages {
            open.next().filter(|name| self.mine.contains(name))
        } else {
            open.find(|name| self.mine.contains(name))
        };
        found.cloned().ok_or_else(|| {
            if self.stages {
                format!("{by} may not fill the stage this call waits for now")
            } else {
                format!("{by} fills none of this call's open slots")
            }
        })
    }
}

/// Who has voted to approve `id`, and the slot each filled, in the order they voted.
async fn votes_in(
    tx: &mut LedgerTx,
    id: InvocationId,
) -> Result<Vec<(String, Option<String>)>, LedgerError> {
    let rows = tx.inner.fetch_all(VOTES, &[id.to_string().into()]).await?;
    rows.iter().map(read_vote).collect()
}

/// The votes of a call (`$1`), in the order they were cast.
const VOTES: &str =
    "SELECT voter, slot FROM approval_votes WHERE invocation_id = $1 ORDER BY at, voter";

fn read_vote(row: &crate::sql::db::DbRow) -> Result<(String, Option<String>), LedgerError> {
    Ok((row.req_text("voter")?, row.text("slot")?))
}

/// The most rows one batch decision may name.
pub const MAX_BATCH_DECISION: usize = 100;

/// One decision on several rows (docs/rules.md DECIDE-19): every row is read and checked
/// before any is written, so all of them take `decision` in this transaction or none does,
/// and the first refusal names its row. A write that loses its compare-and-swap after another
/// row was written fails the whole transaction as a lost race, so nothing of it commits.
pub(crate) async fn decide_all(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    ids: &[InvocationId],
    by: &str,
    decision: &Decision,
) -> Result<Vec<Invocation>, LedgerError> {
    check_batch(ids, decision)?;
    for &id in ids {
        let inv = load_current(tx, batch, id).await?;
        if !expected_for(decision).contains(&inv.state) {
            return Err(refuse(&inv, decision));
        }
        if inv.state != S::Proposed {
            check_run_open(tx, &inv).await?;
        }
    }
    let mut decided = Vec::with_capacity(ids.len());
    for &id in ids {
        match decide(tx, batch, id, by, decision).await {
            Ok(row) => decided.push(row),
            Err(e) if decided.is_empty() => return Err(e),
            Err(_) => return Err(LedgerError::Database(crate::support::deferred::lost_race())),
        }
    }
    Ok(decided)
}

/// What a batch decision may be: an approval or a denial of 1 to [`MAX_BATCH_DECISION`]
/// distinct rows.
fn check_batch(ids: &[InvocationId], decision: &Decision) -> Result<(), LedgerError> {
    if !matches!(decision, Decision::Approve | Decision::Deny { .. }) {
        return Err(LedgerError::Invalid(
            "a batch decision approves or denies".to_owned(),
        ));
    }
    if let Some(problem) = decision.problem() {
        return Err(LedgerError::Invalid(problem.to_owned()));
    }
    if ids.is_empty() || ids.len() > MAX_BATCH_DECISION {
        return Err(LedgerError::Invalid(format!(
            "a batch decision names 1 to {MAX_BATCH_DECISION} calls, not {}",
            ids.len()
        )));
    }
    let distinct: std::collections::HashSet<_> = ids.iter().collect();
    if distinct.len() != ids.len() {
        return Err(LedgerError::Invalid(
            "a batch decision names each call once".to_owned(),
        ));
    }
    Ok(())
}

/// Claim, the tool's own writes, and the result, in one transaction (see [`crate::LedgerTx`]).
pub(crate) async fn run_transactional(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    id: InvocationId,
    owner: &str,
    tool: TxTool,
) -> Result<Invocation, LedgerError> {
    let inv = load_current(tx, batch, id).await?;
    if inv.source_kind != airlock_spec::SourceKind::Local {
        return Err(LedgerError::Invalid(format!(
            "tool {} is {}: only local tools can run in the ledger's transaction",
            inv.tool, inv.source_kind
        )));
    }
    let next = claimed(&inv, owner, Duration::from_secs(60), batch.now)?;
    let running = batch
        .save_or(tx, &inv, next, |now| LedgerError::WrongState {
            id,
            expected: CLAIM_FROM,
            actual: now.state,
        })
        .await?;
    tx.inner.execute("SAVEPOINT airlock_tool", &[]).await?;
    let outcome = tool(tx).await;
    // A failed tool leaves no writes behind; the row still commits, as `failed`.
    let end = if outcome.is_ok() {
        "RELEASE SAVEPOINT airlock_tool"
    } else {
        "ROLLBACK TO SAVEPOINT airlock_tool"
    };
    tx.inner.execute(end, &[]).await?;
    let done = finished(&running, outcome);
    batch
        .save_or(tx, &running, done, |now| LedgerError::Taken {
            id,
            state: now.state,
            holder: now.lease.as_ref().map(|l| l.owner.clone()),
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::Slots;

    fn slots(mine: &[&str], stages: bool) -> Slots {
        Slots {
            order: vec!["finance".into(), "legal".into()],
            mine: mine.iter().map(|s| (*s).to_owned()).collect(),
            stages,
        }
    }

    /// POLICY-65: a vote fills the first open slot its voter may fill; with stages, only the
    /// first open one; a voter who fits none is told why.
    #[test]
    fn a_vote_fills_the_first_open_slot_it_may() {
        let finance = vec![("bob".to_owned(), Some("finance".to_owned()))];
        let both = slots(&["finance", "legal"], false);
        assert_eq!(both.seat(&[], "bob").unwrap(), "finance");
        assert_eq!(both.seat(&finance, "carol").unwrap(), "legal");
        let legal_only = slots(&["legal"], true);
        assert!(legal_only.seat(&[], "carol").unwrap_err().contains("stage"));
        assert_eq!(legal_only.seat(&finance, "carol").unwrap(), "legal");
        let finance_only = slots(&["finance"], false);
        assert!(
            finance_only
                .seat(&finance, "alice")
                .unwrap_err()
                .contains("none")
        );
    }
}
