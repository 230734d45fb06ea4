//! Decisions taken through a request state the MCP endpoint sealed for the person at the
//! client (docs/rules.md LEDGER-46, LEDGER-47).
//!
//! Guarantees: a state's nonce is used at most once. The check, the decision, the claim of an
//! approved call and the record of the nonce are one job, so they commit together or not at
//! all: of any number of concurrent (or later) uses of one state exactly one decides, and every
//! other is refused with [`LedgerError::RequestStateUsed`] — or, when another person decided
//! the row first, with that decision's own refusal. A refused use writes nothing.
//!
//! The endpoint opens and checks the state itself; this module only stores its use.

use std::time::Duration;

use crate::batch::Batch;
use crate::clock::to_micros;
use crate::decide::decide;
use crate::error::LedgerError;
use crate::ids::InvocationId;
use crate::lease::claim;
use crate::model::{Decision, Invocation};
use crate::state::InvocationState as S;
use crate::tx::LedgerTx;

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
    let seen = tx
        .inner
        .fetch_optional(
            "SELECT nonce FROM request_states WHERE nonce = $1",
            &[used.nonce.clone().into()],
        )
        .await?;
    if seen.is_some() {
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
    tx.inner
        .execute(
            "INSERT INTO request_states (nonce, invocation_id, used_by, used_at) \
             VALUES ($1, $2, $3, $4)",
            &[
                used.nonce.clone().into(),
                id.to_string().into(),
                used.by.clone().into(),
                to_micros(batch.now).into(),
            ],
        )
        .await?;
    Ok(row)
}
