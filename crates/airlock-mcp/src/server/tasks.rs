//! MCP Tasks over parked calls: the parked ledger row *is* the task, its invocation id the task
//! id, so a task outlives the request, the connection and the process that created it.
//!
//! Guarantees: one mapping from a [`HostCall`] to a task's status serves both wire shapes —
//! the 2025-11-25 experimental one (`legacy_tasks`) and the 2026-07-28 extension (SEP-2663,
//! built here on rmcp's types). A call waiting for a person (or running) is `working` with a
//! status message saying so; a withdrawn call is `cancelled`; a settled call is `completed`,
//! except that in the 2025 shape a tool error, a denial, an expired or an abandoned call is
//! `failed` (that revision's rule) while the 2026 extension keeps it `completed` with
//! `isError: true` (its rule). An expired or abandoned task says so in its status message in
//! both shapes, and its result carries `status: expired | abandoned`, so neither reads as a
//! denial. Tasks are kept as long as their rows (`ttl` null: unlimited). A call whose upstream
//! ran it as a task of its own that failed at the protocol level is `failed` with the error
//! inlined, in both shapes (MCP-78). A call whose upstream's task waits for the client's input
//! is `input_required` with those requests, as relayed (MCP-83).

use rmcp::ErrorData;
use rmcp::model::{
    ClientCapabilities, CreateTaskResult, DetailedTask, GetTaskResult, InputRequests, JsonObject,
    Task, TaskPayload, TaskStatus,
};
use serde_json::Value;

use super::convert::to_call_result;
use crate::host::{HostCall, HostOutcome, ParkedStatus};

/// How often a client should poll `tasks/get` while a person decides (milliseconds).
pub(super) const POLL_INTERVAL_MS: u64 = 2_000;

/// The refusal of a call to a tool its upstream runs only as a task, from a client that did not
/// declare the tasks extension (MCP-80): -32021 naming the extension, HTTP 400.
pub(super) fn required() -> ErrorData {
    ErrorData::missing_required_client_capability(
        ClientCapabilities::builder().enable_tasks().build(),
    )
}

/// The wire revision whose task rules apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Era {
    /// 2025-11-25, experimental tasks.
    V2025,
    /// 2026-07-28, the `io.modelcontextprotocol/tasks` extension.
    V2026,
}

/// A task's status and the message that goes with it.
pub(super) fn status(call: &HostCall, era: Era) -> (TaskStatus, Option<String>) {
    match &call.outcome {
        HostOutcome::Parked { status, .. } => (TaskStatus::Working, Some(waiting(*status))),
        HostOutcome::Withdrawn => (
            TaskStatus::Cancelled,
            Some("withdrawn by the caller; it did not run".to_owned()),
        ),
        HostOutcome::Completed {
            is_error: false, ..
        } => (TaskStatus::Completed, None),
        HostOutcome::Completed { text, .. } if era == Era::V2025 => {
            (TaskStatus::Failed, Some(text.clone()))
        }
        HostOutcome::Denied { reason } if era == Era::V2025 => {
            (TaskStatus::Failed, Some(format!("denied: {reason}")))
        }
        HostOutcome::Expired { .. } if era == Era::V2025 => {
            (TaskStatus::Failed, Some(EXPIRED.to_owned()))
        }
        HostOutcome::Abandoned { reason } if era == Era::V2025 => {
            (TaskStatus::Failed, Some(abandoned(reason)))
        }
        HostOutcome::Refused { message } if era == Era::V2025 => {
            (TaskStatus::Failed, Some(message.clone()))
        }
        HostOutcome::InputRequired { .. } if era == Era::V2025 => {
            (TaskStatus::Failed, Some(INPUT_ROUND.to_owned()))
        }
        HostOutcome::InputRequired { .. } => (TaskStatus::Completed, Some(INPUT_ROUND.to_owned())),
        HostOutcome::TaskFailed { message } => (TaskStatus::Failed, Some(message.clone())),
        // The 2026 extension keeps the task `completed` and inlines the call's own result,
        // which names the status; the message says it in words too.
        HostOutcome::Expired { .. } => (TaskStatus::Completed, Some(EXPIRED.to_owned())),
        HostOutcome::Abandoned { reason } => (TaskStatus::Completed, Some(abandoned(reason))),
        HostOutcome::Completed { .. }
        | HostOutcome::Denied { .. }
        | HostOutcome::Refused { .. } => (TaskStatus::Completed, None),
    }
}

/// The status message of a task whose round asked the client for input (MCP-68).
const INPUT_ROUND: &str = "input required: call the tool again to be asked";

/// The status message of an expired task.
const EXPIRED: &str = "expired: nobody decided before the approval expired; it did not run";

fn abandoned(reason: &str) -> String {
    format!("abandoned by a person while in doubt ({reason}); it will not run")
}

fn waiting(status: ParkedStatus) -> String {
    match status {
        ParkedStatus::AwaitingApproval => "awaiting a person's approval; nothing has run yet",
        ParkedStatus::AwaitingAnswer => "awaiting a person's answer",
        ParkedStatus::AwaitingCredential => {
            "awaiting its caller's credential for the connection it goes through; nothing has run yet"
        }
        ParkedStatus::InDoubt => "it is not known whether the call ran; a person must settle it",
        ParkedStatus::Running => "approved; running now",
    }
    .to_owned()
}

/// The task fields common to both shapes.
pub(super) fn task(call: &HostCall, era: Era) -> Task {
    let (status, message) = status(call, era);
    let task = Task::new(
        call.invocation_id.clone(),
        status,
        call.created_at.clone(),
        call.updated_at.clone(),
    )
    .with_poll_interval_ms(POLL_INTERVAL_MS);
    match message {
        Some(message) => task.with_status_message(message),
        None => task,
    }
}

/// The 2026 `CreateTaskResult` for a call that parked.
pub(super) fn created(call: &HostCall) -> CreateTaskResult {
    CreateTaskResult::new(task(call, Era::V2026))
}

/// The status message of a task whose upstream's task waits for the client's input (MCP-83).
const TASK_INPUT: &str = "input required: answer the inputRequests with tasks/update";

/// The 2026 `tasks/get` answer: the task, with the tool's result inlined once settled, or with
/// `asks`, the input requests its upstream's task waits on, as relayed.
pub(super) fn detailed(call: HostCall, asks: Option<InputRequests>) -> GetTaskResult {
    let mut task = task(&call, Era::V2026);
    if let Some(input_requests) = asks.filter(|_| task.status == TaskStatus::Working) {
        task.status = TaskStatus::InputRequired;
        task.status_message = Some(TASK_INPUT.to_owned());
        let payload = TaskPayload::InputRequired { input_requests };
        return GetTaskResult::new(DetailedTask::new(task, payload));
    }
    let payload = match (task.status, call.outcome) {
        (TaskStatus::Working | TaskStatus::InputRequired, _) => TaskPayload::Working,
        (TaskStatus::Cancelled, _) => TaskPayload::Cancelled,
        // A failed task inlines a JSON-RPC error, never a result (SEP-2663); airlock's code for
        // an upstream's failure is an internal error's.
        (_, HostOutcome::TaskFailed { message }) => TaskPayload::Failed {
            error: failure(&message),
        },
        (_, outcome) => TaskPayload::Completed {
            result: result_object(outcome),
        },
    };
    GetTaskResult::new(DetailedTask::new(task, payload))
}

/// The JSON-RPC error object of a failed task.
fn failure(message: &str) -> JsonObject {
    let error = ErrorData::internal_error(format!("the upstream's task failed: {message}"), None);
    match serde_json::to_value(error) {
        Ok(Value::Object(object)) => object,
        _ => JsonObject::new(),
    }
}

/// A settled outcome as the `tools/call` result object it stands for.
pub(super) fn result_object(outcome: HostOutcome) -> JsonObject {
    match serde_json::to_value(to_call_result(outcome)) {
        Ok(Value::Object(object)) => object,
        _ => JsonObject::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(outcome: HostOutcome) -> HostCall {
        HostCall {
            invocation_id: "i1".into(),
            created_at: "2026-01-01T00:00:00Z".into(),
            updated_at: "2026-01-01T00:00:01Z".into(),
            decided_by: None,
            approved_arguments: None,
            outcome,
            task_input: None,
        }
    }

    #[test]
    fn a_denial_is_failed_in_2025_and_completed_with_is_error_in_2026() {
        let denied = call(HostOutcome::Denied {
            reason: "no".into(),
        });
        assert_eq!(status(&denied, Era::V2025).0, TaskStatus::Failed);
        assert_eq!(status(&denied, Era::V2026).0, TaskStatus::Completed);
        let wire = serde_json::to_value(detailed(denied, None)).unwrap();
        assert_eq!(wire["status"], "completed");
        assert_eq!(wire["result"]["isError"], true);
        assert_eq!(wire["result"]["structuredContent"]["denied"], "no");
    }

    #[test]
    fn parked_is_working_with_a_message_and_withdrawn_is_cancelled() {
        let parked = call(HostOutcome::Parked {
            status: ParkedStatus::AwaitingApproval,
            invocation_id: "i1".into(),
            tool: "deploy".into(),
            expires_at: None,
            note: None,
            confirmable: false,
        });
        let (status_, message) = status(&parked, Era::V2026);
        assert_eq!(status_, TaskStatus::Working);
        assert!(message.unwrap().contains("approval"));
        let wire = serde_json::to_value(detailed(parked, None)).unwrap();
        assert!(wire.get("result").is_none(), "{wire}");
        assert_eq!(
            status(&call(HostOutcome::Withdrawn), Era::V2025).0,
            TaskStatus::Cancelled
        );
    }

    #[test]
    fn mcp_83_a_running_task_with_input_requests_is_input_required() {
        let running = || {
            call(HostOutcome::Parked {
                status: ParkedStatus::Running,
                invocation_id: "i1".into(),
                tool: "confirm_delete".into(),
                expires_at: None,
                note: None,
                confirmable: false,
            })
        };
        let asks: InputRequests = serde_json::from_value(serde_json::json!({
            "confirm": {"method": "roots/list", "params": {}}
        }))
        .unwrap();
        let wire = serde_json::to_value(detailed(running(), Some(asks.clone()))).unwrap();
        assert_eq!(wire["status"], "input_required", "{wire}");
        assert_eq!(wire["inputRequests"]["confirm"]["method"], "roots/list");
        assert_eq!(wire["statusMessage"], TASK_INPUT);
        let wire = serde_json::to_value(detailed(running(), None)).unwrap();
        assert_eq!(wire["status"], "working", "{wire}");
        let settled = call(HostOutcome::Withdrawn);
        let wire = serde_json::to_value(detailed(settled, Some(asks))).unwrap();
        assert_eq!(wire["status"], "cancelled", "{wire}");
        assert!(wire.get("inputRequests").is_none(), "{wire}");
    }

    #[test]
    fn expired_and_abandoned_tasks_say_so_in_both_shapes() {
        let expired = call(HostOutcome::Expired {
            reason: "approval expired".into(),
        });
        let abandoned = call(HostOutcome::Abandoned {
            reason: "vendor has no record".into(),
        });
        let (s, message) = status(&expired, Era::V2025);
        assert_eq!(s, TaskStatus::Failed);
        assert!(message.unwrap().starts_with("expired"));
        let (s, message) = status(&abandoned, Era::V2025);
        assert_eq!(s, TaskStatus::Failed);
        assert!(message.unwrap().contains("vendor has no record"));
        let wire = serde_json::to_value(detailed(expired, None)).unwrap();
        assert_eq!(wire["status"], "completed");
        assert_eq!(wire["result"]["isError"], true);
        assert_eq!(wire["result"]["structuredContent"]["status"], "expired");
        assert_eq!(
            wire["result"]["structuredContent"]["denied"],
            "approval expired"
        );
        let wire = serde_json::to_value(detailed(abandoned, None)).unwrap();
        assert_eq!(wire["result"]["structuredContent"]["status"], "abandoned");
        assert_eq!(
            wire["result"]["structuredContent"]["abandoned"],
            "vendor has no record"
        );
    }
}
