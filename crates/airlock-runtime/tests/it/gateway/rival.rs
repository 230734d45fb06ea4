//! A call refused before it runs (rate limit, bad arguments) whose row another claimer took
//! first is reported as that claimer leaves it — parked while it runs — never as completed.

use std::time::Duration;

use airlock_runtime::ledger::{
    ApprovalFilter, AuditReport, Decision, Invocation, InvocationId, InvocationState, LedgerFuture,
    NewInvocation, NewRun, NewSession, RateBudget, RateRefusal, Recorded, ResumeOutcome, Run,
    RunId, RunStatus, Session, SessionId, SweepReport, ToolError as StoredError, TxTool,
};
use time::OffsetDateTime;
use tokio::time::Instant;

use super::*;

/// A ledger where a rival process wins every claim race: before each claim, `rival` claims
/// the row (and keeps it running).
struct RivalClaims {
    inner: Arc<dyn Store>,
}

impl Store for RivalClaims {
    fn claim(
        &self,
        id: InvocationId,
        owner: &str,
        lease: Duration,
    ) -> LedgerFuture<'_, Invocation> {
        let owner = owner.to_owned();
        Box::pin(async move {
            let _ = self.inner.claim(id, "rival", lease).await;
            self.inner.claim(id, &owner, lease).await
        })
    }
    fn create_session(&self, id: SessionId, new: NewSession) -> LedgerFuture<'_, Session> {
        self.inner.create_session(id, new)
    }
    fn get_session(&self, id: SessionId) -> LedgerFuture<'_, Session> {
        self.inner.get_session(id)
    }
    fn create_run(&self, new: NewRun) -> LedgerFuture<'_, Run> {
        self.inner.create_run(new)
    }
    fn get_run(&self, id: RunId) -> LedgerFuture<'_, Run> {
        self.inner.get_run(id)
    }
    fn park_run(&self, id: RunId) -> LedgerFuture<'_, Run> {
        self.inner.park_run(id)
    }
    fn resume_run(&self, id: RunId) -> LedgerFuture<'_, ResumeOutcome> {
        self.inner.resume_run(id)
    }
    fn end_run(
        &self,
        id: RunId,
        status: RunStatus,
        reason: Option<String>,
    ) -> LedgerFuture<'_, Run> {
        self.inner.end_run(id, status, reason)
    }
    fn record(&self, new: NewInvocation) -> LedgerFuture<'_, Recorded> {
        self.inner.record(new)
    }
    fn renew_lease(
        &self,
        id: InvocationId,
        owner: &str,
        lease: Duration,
    ) -> LedgerFuture<'_, Invocation> {
        self.inner.renew_lease(id, owner, lease)
    }
    fn finish(
        &self,
        id: InvocationId,
        owner: &str,
        outcome: Result<Value, StoredError>,
    ) -> LedgerFuture<'_, Invocation> {
        self.inner.finish(id, owner, outcome)
    }
    fn run_transactional(
        &self,
        id: InvocationId,
        owner: &str,
        tool: TxTool,
    ) -> LedgerFuture<'_, Invocation> {
        self.inner.run_transactional(id, owner, tool)
    }
    fn decide(
        &self,
        id: InvocationId,
        by: &str,
        decision: Decision,
    ) -> LedgerFuture<'_, Invocation> {
        self.inner.decide(id, by, decision)
    }
    fn sweep(&self, now: OffsetDateTime) -> LedgerFuture<'_, SweepReport> {
        self.inner.sweep(now)
    }
    fn take_rate(&self, budgets: Vec<RateBudget>) -> LedgerFuture<'_, Option<RateRefusal>> {
        self.inner.take_rate(budgets)
    }
    fn get(&self, id: InvocationId) -> LedgerFuture<'_, Invocation> {
        self.inner.get(id)
    }
    fn wait_for_change(
        &self,
        id: InvocationId,
        seen: Option<i64>,
        deadline: Instant,
    ) -> LedgerFuture<'_, Invocation> {
        self.inner.wait_for_change(id, seen, deadline)
    }
    fn approvals(&self) -> tokio::sync::watch::Receiver<()> {
        self.inner.approvals()
    }
    fn pending_approvals(&self, filter: ApprovalFilter) -> LedgerFuture<'_, Vec<Invocation>> {
        self.inner.pending_approvals(filter)
    }
    fn in_doubt(&self) -> LedgerFuture<'_, Vec<Invocation>> {
        self.inner.in_doubt()
    }

    fn open_counts(&self) -> LedgerFuture<'_, Vec<(InvocationState, u64)>> {
        self.inner.open_counts()
    }
    fn approved_unclaimed(&self, limit: u32) -> LedgerFuture<'_, Vec<Invocation>> {
        self.inner.approved_unclaimed(limit)
    }
    fn session_invocations(&self, id: SessionId) -> LedgerFuture<'_, Vec<Invocation>> {
        self.inner.session_invocations(id)
    }
    fn run_invocations(&self, id: RunId) -> LedgerFuture<'_, Vec<Invocation>> {
        self.inner.run_invocations(id)
    }
    fn verify(&self) -> LedgerFuture<'_, AuditReport> {
        self.inner.verify()
    }
}

/// Asserts `outcome` reports a row the rival holds: parked, running, nothing stored on it.
fn assert_held_by_the_rival(outcome: &Outcome) {
    let row = outcome.invocation();
    assert_eq!(outcome.kind(), OutcomeKind::Parked, "{outcome:?}");
    assert_eq!(row.state, InvocationState::Running, "{outcome:?}");
    assert!(row.error.is_none(), "{outcome:?}");
}

pub(super) async fn a_refused_call_another_claimer_holds_is_reported_as_it_stands(
    backend: Backend,
) {
    let dir = tempfile::tempdir().unwrap();
    let Some(inner) = store(backend, &dir).await else {
        return;
    };
    let rival: Arc<dyn Store> = Arc::new(RivalClaims { inner });
    let f = gateway_on(rival, one_call_a_minute(Approval::Never), "", dir).await;
    // The first call spends the minute's budget; the rival runs it.
    let first = f
        .gateway
        .call(&f.ctx("a").await, "count", json!({"amount": 1}))
        .await
        .unwrap();
    assert_held_by_the_rival(&first);
    // Rate-limited: refused before running, but the rival claims the row first.
    let limited = f
        .gateway
        .call(&f.ctx("b").await, "count", json!({"amount": 1}))
        .await
        .unwrap();
    assert_held_by_the_rival(&limited);
    // Bad arguments: stored as a failure only by whoever claims the row.
    let bad = f
        .gateway
        .call(&f.ctx("c").await, "count", json!({"amount": "x"}))
        .await
        .unwrap();
    assert_held_by_the_rival(&bad);
    assert_eq!(f.runs(), 0);
}
