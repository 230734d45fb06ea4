//! What an MCP client sees of a tool and of a row: the descriptor a `tools/list` shows, and the
//! call an outcome becomes, rendered from the row's typed settlement (docs/rules.md MCP-33,
//! MCP-34). Hints come from airlock's own declarations, never from an upstream's.

use airlock_ledger::{APPROVAL_EXPIRED, DecisionKind, Invocation, InvocationState};
use airlock_ledger::{Settlement, SourceKind};
use airlock_mcp::{HostCall, HostOutcome, ParkedStatus, ToolDescriptor};
use airlock_spec::{Approval, Builtin, Effect, Mode, ToolSource, ToolSpec};
use serde_json::{Map, Value, json};
use time::format_description::well_known::Rfc3339;

use crate::gateway::task_failure;
use crate::outcome::{Outcome, OutcomeKind};

/// Hints from airlock's own declarations, never copied from an upstream's hints.
pub(super) fn descriptor(spec: &ToolSpec) -> ToolDescriptor {
    // (read-only, destructive)
    let (read_only, destructive) = match &spec.source {
        // Declared with a required `writes`.
        ToolSource::Api(_) | ToolSource::McpInline(_) | ToolSource::Integration(_) => {
            (!spec.policy.writes, spec.policy.writes)
        }
        ToolSource::Builtin(Builtin::Fetch) => (true, false),
        // Asking a person changes nothing outside, but it is not a read either.
        ToolSource::Builtin(Builtin::AskHuman) => (false, false),
        // A connection file does not say what its tools do, nor a sub-agent what its tools
        // will, and a local tool's policy only defaults `writes` (nothing makes code declare
        // it): assume they may write.
        ToolSource::Connection(_) | ToolSource::Agent(_) | ToolSource::Local => (false, true),
    };
    let input_schema = match &spec.definition.input_schema {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    ToolDescriptor {
        name: spec.definition.name.to_string(),
        description: spec.definition.description.clone(),
        input_schema,
        read_only,
        destructive,
        idempotent: read_only || spec.policy.effect == Effect::Idempotent,
        output_schema: output_schema(spec),
    }
}

/// A connection tool's discovered `outputSchema`, listed only when its calls answer with the
/// tool's own result (MCP-34): a client holds a non-error result to the schema, and the parked
/// payload of a gated or proposing tool is not shaped like it.
fn output_schema(spec: &ToolSpec) -> Option<Map<String, Value>> {
    let ToolSource::Connection(tool) = &spec.source else {
        return None;
    };
    let answers_itself =
        spec.policy.approval == Approval::Never && spec.policy.mode == Mode::Execute;
    match &tool.output_schema {
        Some(Value::Object(schema)) if answers_itself => Some(schema.clone()),
        _ => None,
    }
}

pub(super) fn time(t: Option<time::OffsetDateTime>) -> Option<String> {
    t.and_then(|t| t.format(&Rfc3339).ok())
}

/// What an MCP client sees of a row.
fn host_outcome(outcome: &Outcome) -> HostOutcome {
    let row = outcome.invocation();
    match outcome.kind() {
        OutcomeKind::Completed => match task_failure(row) {
            Some(message) => HostOutcome::TaskFailed { message: message.to_owned() },
            None => completed(row),
        },
        OutcomeKind::Denied if is_withdrawn(row) => HostOutcome::Withdrawn,
        OutcomeKind::Denied => {
            let reason = row.settlement().and_then(|s| s.denied_reason());
            HostOutcome::Denied { reason: reason.unwrap_or("denied").to_owned() }
        }
        OutcomeKind::Expired => HostOutcome::Expired { reason: APPROVAL_EXPIRED.to_owned() },
        OutcomeKind::Abandoned => {
            let reason = match row.settlement() {
                Some(Settlement::Abandoned { reason }) => reason,
                _ => "abandoned",
            };
            HostOutcome::Abandoned { reason: reason.to_owned() }
        }
        OutcomeKind::InputRequired => input_required(row),
        OutcomeKind::Proposed => HostOutcome::Refused {
            message: "not executed: this tool only proposes writes for approval, and a call through the MCP endpoint cannot propose (nobody would receive the proposal)".to_owned(),
        },
        OutcomeKind::Parked => {
            let status = match row.state {
                InvocationState::InDoubt => ParkedStatus::InDoubt,
                InvocationState::AwaitingAnswer => ParkedStatus::AwaitingAnswer,
                InvocationState::AwaitingCredential => ParkedStatus::AwaitingCredential,
                InvocationState::AwaitingApproval => ParkedStatus::AwaitingApproval,
                _ => ParkedStatus::Running,
            };
            // The row's own policy: a call over an approval limit was recorded for an approver.
            let confirmable = row.approval == Approval::Caller;
            // What a call waiting for a credential says is how to provide it (CALL-12).
            let note = (status == ParkedStatus::AwaitingCredential)
                .then(|| row.error.as_ref().map(|e| e.message.clone()))
                .flatten();
            HostOutcome::Parked { status, invocation_id: row.id.to_string(), tool: row.tool.clone(), expires_at: time(row.expires_at), note, confirmable }
        }
    }
}

/// Withdrawn by its own caller.
fn is_withdrawn(row: &Invocation) -> bool {
    let decision = row.decision.as_ref().map(|d| d.decision);
    decision == Some(DecisionKind::Withdrawn)
}

/// The call as the endpoint sees it: the row's id and times, and its outcome.
pub(super) fn host_call(outcome: &Outcome) -> HostCall {
    let row = outcome.invocation();
    HostCall {
        invocation_id: row.id.to_string(),
        created_at: time(Some(row.created_at)).unwrap_or_default(),
        updated_at: time(Some(row.updated_at)).unwrap_or_default(),
        decided_by: decided_by(row),
        approved_arguments: row.approved_arguments.clone(),
        outcome: host_outcome(outcome),
        task_input: None,
    }
}

/// Who settled the row last: the operator who resolved (or abandoned) an in-doubt call, else
/// the decider; nobody for an expired row, even one approved before it fell in doubt.
fn decided_by(row: &Invocation) -> Option<String> {
    if row.state == InvocationState::Expired {
        return None;
    }
    row.resolution
        .as_ref()
        .map(|r| r.by.clone())
        .or_else(|| row.decision.as_ref().map(|d| d.by.clone()))
}

/// A settled row (succeeded, failed or resolved) as the endpoint's result, rendered from the
/// typed settlement: a failure is `message (kind)`, an error result.
fn completed(row: &Invocation) -> HostOutcome {
    let failed = |text: String| HostOutcome::Completed {
        text,
        structured: None,
        content: Vec::new(),
        is_error: true,
    };
    match row.settlement() {
        Some(Settlement::Failed(e)) => failed(format!("{} ({})", e.message, e.kind)),
        None if row.state == InvocationState::Failed => failed("the call failed".to_owned()),
        // MCP results keep the upstream's text, structured content and content blocks as they
        // were (MCP-33); a row recorded before blocks were kept has its text alone.
        Some(Settlement::Succeeded(result)) if row.source_kind == SourceKind::Mcp => {
            HostOutcome::Completed {
                text: result["text"].as_str().unwrap_or_default().to_owned(),
                structured: result.get("structured").filter(|s| !s.is_null()).cloned(),
                content: result
                    .get("content")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
                is_error: false,
            }
        }
        Some(Settlement::Succeeded(result)) => value_result(result),
        // A row an operator resolved is shown as any other result: `{"resolved": note}`.
        Some(Settlement::Resolved { note, .. }) => value_result(&json!({ "resolved": note })),
        // Declined, expired, abandoned, input-required and proposed rows are never `Completed` (see
        // `Outcome::kind`).
        Some(
            Settlement::Denied { .. }
            | Settlement::Expired
            | Settlement::Abandoned { .. }
            | Settlement::InputRequired(_)
            | Settlement::Proposed { .. },
        )
        | None => HostOutcome::Completed {
            text: String::new(),
            structured: None,
            content: Vec::new(),
            is_error: false,
        },
    }
}

/// A JSON result: a string is its text, anything else its JSON (an object also structured).
fn value_result(result: &Value) -> HostOutcome {
    HostOutcome::Completed {
        text: result
            .as_str()
            .map_or_else(|| result.to_string(), str::to_owned),
        structured: result.is_object().then(|| result.clone()),
        content: Vec::new(),
        is_error: false,
    }
}

/// A row that ended needing input, as the endpoint relays it: the upstream's requests and its
/// own state, as the round stored them.
fn input_required(row: &Invocation) -> HostOutcome {
    let asked = match row.settlement() {
        Some(Settlement::InputRequired(result)) => result.get(airlock_ledger::INPUT_REQUIRED_KEY),
        _ => None,
    };
    let requests = asked
        .and_then(|a| a.get("inputRequests"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let upstream_state = asked
        .and_then(|a| a.get("requestState"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    HostOutcome::InputRequired {
        requests,
        upstream_state,
    }
}
