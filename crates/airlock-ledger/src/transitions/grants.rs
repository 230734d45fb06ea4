//! Bounded grants (docs/rules.md LEDGER-77): an approval that also lets later calls through —
//! identical ones or any of the tool's, by the same principal, in its session or any, for a
//! number of uses and until a time.
//!
//! Guarantees: a grant is written in the commit that approves the call it is given with, and a
//! later call uses it in the commit that records it, with one compare-and-swap of its uses
//! (`uses_left > 0` is checked again on the row it decrements), so of any number of concurrent
//! calls on any number of replicas at most `uses` get through. A grant binds the tool's
//! definitions digest, as an approval does: a changed declaration asks again. A call recorded
//! already (a retry) gives back the use it took.

use crate::sql::tx::LedgerTx;
use crate::transitions::batch::Batch;
use crate::transitions::decide;
use crate::vocabulary::clock::to_micros;
use crate::vocabulary::error::LedgerError;
use crate::vocabulary::ids::InvocationId;
use crate::vocabulary::model::{Decision, Invocation, NewInvocation};

/// Which later calls a grant lets through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantReach {
    /// Calls of the same tool with the same canonical arguments.
    SameCall,
    /// Any call of the same tool.
    Tool,
}

/// What a person grants beside approving one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// Which later calls it covers.
    pub reach: GrantReach,
    /// How many later calls it lets through; `None`: any number while it lasts.
    pub uses: Option<u32>,
    /// When it ends.
    /// How long it lasts from the ledger's time of the approval (its clock, not a replica's).
    pub lasts: std::time::Duration,
    /// Only calls in the approved call's session.
    pub session: bool,
}

/// Approves `id` by `by` and writes `grant` beside it, in one commit.
pub(crate) async fn grant(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    id: InvocationId,
    by: &str,
    grant: &Grant,
) -> Result<Invocation, LedgerError> {
    let until = time::Duration::try_from(grant.lasts)
        .ok()
        .and_then(|lasts| batch.now.checked_add(lasts))
        .filter(|until| *until > batch.now);
    let Some(until) = until.filter(|_| grant.uses != Some(0)) else {
        return Err(LedgerError::Invalid(
            "a grant lets at least one later call through, for a while".to_owned(),
        ));
    };
    // Checked before the approval is written: a refused grant decides nothing.
    let current = crate::transitions::expiry::load_current(tx, batch, id).await?;
    if current.principal.is_none() {
        return Err(LedgerError::Invalid(
            "a call without a principal cannot be granted again: nobody would be named".to_owned(),
        ));
    }
    let row = decide::decide(tx, batch, id, by, &Decision::Approve).await?;
    let principal = row.principal.clone().unwrap_or_default();
    let arguments_hash = (grant.reach == GrantReach::SameCall).then(|| row.arguments_hash.clone());
    let session = grant.session.then(|| row.session_id.to_string());
    tx.inner
        .execute(
            "INSERT INTO approval_grants (source_id, tool, principal, arguments_hash, session_id, \
             definitions_digest, uses_left, expires_at, granted_by, granted_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            &[
                id.to_string().into(),
                row.tool.clone().into(),
                principal.into(),
                arguments_hash.into(),
                session.into(),
                row.definitions_digest.clone().into(),
                grant.uses.map(i64::from).into(),
                to_micros(until).into(),
                by.to_owned().into(),
                to_micros(batch.now).into(),
            ],
        )
        .await?;
    Ok(row)
}

/// Uses a grant that covers `new` by `principal`, if one is in force: the approved call it
/// was given with.
pub(crate) async fn redeem(
    tx: &mut LedgerTx,
    batch: &Batch,
    new: &NewInvocation,
    args_hash: &str,
    principal: Option<&str>,
) -> Result<Option<InvocationId>, LedgerError> {
    let Some(principal) = principal else {
        return Ok(None);
    };
    if matches!(tx.inner, crate::sql::db::DbTx::Postgres(_)) {
        // The budget lock first, as every transaction that may also judge a budget takes it:
        // a grant's row locked before it could deadlock with one judging (LEDGER-74).
        tx.inner.execute("SELECT budget_lock()", &[]).await?;
    }
    let row = tx
        .inner
        .fetch_optional(
            "UPDATE approval_grants SET uses_left = uses_left - 1 WHERE source_id = (\
             SELECT source_id FROM approval_grants WHERE tool = $1 AND principal = $2 \
             AND (arguments_hash IS NULL OR arguments_hash = $3) \
             AND (session_id IS NULL OR session_id = $4) AND definitions_digest = $5 \
             AND expires_at > $6 AND (uses_left IS NULL OR uses_left > 0) \
             ORDER BY granted_at, source_id LIMIT 1) \
             AND (uses_left IS NULL OR uses_left > 0) RETURNING source_id",
            &[
                new.tool.clone().into(),
                principal.to_owned().into(),
                args_hash.to_owned().into(),
                new.session_id.to_string().into(),
                new.definitions_digest.clone().into(),
                to_micros(batch.now).into(),
            ],
        )
        .await?;
    row.map(|r| {
        let id = r.req_text("source_id")?;
        id.parse().map_err(|e| LedgerError::Corrupt {
            entity: "approval_grant",
            id: id.clone(),
            reason: format!("column source_id: {e}"),
        })
    })
    .transpose()
}

/// Gives back the use a call recorded already took of the grant `source`.
pub(crate) async fn give_back(tx: &mut LedgerTx, source: InvocationId) -> Result<(), LedgerError> {
    tx.inner
        .execute(
            "UPDATE approval_grants SET uses_left = uses_left + 1 WHERE source_id = $1",
            &[source.to_string().into()],
        )
        .await?;
    Ok(())
}
