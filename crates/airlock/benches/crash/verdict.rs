//! The checks, from the ledger's rows (read straight from its database) and the upstream's
//! record of every `tools/call` it was sent: no at-most-once call executed twice, no
//! acknowledged call without a row, no approval used twice, no row left open once leases have
//! run out and the sweepers had their turn. Calls in doubt are fine, and counted.

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
}

/// A ledger's database, read directly.
pub(crate) enum Db {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

type Tuple = (String, String, String, i64, Option<String>);
const ROWS: &str = "SELECT id, arguments, state, attempts, decision FROM invocations";
/// States a row must have left once its lease ran out and the sweepers ran.
const OPEN: &[&str] = &["pending", "approved", "running"];

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

    /// Every invocation row, or `None` while the database does not answer.
    pub(crate) async fn rows(&self) -> Option<Vec<Row>> {
        let tuples: Vec<Tuple> = match self {
            Self::Sqlite(pool) => sqlx::query_as(ROWS).fetch_all(pool).await.ok()?,
            Self::Postgres(pool) => sqlx::query_as(ROWS).fetch_all(pool).await.ok()?,
        };
        Some(tuples.into_iter().map(row).collect())
    }

    /// Waits (bounded by `within`) until no row is open; the rows as read last.
    pub(crate) async fn settled(&self, within: Duration) -> Vec<Row> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let rows = self.rows().await;
            let open = rows
                .as_ref()
                .is_none_or(|rows| rows.iter().any(|r| OPEN.contains(&r.state.as_str())));
            if !open || tokio::time::Instant::now() >= deadline {
                if let Some(rows) = rows {
                    return rows;
                }
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

fn row((id, arguments, state, attempts, decision): Tuple) -> Row {
    let arguments: Value = serde_json::from_str(&arguments).unwrap_or(Value::Null);
    Row {
        id,
        n: arguments["n"].as_u64(),
        state,
        attempts,
        decision,
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
}

impl Verdict {
    pub(crate) fn passed(&self) -> bool {
        self.duplicates.is_empty()
            && self.lost.is_empty()
            && self.approvals_twice.is_empty()
            && self.stuck.is_empty()
    }
}

/// Compares the ledger's `rows` with the upstream's `seen` requests and the clients' `acked`
/// calls (every tool of the harness is at most once).
pub(crate) fn check(
    rows: &[Row],
    seen: &[airlock_testkit::Seen],
    acked: &BTreeMap<u64, bool>,
) -> Verdict {
    let mut by_n: HashMap<u64, usize> = HashMap::new();
    let mut by_key: HashMap<String, usize> = HashMap::new();
    let calls = seen.iter().filter(|s| s.method == "tools/call");
    for call in calls {
        let params = &call.body["params"];
        if let Some(n) = params["arguments"]["n"].as_u64() {
            *by_n.entry(n).or_default() += 1;
        }
        if let Some(key) = params["_meta"]["airlock/idempotency_key"].as_str() {
            *by_key.entry(key.to_owned()).or_default() += 1;
        }
    }
    let mut verdict = Verdict {
        rows: rows.len(),
        executions: by_n.values().sum(),
        ..Verdict::default()
    };
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
        if row.decision.as_deref() == Some("approved") && (ran > 1 || row.attempts > 1) {
            let (id, attempts) = (&row.id, row.attempts);
            verdict
                .approvals_twice
                .push(format!("{id}: sent {ran} times, {attempts} claims"));
        }
        match row.state.as_str() {
            "in_doubt" => verdict.in_doubt += 1,
            "awaiting_approval" => verdict.waiting += 1,
            state if OPEN.contains(&state) => verdict.stuck.push(format!("{} {state}", row.id)),
            _ => {}
        }
    }
    verdict
}
