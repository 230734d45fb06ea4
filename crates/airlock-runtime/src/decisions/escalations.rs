//! The escalation pass (docs/rules.md POLICY-63): a waiting call whose tool declares
//! `approvers.escalate` and that nobody decided within `after` is escalated to `to`.
//!
//! Guarantees: every serving replica runs the pass; the ledger escalates each call once
//! ([`Invocations::escalate`]), judged by its own clock, and tells the outbox's routes in that
//! commit — so people are told once, whatever the number of replicas. A pass reads at most
//! [`SCAN`] waiting calls, oldest first.
//!
//! [`Invocations::escalate`]: airlock_ledger::Invocations::escalate

use std::sync::Arc;
use std::time::Duration;

use airlock_ledger::ApprovalFilter;
use tokio_util::sync::CancellationToken;

use crate::gateway::{Gateway, GatewayError};

/// How often a serving process looks for calls to escalate.
pub const EVERY: Duration = Duration::from_secs(15);
/// The most waiting calls one pass reads.
const SCAN: u32 = 1_000;

/// Escalates every waiting call that is due; how many this pass escalated.
///
/// # Errors
/// The ledger's: the database is unreachable or a row is corrupt.
pub async fn escalate_due(gateway: &Gateway) -> Result<usize, GatewayError> {
    let store = gateway.store();
    let filter = ApprovalFilter {
        limit: Some(SCAN),
        ..ApprovalFilter::default()
    };
    let mut escalated = 0;
    for row in store.pending_approvals(filter).await? {
        let opened = store.get_session(row.session_id).await?;
        let escalation = crate::session::scope(&opened)
            .and_then(|scope| gateway.scope(&scope)?.get(&row.tool).cloned())
            .and_then(|spec| spec.policy.approvers.escalate);
        let Some(escalation) = escalation else {
            continue;
        };
        // Only a call that looks due and is not escalated yet costs a write; the ledger judges
        // again by its own clock.
        let due = time::Duration::try_from(escalation.after)
            .ok()
            .and_then(|after| row.created_at.checked_add(after))
            .is_some_and(|due| due <= time::OffsetDateTime::now_utc());
        if !due || store.escalated(row.id).await? {
            continue;
        }
        if store
            .escalate(row.id, escalation.after, escalation.to.clone())
            .await?
        {
            tracing::info!(target: crate::gateway::EVENTS, id = %row.id, tool = row.tool, to = ?escalation.to, "escalated");
            escalated += 1;
        }
    }
    Ok(escalated)
}

/// Runs [`escalate_due`] every `every` until `stop`; a failed pass is logged and tried again.
pub async fn work(gateway: Arc<Gateway>, every: Duration, stop: CancellationToken) {
    let mut tick = tokio::time::interval(every);
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            _ = tick.tick() => {}
        }
        if let Err(error) = escalate_due(&gateway).await {
            tracing::error!(%error, "the escalation pass failed");
        }
    }
}
