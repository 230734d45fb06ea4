//! `approval:` on a `type: agent` tool (docs/rules.md AGENT-36): the sub-agent's call is
//! recorded in the ledger under its call id before the child starts, with the tool's approval
//! policy, so a gated sub-agent parks the run like any gated call and its child starts only
//! once a person approved — exactly once, because a replay finds the child by its calling run
//! and call (AGENT-20) before it looks at the gate. A sub-agent of approval `never` records
//! nothing (AGENT-30).

use std::time::Duration;

use airlock_ledger::{Invocation, InvocationState, NewInvocation};
use airlock_spec::{Approval, SourceKind};
use serde_json::{Value, json};

use super::Agents;
use super::ctx::RunCtx;
use super::settle::{self, Settled};
use super::types::AgentError;

/// Who holds the gate's row while it is settled as passed.
const OWNER: &str = "airlock-agent-gate";
/// The gate's row is claimed and finished back to back; nothing runs under this lease.
const LEASE: Duration = Duration::from_secs(60);

/// Whether the sub-agent call `call_id` to `tool` may start its child: `None` when it may,
/// else what the step shows for it (waiting for a person, or declined).
pub(super) async fn before_child(
    agents: &Agents,
    ctx: &RunCtx<'_>,
    call_id: &str,
    tool: &str,
    arguments: &Value,
) -> Result<Option<Settled>, AgentError> {
    let scope = agents.gateway().scope(&ctx.scope);
    let approval = scope
        .and_then(|s| s.get(tool))
        .map_or(Approval::Never, |t| t.policy.approval);
    if approval == Approval::Never {
        return Ok(None);
    }
    let digest = scope.map(airlock_spec::Scope::digest).unwrap_or_default();
    let mut new = NewInvocation::new(ctx.session, call_id, tool, arguments.clone(), digest);
    new.run_id = Some(ctx.detail.root);
    new.source_kind = SourceKind::Agent;
    new.approval = approval;
    new.principal = ctx.detail.principal.clone();
    let row = agents.store().record(new).await?.invocation;
    passed(agents, ctx, row).await
}

/// The gate's row as it stands: approved (or covered by an earlier approval) passes, once,
/// and is settled as the child's start; parked waits; declined is shown to the model.
async fn passed(
    agents: &Agents,
    ctx: &RunCtx<'_>,
    row: Invocation,
) -> Result<Option<Settled>, AgentError> {
    match row.state {
        InvocationState::Pending | InvocationState::Approved => {
            let store = agents.store();
            let claimed = store.claim(row.id, OWNER, LEASE).await?;
            let started = json!({"started": claimed.tool});
            store.finish(claimed.id, OWNER, Ok(started)).await?;
            Ok(None)
        }
        // Passed before (a start cut short by a restart): the child starts now, once.
        InvocationState::Running | InvocationState::Succeeded => Ok(None),
        _ => Ok(Some(settle::shown(agents, ctx, &row).await)),
    }
}
