//! Decisions, shared by every surface (HTTP API, CLI, the MCP endpoint's inbox): one ledger
//! transition by a named person, then — for an approval — the call runs through the gateway's
//! claim in a background task, never inside the person's request, and a serving process waits
//! for that task at shutdown as for its own. Whoever claims first runs it exactly once. With
//! `[telemetry]` a decision is a span naming its surface and decider, the approved calls running
//! under it (docs/rules.md OPS-82). What waits for a person is listed by [`pending`]; approvals
//! nobody waits for are run by the [`worker`].

mod approvers;
pub mod escalations;
pub mod pending;
pub mod worker;

use std::sync::Arc;

use airlock_egress::trace::{child_span, within, within_owned};
use airlock_ledger::Resolution;
use airlock_ledger::{
    Decision, Grant, Invocation, InvocationId, InvocationState, LedgerError, Store,
};
use airlock_spec::{Mode, Scope, ScopeId, SourceKind, ToolSpec};
use opentelemetry::trace::{SpanKind, Status, TraceContextExt as _};
use opentelemetry::{Context, KeyValue};

use crate::freeze::{self, Covered};
use crate::gateway::{EVENTS, Gateway, GatewayError};

/// Records `decision` on `id` by `decider`, taken on `surface` (`api`, `cli`, `mcp`); an
/// approved row is then run in the background, on the gateway's tracked tasks.
///
/// # Errors
/// The ledger's refusal: a second decision (naming the first), a wrong state, an expired row.
pub async fn decide(
    gateway: &Arc<Gateway>,
    id: InvocationId,
    decider: &str,
    decision: Decision,
    surface: &'static str,
) -> Result<Invocation, GatewayError> {
    let cx = span(gateway, Some(id), decider, &decision, surface);
    let checked = record_checked(gateway, id, decider, decision, surface);
    let row = refused(cx.as_ref(), within(cx.as_ref(), checked).await)?;
    run_if_approved(gateway, &row, cx);
    Ok(row)
}

/// Records `decision` judged as [`decide`] judges it, with the gateway's declarations (a
/// freeze on the call's connection, an edit's arguments: DECIDE-21), without running an
/// approved call: for a surface that runs no tool (the CLI), whose approval a serving
/// process's worker runs (DECIDE-12).
///
/// # Errors
/// As [`decide`].
pub async fn record_checked(
    gateway: &Gateway,
    id: InvocationId,
    decider: &str,
    decision: Decision,
    surface: &'static str,
) -> Result<Invocation, GatewayError> {
    if let Decision::Edit { arguments } = &decision {
        gateway.judge_edit(id, arguments).await?;
    }
    let judged = Judged {
        declarations: Some(gateway),
        scopes: &[],
    };
    let store = gateway.store().as_ref();
    Ok(record_judged(store, id, decider, decision, surface, judged).await?)
}

/// One decision — approve, or deny with a reason — on several waiting calls (docs/rules.md
/// DECIDE-19), by `decider` on `surface`: each call is judged as [`decide`] judges one (a
/// freeze, a supplied connection), then all are decided in one commit or none is. Approved
/// calls then run as after [`decide`]; an agent run waiting on them resumes once, since they
/// changed together.
///
/// # Errors
/// The first refusal, naming its call; nothing was decided.
pub async fn decide_all(
    gateway: &Arc<Gateway>,
    ids: Vec<InvocationId>,
    decider: &str,
    decision: Decision,
    surface: &'static str,
) -> Result<Vec<Invocation>, GatewayError> {
    let cx = span(gateway, None, decider, &decision, surface);
    let deciding = judge_and_decide_all(gateway, ids, decider, &decision);
    let rows = refused(cx.as_ref(), within(cx.as_ref(), deciding).await)?;
    for row in &rows {
        decided(row, decider, &decision, surface);
        run_if_approved(gateway, row, cx.clone());
    }
    Ok(rows)
}

/// Judges each of `ids`, then decides them all in one commit.
async fn judge_and_decide_all(
    gateway: &Gateway,
    ids: Vec<InvocationId>,
    decider: &str,
    decision: &Decision,
) -> Result<Vec<Invocation>, LedgerError> {
    let store = gateway.store().as_ref();
    let judged = Judged {
        declarations: Some(gateway),
        scopes: &[],
    };
    for &id in &ids {
        approvers::refuse_in_batch(store, id, &judged).await?;
        if let Some(reason) = refusal(store, id, decision, &judged).await? {
            return Err(LedgerError::DecisionRefused { id, reason });
        }
    }
    store.decide_all(ids, decider, decision.clone()).await
}

/// Approves `id` by `decider` and grants later calls of its principal through as `grant`
/// bounds them (docs/rules.md POLICY-62), judged as an approval is (a freeze, a supplied
/// connection); refused for a call whose tool names its approvers, since one person's grant
/// cannot stand for them. The approved call then runs as after [`decide`], under the same
/// `decide approve` span (OPS-82).
///
/// # Errors
/// The refusal, as [`decide`]'s; nothing was decided.
pub async fn grant(
    gateway: &Arc<Gateway>,
    id: InvocationId,
    decider: &str,
    grant: Grant,
    surface: &'static str,
) -> Result<Invocation, GatewayError> {
    let cx = span(gateway, Some(id), decider, &Decision::Approve, surface);
    let granting = judge_and_grant(gateway, id, decider, grant);
    let row = refused(cx.as_ref(), within(cx.as_ref(), granting).await)?;
    decided(&row, decider, &Decision::Approve, surface);
    run_if_approved(gateway, &row, cx);
    Ok(row)
}

/// Judges an approval of `id`, then approves it with `grant` in one commit.
async fn judge_and_grant(
    gateway: &Gateway,
    id: InvocationId,
    decider: &str,
    grant: Grant,
) -> Result<Invocation, LedgerError> {
    let store = gateway.store().as_ref();
    let judged = Judged {
        declarations: Some(gateway),
        scopes: &[],
    };
    approvers::refuse_in_batch(store, id, &judged).await?;
    if let Some(reason) = refusal(store, id, &Decision::Approve, &judged).await? {
        return Err(LedgerError::DecisionRefused { id, reason });
    }
    store.grant(id, decider, grant).await
}

/// An approved row runs in the background, on the gateway's tracked tasks — in the decision's
/// trace, under its span (`cx`).
fn run_if_approved(gateway: &Arc<Gateway>, row: &Invocation, cx: Option<Context>) {
    if row.state != InvocationState::Approved {
        return;
    }
    let (runner, id) = (Arc::clone(gateway), row.id);
    gateway.spawn_tracked(within_owned(cx, async move {
        if let Err(error) = runner.continue_approved(id).await {
            tracing::error!(%id, %error, "running an approved call failed");
        }
    }));
}

/// The span of a decision taken on a serving surface (docs/rules.md OPS-82): `decide {verb}`,
/// with the row's id (none for a batch), the verb, the surface and the decider — never a
/// reason, an answer or a note.
fn span(
    gateway: &Gateway,
    id: Option<InvocationId>,
    decider: &str,
    decision: &Decision,
    surface: &'static str,
) -> Option<Context> {
    let parent = gateway.trace_parent()?;
    let (verb, _) = verb(decision);
    let mut attributes = vec![
        KeyValue::new("airlock.decision", verb),
        KeyValue::new("airlock.decision.surface", surface),
        KeyValue::new("airlock.decision.by", decider.to_owned()),
    ];
    if let Some(id) = id {
        attributes.push(KeyValue::new("airlock.invocation.id", id.to_string()));
    }
    child_span(
        &parent,
        format!("decide {verb}"),
        SpanKind::Internal,
        attributes,
    )
}

/// `result` as it is; a refusal also marks the decision's span (`error.type`: the ledger's
/// error, else `refused`, as an edit the declarations refuse).
fn refused<T, E: Into<GatewayError>>(
    cx: Option<&Context>,
    result: Result<T, E>,
) -> Result<T, GatewayError> {
    let result = result.map_err(Into::into);
    if let (Some(cx), Err(error)) = (cx, &result) {
        let kind = match error {
            GatewayError::Ledger(e) => e.kind(),
            _ => "refused",
        };
        cx.span().set_attribute(KeyValue::new("error.type", kind));
        cx.span().set_status(Status::error(""));
    }
    result
}

/// A decision's verb, and a resolution's word.
fn verb(decision: &Decision) -> (&'static str, Option<&'static str>) {
    match decision {
        Decision::Approve => ("approve", None),
        Decision::Edit { .. } => ("edit", None),
        Decision::Deny { .. } => ("deny", None),
        Decision::Answer { .. } => ("answer", None),
        Decision::Resolve { resolution, .. } => ("resolve", Some(resolution.as_str())),
        Decision::Record { .. } => ("record", None),
        Decision::Withdraw => ("withdraw", None),
    }
}

/// The ledger transition of every decision, wherever it is taken (a process without a
/// gateway, like the CLI, too), logged once as `decided` (docs/rules.md OPS-11): who, what,
/// from which surface — never a reason's, an answer's or a note's text. `scopes` are the
/// declarations the surface knows (the CLI: its deployment's), which say who may decide a
/// call and how many must approve it (POLICY-61); none: the plain rules.
///
/// # Errors
/// The ledger's refusal, as [`decide`].
pub async fn record(
    store: &dyn Store,
    scopes: &[Scope],
    id: InvocationId,
    decider: &str,
    decision: Decision,
    surface: &'static str,
) -> Result<Invocation, LedgerError> {
    let judged = Judged {
        declarations: None,
        scopes,
    };
    record_judged(store, id, decider, decision, surface, judged).await
}

/// What a surface can tell of a row beyond the ledger's own columns.
struct Judged<'a> {
    /// The gateway whose declarations say which connection the row's tool goes through; none
    /// for a surface without them (the CLI).
    declarations: Option<&'a Gateway>,
    /// Declarations read without a gateway (the CLI's deployment).
    scopes: &'a [Scope],
}

impl Judged<'_> {
    /// The declaration of `tool` in `scope`, as this surface knows it.
    fn tool(&self, scope: &ScopeId, tool: &str) -> Option<&ToolSpec> {
        match self.declarations {
            Some(gateway) => gateway.scope(scope)?.get(tool),
            None => self.scopes.iter().find(|s| &s.id == scope)?.get(tool),
        }
    }
}

async fn record_judged(
    store: &dyn Store,
    id: InvocationId,
    decider: &str,
    decision: Decision,
    surface: &'static str,
    judged: Judged<'_>,
) -> Result<Invocation, LedgerError> {
    if let Some(reason) = refusal(store, id, &decision, &judged).await? {
        return Err(LedgerError::DecisionRefused { id, reason });
    }
    let row = approvers::take(store, id, decider, &decision, &judged).await?;
    decided(&row, decider, &decision, surface);
    Ok(row)
}

/// Why a surface refuses `decision` on `id` before the ledger sees it: a freeze covers the
/// call, or an approval would run a proposal through a connection its caller supplied.
async fn refusal(
    store: &dyn Store,
    id: InvocationId,
    decision: &Decision,
    judged: &Judged<'_>,
) -> Result<Option<String>, LedgerError> {
    if let Some(reason) = frozen_refusal(store, id, decision, judged).await? {
        return Ok(Some(reason));
    }
    if matches!(decision, Decision::Edit { .. }) && judged.declarations.is_none() {
        // DECIDE-21: only a surface holding the tool's declaration can check an edit.
        return Ok(Some(
            "edited arguments are checked against the tool's declaration, which this surface \
             does not hold"
                .to_owned(),
        ));
    }
    if matches!(decision, Decision::Approve | Decision::Edit { .. }) {
        return supplied_refusal(store, id).await;
    }
    Ok(None)
}

/// The `decided` event (OPS-11) and the decisions counter (OPS-29) of one decided row.
fn decided(row: &Invocation, decider: &str, decision: &Decision, surface: &'static str) {
    let (what, resolution) = verb(decision);
    let id = row.id;
    tracing::info!(
        target: EVENTS,
        %id,
        tool = row.tool,
        by = decider,
        decision = what,
        resolution,
        state = row.state.as_str(),
        surface,
        "decided"
    );
    // OPS-29: counted by the process that took it (a CLI decision: the CLI's own process).
    metrics::counter!("airlock_decisions_total", "surface" => surface, "decision" => what)
        .increment(1);
}

/// Why `decision` on `id` is refused while a freeze covers the call, judged with the gateway's
/// declarations (the connection too): for a surface that decides through its own ledger
/// transition, such as a client confirming its own call (POLICY-54).
///
/// # Errors
/// The ledger's.
pub(crate) async fn frozen(
    gateway: &Gateway,
    id: InvocationId,
    decision: &Decision,
) -> Result<Option<String>, GatewayError> {
    let judged = Judged {
        declarations: Some(gateway),
        scopes: &[],
    };
    Ok(frozen_refusal(gateway.store().as_ref(), id, decision, &judged).await?)
}

/// Why `decision` on `id` is refused while a freeze covers the call (docs/rules.md POLICY-54):
/// a decision that could let it run or settle it as run waits until the freeze is lifted; a
/// denial, a withdrawal or giving an in-doubt call up only stops it, and is taken. The
/// freezes are read from the ledger, not a process's copy, so the CLI judges them as a
/// serving replica does; a connection freeze is judged where the declarations are known (the
/// serving surfaces), and a serving gateway never runs an approved call it covers.
async fn frozen_refusal(
    store: &dyn Store,
    id: InvocationId,
    decision: &Decision,
    judged: &Judged<'_>,
) -> Result<Option<String>, LedgerError> {
    let stops = matches!(
        decision,
        Decision::Deny { .. }
            | Decision::Withdraw
            | Decision::Resolve {
                resolution: Resolution::Abandoned,
                ..
            }
    );
    if stops {
        return Ok(None);
    }
    let freezes = store.freezes().await?;
    if freezes.is_empty() {
        return Ok(None);
    }
    let row = store.get(id).await?;
    let opened = store.get_session(row.session_id).await?;
    let scope = crate::session::scope(&opened);
    let spec = scope.as_ref().and_then(|s| judged.tool(s, &row.tool));
    let covered = Covered {
        agent: scope.as_ref().and_then(freeze::agent_of),
        principal: row.principal.as_deref(),
        tool: &row.tool,
        connection: spec.and_then(|s| s.source.connection()),
    };
    Ok(freeze::covering(&freezes, &covered).map(|f| {
        format!(
            "{}; decisions that would let the call run wait until it is lifted (`airlock unfreeze`)",
            freeze::describe(f)
        )
    }))
}

/// Why approving `id` is refused, when it is a proposal of a run whose caller supplied
/// connections (docs/rules.md AGENT-64): the caller's credential is not kept, and airlock never
/// runs the call against `airlock.toml`'s connection of the same name instead — so the caller,
/// who holds the credential, runs it and records the outcome (DECIDE-13). Only api and MCP
/// proposals go through a connection; a proposal of any other kind is approved as usual.
async fn supplied_refusal(
    store: &dyn Store,
    id: InvocationId,
) -> Result<Option<String>, LedgerError> {
    let row = store.get(id).await?;
    let through_connection = matches!(row.source_kind, SourceKind::Api | SourceKind::Mcp);
    let Some(run) = row
        .run_id
        .filter(|_| row.mode == Mode::Propose && through_connection)
    else {
        return Ok(None);
    };
    let names = crate::execute::SuppliedNames::of(store, run).await?;
    if names.is_empty() {
        return Ok(None);
    }
    let names = names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ");
    Ok(Some(format!(
        "its run's caller supplied the connection ({names}) it would run through, and airlock \
         keeps no supplied credential nor sends the call to another connection: the caller runs \
         it and records the outcome (`POST /v1/invocations/{id}/record`)"
    )))
}
