//! A call refused before it runs (rate limit, bad arguments) whose row another claimer took
//! first is reported as that claimer leaves it — parked while it runs — never as completed.

use std::time::Duration;

use airlock_runtime::ledger::roles::Invocations;
use airlock_runtime::ledger::{
    Decision, Grant, Invocation, InvocationId, LedgerFuture, NewInvocation, Recorded, Slots,
    StateUse, SweepReport, ToolError as StoredError, TxTool, Voted, WithInvocations,
};
use time::OffsetDateTime;

use super::*;

/// A ledger's invocations where a rival process wins every claim race: before each claim, the
/// rival claims the row (and keeps it running). `record_and_claim` keeps the trait's default,
/// so a fused claim loses the race too.
struct RivalClaims {
    inner: Arc<dyn Store>,
}

impl Invocations for RivalClaims {
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
    fn decide_all(
        &self,
        ids: Vec<InvocationId>,
        by: &str,
        decision: Decision,
    ) -> LedgerFuture<'_, Vec<Invocation>> {
        self.inner.decide_all(ids, by, decision)
    }
    fn escalate(
        &self,
        id: InvocationId,
        after: Duration,
        to: Vec<String>,
    ) -> LedgerFuture<'_, bool> {
        self.inner.escalate(id, after, to)
    }
    fn grant(&self, id: InvocationId, by: &str, grant: Grant) -> LedgerFuture<'_, Invocation> {
        self.inner.grant(id, by, grant)
    }
    fn vote(
        &self,
        id: InvocationId,
        by: &str,
        needed: u32,
        slots: Option<Slots>,
    ) -> LedgerFuture<'_, Voted> {
        self.inner.vote(id, by, needed, slots)
    }
    fn decide_once(
        &self,
        used: StateUse,
        claim_for: Option<(String, Duration)>,
    ) -> LedgerFuture<'_, Invocation> {
        self.inner.decide_once(used, claim_for)
    }
    fn relay_task(
        &self,
        id: InvocationId,
        owner: &str,
        task: String,
        lease: Duration,
    ) -> LedgerFuture<'_, Invocation> {
        self.inner.relay_task(id, owner, task, lease)
    }
    fn relayed_task(&self, id: InvocationId) -> LedgerFuture<'_, Option<String>> {
        self.inner.relayed_task(id)
    }
    fn sweep(&self, now: OffsetDateTime) -> LedgerFuture<'_, SweepReport> {
        self.inner.sweep(now)
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
    let claims = Arc::new(RivalClaims {
        inner: inner.clone(),
    });
    let rival: Arc<dyn Store> = Arc::new(WithInvocations::new(inner, claims));
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
