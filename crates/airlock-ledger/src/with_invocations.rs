//! [`WithInvocations`]: a store that is another store except for its [`Invocations`] role.
//!
//! Guarantees: every method of every other role goes to the base store unchanged, and every
//! [`Invocations`] method to the override, so a test double written as one role sees every
//! write of that role and nothing else differs from the real store.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use time::OffsetDateTime;
use tokio::sync::watch;
use tokio::time::Instant;
use uuid::Uuid;

use crate::audit_trail::AuditTrail;
use crate::sql::tx::TxTool;
use crate::store::{
    AgentRuns, Budgets, Confirmations, Delegations, Freezes, Invocations, LedgerFuture, Outbox,
    Pins, Rates, Reads, Sessions, Store, Vault,
};
use crate::support::notice::{Notice, NoticeRecord};
use crate::transitions::agent_runs::{RunDetail, RunStep};
use crate::transitions::confirmations::{Answered, Confirmation};
use crate::transitions::decide::{Slots, Voted};
use crate::transitions::delegations::Delegation;
use crate::transitions::freezes::{Freeze, FreezeTarget};
use crate::transitions::grants::Grant;
use crate::transitions::pins::ToolPin;
use crate::transitions::rate::{RateBudget, RateRefusal};
use crate::transitions::request_states::StateUse;
use crate::transitions::vault::SealedCredential;
use crate::vocabulary::budget::{BudgetUse, LimitUsage};
use crate::vocabulary::credential::CredentialUse;
use crate::vocabulary::error::ToolError;
use crate::vocabulary::ids::{InvocationId, RunId, SessionId};
use crate::vocabulary::model::{
    ApprovalFilter, AuditReport, Decision, Invocation, NewInvocation, NewRun, NewSession, Recorded,
    ResumeOutcome, Run, RunLease, Session, SweepReport,
};
use crate::vocabulary::state::{InvocationState, RunStatus};

/// `base` with `invocations` in its [`Invocations`] role; itself a [`Store`]. The override
/// usually wraps the same base and changes one or two methods.
pub struct WithInvocations {
    base: Arc<dyn Store>,
    invocations: Arc<dyn Invocations>,
}

impl WithInvocations {
    /// `base`, its invocations' writes going to `invocations`.
    pub fn new(base: Arc<dyn Store>, invocations: Arc<dyn Invocations>) -> Self {
        Self { base, invocations }
    }
}

/// Methods that hand their arguments to the field `$to` unchanged.
macro_rules! delegate {
    ($to:ident: $(fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $out:ty;)*) => {
        $(fn $name(&self $(, $arg: $ty)*) -> $out {
            self.$to.$name($($arg),*)
        })*
    };
}

impl Invocations for WithInvocations {
    delegate! { invocations:
        fn record(&self, new: NewInvocation) -> LedgerFuture<'_, Recorded>;
        fn record_and_claim(&self, new: NewInvocation, owner: &str, lease: Duration)
            -> LedgerFuture<'_, Recorded>;
        fn claim(&self, id: InvocationId, owner: &str, lease: Duration)
            -> LedgerFuture<'_, Invocation>;
        fn renew_lease(&self, id: InvocationId, owner: &str, lease: Duration)
            -> LedgerFuture<'_, Invocation>;
        fn finish(&self, id: InvocationId, owner: &str, outcome: Result<Value, ToolError>)
            -> LedgerFuture<'_, Invocation>;
        fn run_transactional(&self, id: InvocationId, owner: &str, tool: TxTool)
            -> LedgerFuture<'_, Invocation>;
        fn decide(&self, id: InvocationId, by: &str, decision: Decision)
            -> LedgerFuture<'_, Invocation>;
        fn decide_all(&self, ids: Vec<InvocationId>, by: &str, decision: Decision)
            -> LedgerFuture<'_, Vec<Invocation>>;
        fn vote(&self, id: InvocationId, by: &str, needed: u32, slots: Option<Slots>)
            -> LedgerFuture<'_, Voted>;
        fn grant(&self, id: InvocationId, by: &str, grant: Grant) -> LedgerFuture<'_, Invocation>;
        fn escalate(&self, id: InvocationId, after: Duration, to: Vec<String>)
            -> LedgerFuture<'_, bool>;
        fn decide_once(&self, used: StateUse, claim_for: Option<(String, Duration)>)
            -> LedgerFuture<'_, Invocation>;
        fn relay_task(&self, id: InvocationId, owner: &str, task: String, lease: Duration)
            -> LedgerFuture<'_, Invocation>;
        fn relayed_task(&self, id: InvocationId) -> LedgerFuture<'_, Option<String>>;
        fn sweep(&self, now: OffsetDateTime) -> LedgerFuture<'_, SweepReport>;
    }
}

impl Sessions for WithInvocations {
    delegate! { base:
        fn create_session(&self, id: SessionId, new: NewSession) -> LedgerFuture<'_, Session>;
        fn get_session(&self, id: SessionId) -> LedgerFuture<'_, Session>;
        fn create_run(&self, new: NewRun) -> LedgerFuture<'_, Run>;
        fn get_run(&self, id: RunId) -> LedgerFuture<'_, Run>;
        fn park_run(&self, id: RunId) -> LedgerFuture<'_, Run>;
        fn resume_run(&self, id: RunId) -> LedgerFuture<'_, ResumeOutcome>;
        fn end_run(&self, id: RunId, status: RunStatus, reason: Option<String>)
            -> LedgerFuture<'_, Run>;
        fn cancel_run(&self, id: RunId) -> LedgerFuture<'_, Run>;
        fn open_run_in_session(&self, session: SessionId) -> LedgerFuture<'_, Option<RunId>>;
    }
}

impl AgentRuns for WithInvocations {
    delegate! { base:
        fn start_run(&self, new: NewRun, detail: RunDetail, consent: Option<bool>)
            -> LedgerFuture<'_, (Run, Answered)>;
        fn save_run_steps(&self, steps: Vec<RunStep>, detail: RunDetail)
            -> LedgerFuture<'_, RunStatus>;
        fn finish_run(&self, steps: Vec<RunStep>, detail: RunDetail, status: RunStatus,
            reason: Option<String>) -> LedgerFuture<'_, Run>;
        fn run_steps(&self, run: RunId) -> LedgerFuture<'_, Vec<RunStep>>;
        fn run_detail(&self, run: RunId) -> LedgerFuture<'_, Option<RunDetail>>;
        fn child_run(&self, parent: RunId, call_id: String) -> LedgerFuture<'_, Option<RunId>>;
        fn parked_root_runs(&self, limit: u32) -> LedgerFuture<'_, Vec<RunId>>;
        fn resume_run_leased(&self, id: RunId, lease: RunLease)
            -> LedgerFuture<'_, ResumeOutcome>;
        fn renew_run_lease(&self, id: RunId, owner: &str, ttl: Duration)
            -> LedgerFuture<'_, bool>;
        fn take_over_runs(&self, lease: RunLease, limit: u32) -> LedgerFuture<'_, Vec<RunId>>;
    }
}

impl Reads for WithInvocations {
    delegate! { base:
        fn get(&self, id: InvocationId) -> LedgerFuture<'_, Invocation>;
        fn wait_for_change(&self, id: InvocationId, seen: Option<i64>, deadline: Instant)
            -> LedgerFuture<'_, Invocation>;
        fn approvals(&self) -> watch::Receiver<()>;
        fn pending_approvals(&self, filter: ApprovalFilter) -> LedgerFuture<'_, Vec<Invocation>>;
        fn in_doubt(&self) -> LedgerFuture<'_, Vec<Invocation>>;
        fn open_counts(&self) -> LedgerFuture<'_, Vec<(InvocationState, u64)>>;
        fn approved_unclaimed(&self, limit: u32) -> LedgerFuture<'_, Vec<Invocation>>;
        fn escalated(&self, id: InvocationId) -> LedgerFuture<'_, bool>;
        fn session_invocations(&self, id: SessionId) -> LedgerFuture<'_, Vec<Invocation>>;
        fn run_invocations(&self, id: RunId) -> LedgerFuture<'_, Vec<Invocation>>;
        fn verify(&self) -> LedgerFuture<'_, AuditReport>;
        fn audit_trail(&self) -> LedgerFuture<'_, AuditTrail>;
    }
}

impl Confirmations for WithInvocations {
    delegate! { base:
        fn hold_confirmation(&self, held: Confirmation) -> LedgerFuture<'_, ()>;
        fn answer_confirmation(&self, session: SessionId, run: RunId, consent: bool)
            -> LedgerFuture<'_, Answered>;
        fn take_confirmation(&self, session: SessionId, run: RunId, held: (String, String),
            call_id: String) -> LedgerFuture<'_, bool>;
        fn held_confirmation(&self, session: SessionId)
            -> LedgerFuture<'_, Option<Confirmation>>;
        fn answer_relayed(&self, id: InvocationId, principal: &str,
            outcome: Result<Value, ToolError>) -> LedgerFuture<'_, Invocation>;
    }
}

impl Pins for WithInvocations {
    delegate! { base:
        fn tool_pins(&self) -> LedgerFuture<'_, Vec<ToolPin>>;
        fn pin_tool(&self, pin: ToolPin) -> LedgerFuture<'_, ()>;
        fn unpin_tool(&self, connection: String, tool: String) -> LedgerFuture<'_, ()>;
    }
}

impl Rates for WithInvocations {
    delegate! { base:
        fn take_rate(&self, budgets: Vec<RateBudget>) -> LedgerFuture<'_, Option<RateRefusal>>;
    }
}

impl Budgets for WithInvocations {
    delegate! { base:
        fn budget_uses(&self, id: InvocationId) -> LedgerFuture<'_, Vec<BudgetUse>>;
        fn limit_usage(&self) -> LedgerFuture<'_, Vec<LimitUsage>>;
    }
}

impl Delegations for WithInvocations {
    delegate! { base:
        fn delegate(&self, from: String, to: String, lasts: Duration)
            -> LedgerFuture<'_, Delegation>;
        fn delegations_to(&self, principal: String) -> LedgerFuture<'_, Vec<Delegation>>;
    }
}

impl Vault for WithInvocations {
    delegate! { base:
        fn set_credential(&self, credential: SealedCredential)
            -> LedgerFuture<'_, Vec<InvocationId>>;
        fn revoke_credential(&self, connection: Option<String>, principal: String, by: String)
            -> LedgerFuture<'_, u32>;
        fn use_connect_state(&self, nonce: String) -> LedgerFuture<'_, bool>;
        fn credential(&self, connection: String, principal: String)
            -> LedgerFuture<'_, Option<SealedCredential>>;
        fn credentials(&self, principal: Option<String>)
            -> LedgerFuture<'_, Vec<SealedCredential>>;
        fn credentials_epoch(&self) -> LedgerFuture<'_, i64>;
        fn await_credential(&self, id: InvocationId, owner: &str, connection: String,
            message: String) -> LedgerFuture<'_, Invocation>;
        fn finish_with_credential(&self, id: InvocationId, owner: &str,
            outcome: Result<Value, ToolError>, used: CredentialUse)
            -> LedgerFuture<'_, Invocation>;
    }
}

impl Freezes for WithInvocations {
    delegate! { base:
        fn freeze(&self, freeze: Freeze) -> LedgerFuture<'_, Freeze>;
        fn unfreeze(&self, target: FreezeTarget, by: String) -> LedgerFuture<'_, Option<Freeze>>;
        fn freezes(&self) -> LedgerFuture<'_, Vec<Freeze>>;
    }
}

impl Outbox for WithInvocations {
    delegate! { base:
        fn claim_notices(&self, owner: &str, lease: Duration, limit: u32)
            -> LedgerFuture<'_, Vec<Notice>>;
        fn notice_delivered(&self, id: Uuid, owner: &str, reference: Option<String>)
            -> LedgerFuture<'_, bool>;
        fn notice_undelivered(&self, id: Uuid, owner: &str, retry_in: Option<Duration>,
            error: String) -> LedgerFuture<'_, bool>;
        fn notice_reference(&self, invocation: InvocationId, destination: &str)
            -> LedgerFuture<'_, Option<String>>;
        fn notices_of(&self, invocation: InvocationId) -> LedgerFuture<'_, Vec<NoticeRecord>>;
        fn notices(&self) -> watch::Receiver<()>;
    }
}
