//! What a run stores about itself and how it is read back: the details kept beside the run's
//! status ([`Detail`]), the definitions snapshot it started with ([`Snapshot`], docs/rules.md
//! AGENT-14), the drift of the deployment since (AGENT-15), and the [`RunReport`] built from
//! the ledger alone — so a report reads the same in any process, after any restart.
//!
//! Guarantees: nothing stored here holds a supplied connection or its credential.

use crate::execute::SuppliedNames;
use std::collections::{BTreeMap, HashMap};

use airlock_ledger::{Invocation, LedgerError, RunDetail, RunId, Store};
use airlock_model::{ToolDef, Usage};
use airlock_spec::{Scope, ToolSource, ToolSpec};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::types::{Drift, Proposal, ProposalDecision, RunInvocation, RunReport, RunState};

/// What a run keeps besides its status (the `detail` JSON of its ledger row).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Detail {
    /// What the person asked.
    pub(super) input: String,
    /// Extra context shown with it.
    pub(super) context: Option<Value>,
    /// The caller.
    pub(super) principal: Option<String>,
    /// The groups of a caller authenticated by a token (`None`: the operator's CLI, or a run
    /// stored before groups were): what `[[access]]` holds the run's calls to (POLICY-47).
    #[serde(default)]
    pub(super) groups: Option<Vec<String>>,
    /// Whether the caller receives proposals.
    pub(super) proposals_enabled: bool,
    /// The run at the top of the tree: its calls carry this id.
    pub(super) root: RunId,
    /// For a run below the root: the name of the root's sub-agent it runs under (AGENT-22).
    pub(super) via: Option<String>,
    /// Tokens spent by this run's turns and its settled sub-agents'.
    pub(super) usage: Usage,
    /// Wall-clock time spent running (parked time excluded), over every resume.
    pub(super) elapsed_ms: u64,
    /// The model's answer.
    pub(super) answer: Option<String>,
    /// Why it failed.
    pub(super) error: Option<String>,
    /// The names of the connections its caller supplied (AGENT-63).
    #[serde(flatten)]
    pub(super) supplied: SuppliedNames,
}

impl Detail {
    /// The details of `run` as the ledger stores them.
    pub(super) fn row(
        &self,
        run: RunId,
        parent: Option<(RunId, String)>,
    ) -> Result<RunDetail, LedgerError> {
        let detail = serde_json::to_value(self).map_err(|e| LedgerError::Invalid(e.to_string()))?;
        Ok(RunDetail {
            run_id: run,
            parent,
            detail,
        })
    }

    /// The stored details of `run`.
    pub(super) async fn load(
        store: &dyn Store,
        run: RunId,
    ) -> Result<(Self, Option<RunId>), LedgerError> {
        let row = store
            .run_detail(run)
            .await?
            .ok_or(LedgerError::RunNotFound(run))?;
        let detail = serde_json::from_value(row.detail)
            .map_err(|e| LedgerError::Invalid(format!("stored run detail: {e}")))?;
        Ok((detail, row.parent.map(|(parent, _)| parent)))
    }
}

/// One tool of a run's snapshot: what the model was offered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct SnapshotTool {
    pub(super) name: String,
    pub(super) description: String,
    pub(super) input_schema: Value,
    /// The agent it asks, for a sub-agent tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) sub_agent: Option<String>,
}

/// The definitions a run started with (AGENT-14): offered to the model on every step, resumes
/// included, whatever the deployment serves by then.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Snapshot {
    pub(super) tools: Vec<SnapshotTool>,
}

impl Snapshot {
    /// The snapshot of `scope` as it is now.
    pub(super) fn of(scope: &Scope) -> Self {
        let tools = scope.tools().iter().map(snapshot_tool).collect();
        Self { tools }
    }

    /// Read back from the run's row.
    pub(super) fn read(value: &Value) -> Result<Self, LedgerError> {
        serde_json::from_value(value.clone())
            .map_err(|e| LedgerError::Invalid(format!("stored definitions snapshot: {e}")))
    }

    pub(super) fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    pub(super) fn tool(&self, name: &str) -> Option<&SnapshotTool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The tools as the model sees them.
    pub(super) fn tool_defs(&self) -> Vec<ToolDef> {
        self.tools
            .iter()
            .map(|t| ToolDef {
                name: t.name.clone(),
                description: t.description.clone(),
                input_schema: t.input_schema.clone(),
            })
            .collect()
    }

    /// How `scope` (the deployment now) differs from the snapshot, if it does.
    pub(super) fn drift(&self, scope: Option<&Scope>) -> Option<Drift> {
        let now: BTreeMap<String, SnapshotTool> = scope
            .map(|s| {
                s.tools()
                    .iter()
                    .map(snapshot_tool)
                    .map(|t| (t.name.clone(), t))
                    .collect()
            })
            .unwrap_or_default();
        let then: BTreeMap<&str, &SnapshotTool> =
            self.tools.iter().map(|t| (t.name.as_str(), t)).collect();
        let removed: Vec<String> = then
            .keys()
            .filter(|n| !now.contains_key(**n))
            .map(|n| (*n).to_owned())
            .collect();
        let added: Vec<String> = now
            .keys()
            .filter(|n| !then.contains_key(n.as_str()))
            .cloned()
            .collect();
        let changed: Vec<String> = now
            .iter()
            .filter(|(n, t)| then.get(n.as_str()).is_some_and(|old| **old != **t))
            .map(|(n, _)| n.clone())
            .collect();
        let drifted = !(removed.is_empty() && added.is_empty() && changed.is_empty());
        drifted.then_some(Drift {
            removed,
            added,
            changed,
        })
    }
}

fn snapshot_tool(spec: &ToolSpec) -> SnapshotTool {
    let sub_agent = match &spec.source {
        ToolSource::Agent(name) => Some(name.clone()),
        _ => None,
    };
    SnapshotTool {
        name: spec.definition.name.to_string(),
        description: spec.definition.description.clone(),
        input_schema: spec.definition.input_schema.clone(),
        sub_agent,
    }
}

/// The call id of call `index` of `step` of `run`: unique in the session, the same on every
/// replay, so a resumed run finds the rows it recorded instead of recording them again.
pub(super) fn call_id(run: RunId, step: u32, index: usize) -> String {
    format!("{run}:{step}:{index}")
}

/// The run a call id (see [`call_id`]) belongs to.
fn run_of_call(call_id: &str) -> Option<RunId> {
    call_id.split(':').next()?.parse().ok()
}

/// The report of `run`, read from the ledger. `scopes` finds a run's agent scope as the
/// deployment serves it now (for the proposals' targets and the drift).
pub(super) async fn report(
    store: &dyn Store,
    run: RunId,
    scopes: &(dyn Fn(&str) -> Option<Scope> + Sync),
    words: &super::YesWords,
) -> Result<RunReport, LedgerError> {
    let row = store.get_run(run).await?;
    let held = store.held_confirmation(row.session_id).await?;
    let confirmation = held
        .filter(|h| h.run_id == run && h.granted_run.is_none())
        .map(|h| super::ConfirmationNotice::of(&h, words));
    let (detail, _) = Detail::load(store, run).await?;
    let rows = store.run_invocations(detail.root).await?;
    let tree = Tree::read(store, &rows).await?;
    let mine: Vec<&Invocation> = rows
        .iter()
        .filter(|r| tree.under(&r.call_id, run))
        .collect();
    let proposals = mine
        .iter()
        .filter(|r| r.is_proposal())
        .map(|r| proposal(r, tree.via(&r.call_id), &tree, scopes))
        .collect();
    let snapshot = Snapshot::read(&row.definitions_snapshot)?;
    Ok(RunReport {
        run_id: run,
        session_id: row.session_id,
        agent: row.agent.clone(),
        status: RunState::from_status(row.status),
        answer: detail.answer.clone(),
        error: detail.error.clone().or_else(|| failed_reason(&row)),
        steps: u32::try_from(store.run_steps(run).await?.len()).unwrap_or(u32::MAX),
        usage: detail.usage,
        proposals,
        invocations: mine.iter().map(|r| invocation(r)).collect(),
        waiting: mine
            .iter()
            .filter(|r| r.state.is_parked())
            .map(|r| r.id)
            .collect(),
        drift: snapshot.drift(scopes(&row.agent).as_ref()),
        confirmation,
    })
}

fn invocation(row: &Invocation) -> RunInvocation {
    RunInvocation {
        id: row.id,
        tool: row.tool.clone(),
        state: row.state.as_str(),
    }
}

/// The ledger's reason for a failed run (an expired approval), when the run's own is absent.
fn failed_reason(run: &airlock_ledger::Run) -> Option<String> {
    (run.status == airlock_ledger::RunStatus::Failed)
        .then(|| run.status_reason.clone())
        .flatten()
}

/// The runs of one tree that made calls, with their details: who is under whom, and via whom.
struct Tree {
    runs: HashMap<RunId, (Detail, Option<RunId>, String)>,
}

impl Tree {
    async fn read(store: &dyn Store, rows: &[Invocation]) -> Result<Self, LedgerError> {
        let mut runs = HashMap::new();
        let mut todo: Vec<RunId> = rows
            .iter()
            .filter_map(|r| run_of_call(&r.call_id))
            .collect();
        while let Some(id) = todo.pop() {
            if runs.contains_key(&id) {
                continue;
            }
            let (detail, parent) = Detail::load(store, id).await?;
            let agent = store.get_run(id).await?.agent;
            todo.extend(parent);
            runs.insert(id, (detail, parent, agent));
        }
        Ok(Self { runs })
    }

    /// Whether the call `call_id` was made by `run` or a run below it.
    fn under(&self, call_id: &str, run: RunId) -> bool {
        let mut at = run_of_call(call_id);
        // The tree is finite and acyclic (parents are written once, at creation).
        for _ in 0..=self.runs.len() {
            match at {
                Some(id) if id == run => return true,
                Some(id) => at = self.runs.get(&id).and_then(|(_, parent, _)| *parent),
                None => return false,
            }
        }
        false
    }

    fn via(&self, call_id: &str) -> Option<String> {
        let run = run_of_call(call_id)?;
        self.runs.get(&run).and_then(|(d, _, _)| d.via.clone())
    }

    fn agent(&self, call_id: &str) -> Option<&str> {
        let run = run_of_call(call_id)?;
        self.runs.get(&run).map(|(_, _, agent)| agent.as_str())
    }
}

/// A proposed row as its caller receives it (POLICY-9).
fn proposal(
    row: &Invocation,
    via: Option<String>,
    tree: &Tree,
    scopes: &(dyn Fn(&str) -> Option<Scope> + Sync),
) -> Proposal {
    let scope = tree.agent(&row.call_id).and_then(scopes);
    let source = scope
        .as_ref()
        .and_then(|s| s.get(&row.tool))
        .map(|t| t.source.clone());
    let (kind, target, operation) = match source {
        Some(ToolSource::Api(op)) => ("api", op.slug, op.operation),
        Some(ToolSource::McpInline(t)) => ("mcp", t.slug, t.remote_name),
        Some(ToolSource::Connection(t)) => ("mcp", t.namespace, t.remote_name),
        // The declaration is gone since: the row still says what was proposed.
        _ => ("api", String::new(), row.tool.clone()),
    };
    Proposal {
        id: row.id,
        tool: row.tool.clone(),
        kind,
        target,
        operation,
        arguments: row.arguments.clone(),
        approved_arguments: row.approved_arguments.clone(),
        via,
        state: row.state.as_str(),
        decision: row.decision.as_ref().map(|d| ProposalDecision {
            by: d.by.clone(),
            decision: d.decision.as_str(),
            reason: d.reason.clone(),
        }),
    }
}
