//! Recording a call: dedupe on (session, call id), the approval policy's first state, and the
//! fused record-and-claim for calls that may run at once.
//!
//! The insert comes first (`ON CONFLICT DO NOTHING`) and the existing row is read only when it
//! conflicts, so a new call costs one statement (queued with its batch's other rows, see
//! `deferred`); the unique index makes the dedupe exact across processes.

use std::time::Duration;

use airlock_spec::{Approval, Effect, Mode, SourceKind};
use sqlx::AssertSqlSafe;

use crate::sql::row::{INVOCATION_COLUMN_COUNT, INVOCATION_COLUMNS, InvocationRow, content_hash};
use crate::sql::tx::LedgerTx;
use crate::transitions::batch::Batch;
use crate::transitions::budgets::{self, Judged};
use crate::transitions::expiry::settle_expiry;
use crate::transitions::grants;
use crate::transitions::lease::{arguments_hash, claimed};
use crate::transitions::request_states;
use crate::transitions::runs;
use crate::vocabulary::budget::BudgetUse;
use crate::vocabulary::error::{LedgerError, ToolError, ToolErrorKind};
use crate::vocabulary::ids::InvocationId;
use crate::vocabulary::model::{DecisionRecord, Invocation, NewInvocation, Recorded};
use crate::vocabulary::state::{CallKind, DecisionKind, InvocationState as S};

async fn load_by_call(
    tx: &mut LedgerTx,
    new: &NewInvocation,
) -> Result<Option<Invocation>, LedgerError> {
    let row = tx
        .inner
        .fetch_optional(
            AssertSqlSafe(format!(
                "SELECT {INVOCATION_COLUMNS} FROM invocations WHERE session_id = $1 AND call_id = $2"
            )),
            &[new.session_id.to_string().into(), new.call_id.clone().into()],
        )
        .await?;
    row.map(|r| Invocation::try_from(InvocationRow::read(&r)?))
        .transpose()
}

/// Record step: dedupe on (session, call id), then the policy decides the first state.
///
/// The insert comes first (`ON CONFLICT DO NOTHING`) and the existing row is read only when it
/// conflicts, so a new call costs one statement; the unique index makes the dedupe exact.
pub(crate) async fn record(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    new: NewInvocation,
) -> Result<Recorded, LedgerError> {
    record_with(tx, batch, new, None).await
}

/// Record, and claim in the same transaction if the new row may run now (`pending`). A row
/// parked for a person, or one recorded before (dedupe), is returned as it stands, unclaimed.
pub(crate) async fn record_and_claim(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    new: NewInvocation,
    owner: &str,
    lease: Duration,
) -> Result<Recorded, LedgerError> {
    record_with(tx, batch, new, Some((owner, lease))).await
}

async fn record_with(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    new: NewInvocation,
    claim: Option<(&str, Duration)>,
) -> Result<Recorded, LedgerError> {
    if new.effect == Effect::Transactional && new.source_kind != SourceKind::Local {
        return Err(LedgerError::Invalid(format!(
            "tool {} is {}: only local tools can be transactional",
            new.tool, new.source_kind
        )));
    }
    let session_principal = match &new.opens {
        Some(opened) => opened.principal.clone(),
        None => runs::session_principal(tx, batch, new.session_id)
            .await?
            .ok_or(LedgerError::SessionNotFound(new.session_id))?,
    };
    if let Some(run_id) = new.run_id {
        runs::require_run(tx, batch, run_id).await?;
    }
    if let Some(round) = &new.follows {
        // Checked before anything is written: a refused round writes nothing (LEDGER-62).
        request_states::follow_round(tx, batch, round).await?;
    }
    let principal = new.principal.clone().or(session_principal);
    let args_hash = arguments_hash(&new.arguments);
    let (mut state, mut approval_ref) =
        initial_state(tx, batch, &new, &args_hash, principal.as_deref()).await?;
    // A person's grant lets the call through as their approval would (LEDGER-77).
    let mut granted = None;
    if state == S::AwaitingApproval
        && new.grantable
        && let Some(source) =
            grants::redeem(tx, batch, &new, &args_hash, principal.as_deref()).await?
    {
        (state, approval_ref, granted) = (S::Pending, Some(source), Some(source));
    }
    let mut for_approver = false;
    let (uses, over) = match state {
        S::Denied => (Vec::new(), None),
        _ if new.shares.is_empty() => (Vec::new(), None),
        _ => match budgets::judge(tx, batch, &new.shares).await? {
            Judged::Within(uses) => (uses, None),
            // Its message holds the figures; a share that never counts is not written.
            Judged::Denied(message) => {
                state = S::Failed;
                let error = ToolError::new(ToolErrorKind::OverLimit, message);
                (Vec::new(), Some(error))
            }
            Judged::Approval(uses) => {
                // An approver decides a call over an `approval` limit, whatever its policy —
                // not the caller of an `approval: caller` tool (POLICY-59).
                if state == S::Pending {
                    (state, approval_ref) = (S::AwaitingApproval, None);
                }
                for_approver = true;
                (uses, None)
            }
        },
    };
    // A grant's use stands only for a call it let run.
    if let Some(source) = granted.filter(|_| state != S::Pending) {
        grants::give_back(tx, source).await?;
    }
    let mut inv = new_row(batch, &new, principal, args_hash, state, approval_ref);
    inv.error = over;
    if for_approver {
        inv.approval = Approval::Always;
    }
    // Claimed at birth: the row is inserted as `running` (version 2) and the chain records
    // both versions, exactly as a record and a claim would, in one statement.
    let running = match claim {
        Some((owner, lease)) if inv.state == S::Pending => {
            let mut next = claimed(&inv, owner, lease, batch.now)?;
            next.version = inv.version + 1;
            Some(next)
        }
        _ => None,
    };
    if let Some(opened) = new.opens.clone() {
        // In this job, not one queued beside it (LEDGER-90): the writer may start a batch
        // between two jobs, and the session would then commit alone. Right before the row,
        // after every check that refuses, so a refused call leaves no session either.
        runs::create_session(tx, batch, new.session_id, opened).await?;
    }
    if insert(tx, batch, &inv, running.as_ref(), &uses).await? {
        if let Some(round) = &new.follows {
            request_states::record_use(tx, batch, &round.nonce, round.previous, &round.by).await?;
        }
        return Ok(Recorded {
            invocation: running.unwrap_or(inv),
            created: true,
        });
    }
    // Already recorded (earlier, or by another process meanwhile): that row is the answer.
    if let Some(source) = granted.filter(|_| inv.state == S::Pending) {
        grants::give_back(tx, source).await?;
    }
    batch.flush(tx).await?;
    let existing = load_by_call(tx, &new)
        .await?
        .ok_or(LedgerError::NotFound(inv.id))?;
    let now = batch.now;
    let invocation = settle_expiry(tx, batch, existing, now).await?;
    Ok(Recorded {
        invocation,
        created: false,
    })
}

/// A new row in its first state.
fn new_row(
    batch: &Batch,
    new: &NewInvocation,
    principal: Option<String>,
    arguments_hash: String,
    state: S,
    approval_ref: Option<InvocationId>,
) -> Invocation {
    let id = InvocationId::new();
    let ttl = new.approval_ttl.unwrap_or(batch.approval_ttl);
    Invocation {
        id,
        session_id: new.session_id,
        run_id: new.run_id,
        call_id: new.call_id.clone(),
        tool: new.tool.clone(),
        arguments: new.arguments.clone(),
        approved_arguments: None,
        credential_use: None,
        arguments_hash,
        source_kind: new.source_kind,
        effect: new.effect,
        approval: new.approval,
        mode: new.mode,
        kind: new.kind,
        state,
        version: 1,
        result: None,
        error: None,
        idempotency_key: new
            .idempotency_key
            .clone()
            .unwrap_or_else(|| id.to_string()),
        principal,
        definitions_digest: new.definitions_digest.clone(),
        approval_ref,
        decision: new.refusal.as_ref().map(|refusal| DecisionRecord {
            by: refusal.by.decider().to_owned(),
            decision: DecisionKind::Denied,
            reason: Some(refusal.reason.clone()),
            at: batch.now,
        }),
        resolution: None,
        expires_at: state.is_parked().then(|| batch.now + ttl),
        lease: None,
        attempts: 0,
        created_at: batch.now,
        updated_at: batch.now,
    }
}

/// The first state of a new row: the whole approval policy, atomic with the insert.
async fn initial_state(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    new: &NewInvocation,
    args_hash: &str,
    principal: Option<&str>,
) -> Result<(S, Option<InvocationId>), LedgerError> {
    if new.refusal.is_some() {
        return Ok((S::Denied, None));
    }
    if new.mode == Mode::Propose {
        return Ok((S::Proposed, None));
    }
    if new.kind == CallKind::Question {
        return Ok((S::AwaitingAnswer, None));
    }
    if new.follows.is_some() {
        // The chain proves the first round's verdict: later rounds are not gated again.
        return Ok((S::Pending, None));
    }
    match new.approval {
        Approval::Never => Ok((S::Pending, None)),
        // `caller` parks like `always`; who may decide is the endpoint's concern (POLICY-38).
        Approval::Always | Approval::Caller => Ok((S::AwaitingApproval, None)),
        Approval::Once => {
            // Only calls a person approved count; bound to tool, canonical arguments and the
            // definitions digest, in the same session or for the same principal.
            batch.flush(tx).await?;
            let row = tx
                .inner
                .fetch_optional(
                    "SELECT id FROM invocations WHERE tool = $1 AND arguments_hash = $2 \
                     AND definitions_digest = $3 AND decision = 'approved' \
                     AND (session_id = $4 OR principal = $5) ORDER BY created_at LIMIT 1",
                    &[
                        new.tool.clone().into(),
                        args_hash.into(),
                        new.definitions_digest.clone().into(),
                        new.session_id.to_string().into(),
                        principal.map(str::to_owned).into(),
                    ],
                )
                .await?;
            match row {
                Some(r) => {
                    let id = r.req_text("id")?;
                    let id = id.parse().map_err(|e| LedgerError::Corrupt {
                        entity: "invocation",
                        id: id.clone(),
                        reason: format!("column id: {e}"),
                    })?;
                    Ok((S::Pending, Some(id)))
                }
                None => Ok((S::AwaitingApproval, None)),
            }
        }
    }
}

/// Inserts `first` (or `then`, its next version, when the row is claimed at birth) unless the
/// (session, call id) exists, carrying its budget shares (`uses`, LEDGER-74); chains an event
/// for each version. `false` on a conflict.
async fn insert(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    first: &Invocation,
    then: Option<&Invocation>,
    uses: &[BudgetUse],
) -> Result<bool, LedgerError> {
    let stored = then.unwrap_or(first);
    let mut row = InvocationRow::from(stored);
    row.budget = budgets::stored(uses, batch.now);
    let queued = batch.deferred.as_mut().is_some_and(|d| d.push_insert(&row));
    if !queued {
        // The batch may have queued this very call: write it first so the conflict shows.
        batch.flush(tx).await?;
        let placeholders: Vec<String> = (1..=INVOCATION_COLUMN_COUNT)
            .map(|i| format!("${i}"))
            .collect();
        let n = tx
            .inner
            .execute(
                AssertSqlSafe(format!(
                    "INSERT INTO invocations ({INVOCATION_COLUMNS}) VALUES ({}) \
                     ON CONFLICT (session_id, call_id) DO NOTHING",
                    placeholders.join(", ")
                )),
                &row.binds(),
            )
            .await?;
        if n == 0 {
            return Ok(false);
        }
    }
    for u in uses {
        batch.budgets.add(&u.key, u.share);
    }
    for version in std::iter::once(first).chain(then) {
        let row = InvocationRow::from(version);
        let hash = content_hash(&row);
        batch.audit("invocation", &row.id, row.version, &row.state, &hash);
    }
    batch.notice(None, stored);
    batch.changed.push(stored.id);
    batch.rows.insert(stored.id, stored.clone());
    Ok(true)
}
