//! Decisions taken through a request state the MCP endpoint sealed for the person at the
//! client (docs/rules.md LEDGER-46, LEDGER-47).
//!
//! Guarantees: a state's nonce is used at most once. The check, the decision, the claim of an
//! approved call and the record of the nonce are one job, so they commit together or not at
//! all: of any number of concurrent (or later) uses of one state exactly one decides, and every
//! other is refused with [`LedgerError::RequestStateUsed`] — or, when another person decided
//! the row first, with that decision's own refusal. A refused use writes nothing.
//!
//! The next round of a relayed MCP call (LEDGER-62) uses its state the same way: the nonce is
//! checked before the round's row is written and recorded in the commit that records and
//! claims it.
//!
//! The endpoint opens and checks the state itself; this module only stores its use.

use std::time::Duration;

use crate::sql::tx::LedgerTx;
use crate::transitions::batch::Batch;
use crate::transitions::decide::decide;
use crate::transitions::lease::claim;
use crate::vocabulary::clock::to_micros;
use crate::vocabulary::error::LedgerError;
use crate::vocabulary::ids::InvocationId;
use crate::vocabulary::model::{Decision, Invocation, RoundUse};
use crate::vocabulary::state::InvocationState as S;

/// One use of a sealed state: whose, for which row, and what the person decided.
#[derive(Debug, Clone, PartialEq)]
pub struct StateUse {
    /// The state's random nonce (never the sealed state itself).
    pub nonce: String,
    /// The row the state was sealed for.
    pub invocation: InvocationId,
    /// The principal who used it; recorded as the decider.
    pub by: String,
    /// The person's decision.
    pub decision: Decision,
}

/// Decides `used.invocation` and, when approved and `claim_for` is given, claims it under that
/// owner's lease, recording the nonce as used — all in the caller's transaction.
pub(crate) async fn decide_once(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    used: &StateUse,
    claim_for: Option<(&str, Duration)>,
) -> Result<Invocation, LedgerError> {
    if nonce_used(tx, &used.nonce).await? {
        return Err(LedgerError::RequestStateUsed {
            id: used.invocation,
        });
    }
    let id = used.invocation;
    let decided = decide(tx, batch, id, &used.by, &used.decision).await?;
    let row = match claim_for {
        Some((owner, lease)) if decided.state == S::Approved => {
            claim(tx, batch, id, owner, lease).await?
        }
        _ => decided,
    };
    record_use(tx, batch, &used.nonce, id, &used.by).await?;
    Ok(row)
}

/// Refuses the next round of a relayed call unless its state's nonce is unused and the round
/// it follows ended `input_required` (LEDGER-62); writes nothing.
pub(crate) async fn follow_round(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    round: &RoundUse,
) -> Result<(), LedgerError> {
    if nonce_used(tx, &round.nonce).await? {
        return Err(LedgerError::RequestStateUsed { id: round.previous });
    }
    let previous = batch.load_required(tx, round.previous).await?;
    if previous.state != S::InputRequired {
        return Err(LedgerError::WrongState {
            id: round.previous,
            expected: &[S::InputRequired],
            actual: previous.state,
        });
    }
    Ok(())
}

async fn nonce_used(tx: &mut LedgerTx, nonce: &str) -> Result<bool, LedgerError> {
    let seen = tx
        .inner
        .fetch_optional(
            "SELECT nonce FROM request_states WHERE nonce = $1",
            &[nonce.to_owned().into()],
        )
        .await?;
    Ok(seen.is_some())
}

/// Records `nonce` as used for `invocation` by `by`, in the caller's transaction.
pub(crate) async fn record_use(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    nonce: &str,
    invocation: InvocationId,
    by: &str,
) -> Result<(), LedgerError> {
    batch.flush(tx).await?;
    tx.inner
        .execute(
            "INSERT INTO request_states (nonce, invocation_id, used_by, used_at) \
             VALUES ($1, $2, $3, $4)",
            &[
                nonce.to_owned().into(),
                invocation.to_string().into(),
                by.to_owned().into(),
                to_micros(batch.now).into(),
            ],
        )
        .await?;
    Ok(())
}
