//! The lease transitions of a call: claim (`pending | approved → running`), renew, and finish
//! (`running → succeeded | failed`, or `in_doubt` for an at-most-once call whose request went
//! unanswered, LEDGER-19).
//!
//! Each reads the row through the batch, checks the transition in Rust (so a refusal names
//! the states involved), and saves it with a compare-and-swap; a lost swap is re-read and
//! reported as what it is (taken, lease lost, already finished). A claim applies expiry first
//! and checks the arguments against their recorded hash, since an approval is bound to them.

use std::time::Duration;

use airlock_spec::{Effect, canonical_sha256};
use serde_json::Value;
use time::OffsetDateTime;

use crate::sql::tx::LedgerTx;
use crate::transitions::batch::Batch;
use crate::transitions::expiry::load_current;
use crate::vocabulary::credential::CredentialUse;
use crate::vocabulary::error::{LedgerError, ToolError};
use crate::vocabulary::ids::InvocationId;
use crate::vocabulary::model::{INPUT_REQUIRED_KEY, Invocation, Lease};
use crate::vocabulary::state::InvocationState as S;

pub(crate) const CLAIM_FROM: &[S] = &[S::Pending, S::Approved];
pub(crate) const FINISH_FROM: &[S] = &[S::Running];

/// SHA-256 of the canonical JSON of `arguments`.
pub(crate) fn arguments_hash(arguments: &Value) -> String {
    canonical_sha256(arguments)
}

fn taken(inv: &Invocation) -> LedgerError {
    match inv.state {
        S::Running | S::Succeeded | S::Failed | S::InDoubt | S::Resolved | S::Abandoned => {
            LedgerError::Taken {
                id: inv.id,
                state: inv.state,
                holder: inv.lease.as_ref().map(|l| l.owner.clone()),
            }
        }
        _ => LedgerError::WrongState {
            id: inv.id,
            expected: CLAIM_FROM,
            actual: inv.state,
        },
    }
}

/// The claimable row moved to `running` under `owner`'s lease (not yet saved).
pub(crate) fn claimed(
    inv: &Invocation,
    owner: &str,
    lease: Duration,
    now: OffsetDateTime,
) -> Result<Invocation, LedgerError> {
    if !CLAIM_FROM.contains(&inv.state) {
        return Err(taken(inv));
    }
    // The relay's name marks a row that runs as its upstream's task; no process may hold it.
    if owner == crate::RELAY_OWNER {
        return Err(LedgerError::Invalid(format!(
            "`{owner}` is the upstream task's lease owner, not a process's"
        )));
    }
    // An approval is bound to the exact arguments: refuse a row whose arguments no longer
    // match the hash that was recorded (and approved).
    if arguments_hash(&inv.arguments) != inv.arguments_hash {
        return Err(LedgerError::Corrupt {
            entity: "invocation",
            id: inv.id.to_string(),
            reason: "arguments do not match the recorded arguments hash".into(),
        });
    }
    let mut next = inv.clone();
    next.state = S::Running;
    next.lease = Some(Lease {
        owner: owner.to_owned(),
        deadline: now + lease,
    });
    next.attempts += 1;
    Ok(next)
}

pub(crate) async fn claim(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    id: InvocationId,
    owner: &str,
    lease: Duration,
) -> Result<Invocation, LedgerError> {
    let inv = load_current(tx, batch, id).await?;
    let next = claimed(&inv, owner, lease, batch.now)?;
    #[cfg(feature = "fault-skip-running")]
    {
        // The deliberate fault (docs/crash.md): the claimer is told it holds the call, but
        // no `running` mark is committed.
        return Ok(next);
    }
    #[cfg(not(feature = "fault-skip-running"))]
    batch.save_or(tx, &inv, next, taken).await
}

pub(crate) fn lease_lost(inv: &Invocation, owner: &str) -> LedgerError {
    LedgerError::LeaseLost {
        id: inv.id,
        owner: owner.to_owned(),
        state: inv.state,
        holder: inv.lease.as_ref().map(|l| l.owner.clone()),
    }
}

fn holds(inv: &Invocation, owner: &str) -> bool {
    inv.lease.as_ref().is_some_and(|l| l.owner == owner)
}

pub(crate) async fn renew(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    id: InvocationId,
    owner: &str,
    lease: Duration,
) -> Result<Invocation, LedgerError> {
    let inv = batch.load_required(tx, id).await?;
    if inv.state != S::Running || !holds(&inv, owner) {
        return Err(lease_lost(&inv, owner));
    }
    let mut next = inv.clone();
    next.lease = Some(Lease {
        owner: owner.to_owned(),
        deadline: batch.now + lease,
    });
    batch
        .save_or(tx, &inv, next, |now| lease_lost(now, owner))
        .await
}

fn refuse_finish(inv: &Invocation, owner: &str) -> LedgerError {
    match inv.state {
        S::Succeeded
        | S::Failed
        | S::Resolved
        | S::Abandoned
        | S::Denied
        | S::Expired
        | S::Proposed
        | S::InputRequired => LedgerError::AlreadyFinished {
            id: inv.id,
            state: inv.state,
        },
        S::Running | S::InDoubt | S::Approved => lease_lost(inv, owner),
        S::Pending | S::AwaitingApproval | S::AwaitingAnswer | S::AwaitingCredential => {
            LedgerError::WrongState {
                id: inv.id,
                expected: FINISH_FROM,
                actual: inv.state,
            }
        }
    }
}

/// The row settled with `outcome` (not yet saved). A re-run's outcome replaces whatever an
/// earlier attempt left (an in-doubt row's unanswered error).
pub(crate) fn finished(inv: &Invocation, outcome: Result<Value, ToolError>) -> Invocation {
    let mut next = inv.clone();
    next.expires_at = None;
    match outcome {
        // A relayed MCP round the upstream answered with input requests (LEDGER-61).
        Ok(value) if value.get(INPUT_REQUIRED_KEY).is_some() => {
            next.state = S::InputRequired;
            next.result = Some(value);
            next.error = None;
        }
        Ok(value) => {
            next.state = S::Succeeded;
            next.result = Some(value);
            next.error = None;
        }
        Err(error) => {
            next.state = S::Failed;
            next.error = Some(error);
        }
    }
    next
}

/// Whether finishing `inv` with `error` parks it in doubt (LEDGER-19): the request may have
/// reached the upstream unanswered, and the call may not run twice. An idempotent call fails
/// instead: repeating it is safe, so the caller can simply call again.
fn leaves_in_doubt(inv: &Invocation, error: &ToolError) -> bool {
    error.unanswered && inv.effect != Effect::Idempotent
}

/// The running row parked in doubt for a person (not yet saved), with what the finisher knows:
/// the error it met (stored as the row's error), the time (`updated_at`), and the lease that
/// names who ran it. It waits the approval TTL, as a row the sweeper finds (LEDGER-8).
fn doubted(inv: &Invocation, error: &ToolError, until: OffsetDateTime) -> Invocation {
    let mut next = inv.clone();
    next.state = S::InDoubt;
    next.error = Some(ToolError::new(error.kind, error.message.clone()));
    next.expires_at = Some(until);
    next
}

/// Stores the result. The lease owner may also settle its own row after the sweeper marked
/// it in doubt: the call did finish, so nobody needs to guess (LEDGER-20). An unanswered
/// request of an at-most-once call parks the row in doubt instead (LEDGER-19); on a row the
/// sweeper already marked, that changes nothing.
pub(crate) async fn finish(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    (id, owner): (InvocationId, &str),
    outcome: Result<Value, ToolError>,
    used: Option<&CredentialUse>,
) -> Result<Invocation, LedgerError> {
    let inv = batch.load_required(tx, id).await?;
    let mine = matches!(inv.state, S::Running | S::InDoubt) && holds(&inv, owner);
    if !mine {
        return Err(refuse_finish(&inv, owner));
    }
    let mut next = match &outcome {
        Err(error) if leaves_in_doubt(&inv, error) => {
            if inv.state == S::InDoubt {
                return Ok(inv);
            }
            doubted(&inv, error, batch.now + batch.approval_ttl)
        }
        _ => finished(&inv, outcome),
    };
    // Which principal's credential the attempt carried, in the commit that settles it (LEDGER-84).
    if let Some(used) = used {
        next.credential_use = Some(used.clone());
    }
    batch
        .save_or(tx, &inv, next, |now| refuse_finish(now, owner))
        .await
}

/// The call id of every row of a request relayed to an MCP client (LEDGER-87): only such a row
/// is settled by a client's answer.
pub const RELAYED_CALL_ID: &str = "mcp-asked";

/// The tools such a row has: the requests an MCP client answers.
pub const RELAYED_METHODS: [&str; 3] =
    ["elicitation/create", "sampling/createMessage", "roots/list"];

/// Settles the running row `id` with the answer of its principal's MCP client (docs/rules.md
/// LEDGER-87): a request the endpoint relayed to `principal`'s client on its call's stream,
/// whose answer may reach any replica, not only the lease holder. Only a running row of
/// `principal` recorded under [`RELAYED_CALL_ID`] is settled; another principal's row, or a
/// row of anything else, is [`LedgerError::NotFound`] (not theirs to answer), and a row no
/// longer running is refused as a finish would be.
pub(crate) async fn answer_relayed(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    (id, principal): (InvocationId, &str),
    outcome: Result<Value, ToolError>,
) -> Result<Invocation, LedgerError> {
    let inv = batch.load_required(tx, id).await?;
    let relayed = inv.call_id == RELAYED_CALL_ID && RELAYED_METHODS.contains(&inv.tool.as_str());
    if inv.principal.as_deref() != Some(principal) || !relayed {
        return Err(LedgerError::NotFound(id));
    }
    if inv.state != S::Running {
        return Err(refuse_finish(&inv, principal));
    }
    let next = finished(&inv, outcome);
    batch
        .save_or(tx, &inv, next, |now| refuse_finish(now, principal))
        .await
}
