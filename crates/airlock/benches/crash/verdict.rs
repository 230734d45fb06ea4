//! The checks, from the ledger's rows (read straight from its database) and the upstream's
//! record of every `tools/call` it was sent: no at-most-once call executed twice, no
//! acknowledged call without a row, no approval used twice, no row left open once leases have
//! run out and the sweepers had their turn — nor an agent run left `running` (once its
//! driver's lease ran out another replica takes it over, AGENT-59) or `parked` with nothing to
//! decide, nor an acknowledged run without its row. Calls in doubt are fine, and counted.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde_json::Value;

/// One invocation row, as far as the checks need it.
pub(crate) struct Row {
    id: String,
    n: Option<u64>,
    state: String,
    attempts: i64,
    decision: Option<String>,
    /// The agent run it belongs to, if any.
    run: Option<String>,
}

/// A ledger's database, read directly.
pub(crate) enum Db {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

type Tuple = (String, String, String, i64, Option<String>, Option<String>);
const ROWS: &str = "SELECT id, arguments, state, attempts, decision, run_id FROM invocations";
/// States a row must have left once its lease ran out and the sweepers ran.
const OPEN: &[&str] = &["pending", "approved", "running"];
const RUNS: &str = "SELECT id, status FROM runs";

/// The ledger's rows: invocations, and runs (id, status).
pub(crate) struct Ledger {
    pub(crate) rows: Vec<Row>,
    pub(crate) runs: Vec<(String, String)>,
}

impl Ledger {
    /// Whether a row or a run may still move on its own: a row `pending`, `approved` or
    /// `running`, a run `running` (a run a dead replica drove is taken over once its lease ran
    /// out, docs/rules.md AGENT-59), or a parked run none of whose calls waits for a person.
    fn open(&self) -> bool {
        let waits = self.waiting_runs();
        self.rows.iter().any(|r| OPEN.contains(&r.state.as_str()))
            || self
                .runs
                .iter()
                .any(|(id, s)| s == "running" || (s == "parked" && !waits.contains(id.as_str())))
    }

    /// Runs with a call in doubt or undecided: they wait for a person, as the call does.
    fn waiting_runs(&self) -> std::collections::HashSet<&str> {
        self.rows
            .iter()
            .filter(|r| matches!(r.state.as_str(), "in_doubt" | "awaiting_approval"))
            .filter_map(|r| r.run.as_deref())
            .collect()
    }
}

impl Db {
    pub(crate) async fn open(database_url: &str) -> Self {
        if let Some(path) = database_url.strip_prefix("sqlite://") {
            let options = sqlx::sqlite::SqliteConnectOptions::new()
                .filename(path)
                .read_only(true);
            Self::Sqlite(sqlx::SqlitePool::connect_with(options).await.unwrap())
        } else {
            Self::Postgres(sqlx::PgPool::connect(database_url).await.unwrap())
        }
    }

    /// Every invocation row and run, or `None` while the database does not answer.
    async fn read(&self) -> Option<Ledger> {
        let (tuples, runs): (Vec<Tuple>, Vec<(String, String)>) = match self {
            Self::Sqlite(pool) => (
                sqlx::query_as(ROWS).fetch_all(pool).await.ok()?,
                sqlx::query_as(RUNS).fetch_all(pool).await.ok()?,
            ),
            Self::Postgres(pool) => (
                sqlx::query_as(ROWS).fetch_all(pool).await.ok()?,
                sqlx::query_as(RUNS).fetch_all(pool).await.ok()?,
            ),
        };
        let rows = tuples.into_iter().map(row).collect();
        Some(Ledger { rows, runs })
    }

    /// Waits (bounded by `within`) until no row or run is open; the ledger as read last.
    pub(crate) async fn settled(&self, within: Duration) -> Ledger {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let ledger = self.read().await;
            let open = ledger.as_ref().is_none_or(Ledger::open);
            if (!open || tokio::time::Instant::now() >= deadline)
                && let Some(ledger) = ledger
            {
                return ledger;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

fn row((id, arguments, state, attempts, decision, run): Tuple) -> Row {
    let arguments: Value = serde_json::from_str(&arguments).unwrap_or(Value::Null);
    Row {
        id,
        n: arguments["n"].as_u64(),
        state,
        attempts,
        decision,
        run,
    }
}

/// What the checks found.
#[derive(Default)]
pub(crate) struct Verdict {
    pub(crate) rows: usize,
    pub(crate) executions: usize,
    pub(crate) in_doubt: usize,
    pub(crate) waiting: usize,
    pub(crate) duplicates: Vec<String>,
    pub(crate) lost: Vec<u64>,
    pub(crate) approvals_twice: Vec<String>,
    pub(crate) stuck: Vec<String>,
    pub(crate) runs: usize,
    pub(crate) runs_completed: usize,
    pub(crate) lost_runs: Vec<String>,
}

impl Verdict {
    pub(crate) fn passed(&self) -> bool {
        self.duplicates.is_empty()
            && self.lost.is_empty()
            && self.lost_runs.is_empty()
            && self.approvals_twice.is_empty()
            && self.stuck.is_empty()
    }
}

/// Compares the ledger's rows with the upstream's `seen` requests and the clients' `acked`
/// calls and `runs` (every tool of the harness is at most once).
pub(crate) fn check(
    ledger: &Ledger,
    seen: &[airlock_testkit::Seen],
    acked: &BTreeMap<u64, bool>,
    runs: &BTreeMap<String, Option<String>>,
) -> Verdict {
    let rows = &ledger.rows;
    let mut by_n: HashMap<u64, usize> = HashMap::new();
    let mut by_key: HashMap<String, usize> = HashMap::new();
    for request in seen {
        let params = &request.body["params"];
        let key = if request.method == "tools/call" {
            if let Some(n) = params["arguments"]["n"].as_u64() {
                *by_n.entry(n).or_default() += 1;
            }
            params["_meta"]["airlock/idempotency_key"]
                .as_str()
                .map(str::to_owned)
        } else {
            // A run's api call: the key is its `Idempotency-Key` header, a quoted string.
            request
                .headers
                .get("idempotency-key")
                .and_then(|v| v.to_str().ok())
                .map(|v| v.trim_matches('"').to_owned())
        };
        if let Some(key) = key {
            *by_key.entry(key).or_default() += 1;
        }
    }
    let mut verdict = Verdict {
        rows: rows.len(),
        executions: by_key.values().sum(),
        runs: ledger.runs.len(),
        ..Verdict::default()
    };
    let run_ids: std::collections::HashSet<&str> =
        ledger.runs.iter().map(|(id, _)| id.as_str()).collect();
    verdict.lost_runs = runs
        .keys()
        .filter(|id| !run_ids.contains(id.as_str()))
        .cloned()
        .collect();
    let waits = ledger.waiting_runs();
    for (id, status) in &ledger.runs {
        match status.as_str() {
            "succeeded" => verdict.runs_completed += 1,
            // Its driver's lease ran out long ago: some replica should have taken it over.
            "running" => verdict
                .stuck
                .push(format!("run {id} left running after its lease ran out")),
            "parked" if !waits.contains(id.as_str()) => {
                verdict
                    .stuck
                    .push(format!("run {id} parked with nothing left to decide"));
            }
            _ => {}
        }
    }
    let mut duplicates: Vec<_> = by_n.iter().filter(|(_, c)| **c > 1).collect();
    duplicates.sort();
    verdict.duplicates = duplicates
        .into_iter()
        .map(|(n, c)| format!("n={n} ran {c} times"))
        .collect();
    let with_row: std::collections::HashSet<u64> = rows.iter().filter_map(|r| r.n).collect();
    verdict.lost = acked
        .keys()
        .filter(|n| !with_row.contains(n))
        .copied()
        .collect();
    for row in rows {
        let ran = by_key.get(&row.id).copied().unwrap_or(0);
        if ran > 1 && row.n.is_none() {
            verdict
                .duplicates
                .push(format!("{} (a run's call) ran {ran} times", row.id));
        }
        if row.decision.as_deref() == Some("approved") && (ran > 1 || row.attempts > 1) {
            let (id, attempts) = (&row.id, row.attempts);
            verdict
                .approvals_twice
                .push(format!("{id}: sent {ran} times, {attempts} claims"));
        }
        match row.state.as_str() {
            "in_doubt" => verdict.in_doubt += 1,
            "awaiting_approval" => verdict.waiting += 1,
            state if OPEN.contains(&state) => verdict
                .stuck
                .push(format!("{} {state} (run {:?})", row.id, row.run)),
            _ => {}
        }
    }
    verdict
}
