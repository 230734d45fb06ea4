//! Whether a call may be recorded as a proposal (docs/rules.md POLICY-10, POLICY-12): only from
//! an agent run whose caller receives proposals, with room left under the run's cap, and with
//! arguments under 16 KB. Otherwise the call is refused with a tool error and stored as failed —
//! never as a `proposed` row nobody could act on.

use airlock_ledger::RunId;
use airlock_spec::{Mode, ToolSpec};
use serde_json::Value;

use crate::error::{ToolError, ToolErrorKind};

/// Whether a call of an agent run may record a proposal (docs/rules.md POLICY-10, POLICY-12).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProposalRoom {
    /// The run's caller receives proposals and the run has room for one more.
    Open,
    /// The run (with its sub-agents) already holds the most proposals it may.
    Full,
    /// Nobody would receive a proposal (proposals disabled for the run, or no run at all).
    NoReceiver,
}

/// What a call made by an agent run carries besides its [`CallContext`](super::CallContext).
#[derive(Debug, Clone, Copy)]
pub struct RunCall {
    /// The run the call belongs to (for a sub-agent's call, the root run of its tree, so the
    /// root resumes only when nothing in the tree waits for a person).
    pub run: RunId,
    /// Whether a proposal may be recorded.
    pub proposals: ProposalRoom,
}

/// Most proposals one run holds, its sub-agents' included (docs/rules.md POLICY-10).
pub const MAX_PROPOSALS_PER_RUN: usize = 20;

/// Why a proposing tool refuses to record this call, as the tool error the model gets: no room
/// left, or nobody to receive it. The call is then stored as failed; no proposal row is left
/// that nobody could act on (POLICY-12).
pub(super) fn proposal_refusal(spec: &ToolSpec, room: ProposalRoom) -> Option<ToolError> {
    if spec.policy.mode != Mode::Propose {
        return None;
    }
    let message = match room {
        ProposalRoom::Open => return None,
        ProposalRoom::Full => format!(
            "not executed and not proposed: this run already holds {MAX_PROPOSALS_PER_RUN} proposals, the most it may"
        ),
        ProposalRoom::NoReceiver => "not executed and not proposed: this tool only proposes writes for a person's approval, and nobody on this channel receives proposals".to_owned(),
    };
    Some(ToolError::new(ToolErrorKind::Unavailable, message))
}

/// A proposal is returned to its caller whole, so its arguments are capped at 16 KB.
const MAX_PROPOSAL_BYTES: usize = 16 * 1024;

/// A proposal whose arguments are over [`MAX_PROPOSAL_BYTES`], as the tool error the model gets.
pub(super) fn oversized_proposal(spec: &ToolSpec, arguments: &Value) -> Option<ToolError> {
    if spec.policy.mode != Mode::Propose {
        return None;
    }
    let size = serde_json::to_string(arguments).map_or(usize::MAX, |s| s.len());
    (size > MAX_PROPOSAL_BYTES).then(|| {
        ToolError::new(
            ToolErrorKind::BadArguments,
            format!(
                "the proposal's arguments are {size} bytes as JSON; the limit is {MAX_PROPOSAL_BYTES}: nothing was proposed"
            ),
        )
    })
}
