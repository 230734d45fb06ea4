//! The clients: each sends `tools/call`s of `free__echo` (ungated) and `gated__echo` (approval
//! always) with a unique argument `n` and a call key of its own (`crash-<n>`) to a random
//! replica, and sends the same call again — same key — to a random replica until it is
//! answered, as an MCP client whose server died would. A parked call is approved over the API
//! (again until a replica answers 200 or "already decided") and awaited on a random replica,
//! so the await, both workers and every restart race to run it. Every answer is an
//! acknowledgement: the ledger must hold that call afterwards.
//!
//! One more client starts agent runs of `runner` (a scripted model: one gated call of
//! `tenant_record`, a `POST` carrying the invocation's idempotency key, then the answer),
//! approves what a parked run waits for, and follows the run until it ends. A run start is
//! never sent twice (it has no key): an answered start is an acknowledged run.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use serde_json::{Value, json};

use super::{ADMIN, CLIENT};

/// How long one client keeps sending a call again before it gives up on it.
const GIVE_UP_AFTER: Duration = Duration::from_secs(120);
/// How long the run client follows one run (a run its dead replica drove waits for a takeover).
const FOLLOW_FOR: Duration = Duration::from_secs(15);
/// One request's deadline (a stopped replica holds it until it continues).
const REQUEST_DEADLINE: Duration = Duration::from_secs(10);

/// What the clients share and what they learned.
pub(crate) struct Traffic {
    addrs: Vec<String>,
    http: reqwest::Client,
    next: AtomicU64,
    stop: AtomicBool,
    /// Acknowledged calls: `n` → whether it was gated.
    pub(crate) acked: std::sync::Mutex<BTreeMap<u64, bool>>,
    /// Calls given up on (never answered within [`GIVE_UP_AFTER`]).
    pub(crate) abandoned: AtomicU64,
    /// Approvals that landed (answered 200).
    pub(crate) approved: AtomicU64,
    /// Acknowledged runs: run id → the status last read (`None`: never read after the start).
    pub(crate) runs: std::sync::Mutex<BTreeMap<String, Option<String>>>,
}

impl Traffic {
    pub(crate) fn new(addrs: Vec<String>) -> Arc<Self> {
        Arc::new(Self {
            addrs,
            http: reqwest::Client::builder()
                .timeout(REQUEST_DEADLINE)
                .build()
                .unwrap(),
            next: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            acked: std::sync::Mutex::default(),
            abandoned: AtomicU64::new(0),
            approved: AtomicU64::new(0),
            runs: std::sync::Mutex::default(),
        })
    }

    /// Starts `clients` clients seeded from `seed`.
    pub(crate) fn spawn(
        self: &Arc<Self>,
        clients: usize,
        seed: u64,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let mut tasks: Vec<_> = (0..clients as u64)
            .map(|i| {
                let traffic = Arc::clone(self);
                let rng = StdRng::seed_from_u64(seed.wrapping_add(i + 1));
                tokio::spawn(async move { traffic.client(rng).await })
            })
            .collect();
        let traffic = Arc::clone(self);
        let rng = StdRng::seed_from_u64(seed.wrapping_sub(1));
        tasks.push(tokio::spawn(async move { traffic.runner(rng).await }));
        tasks
    }

    /// Clients finish the call in hand and start no other.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// How many calls were started.
    pub(crate) fn started(&self) -> u64 {
        self.next.load(Ordering::SeqCst)
    }

    async fn client(&self, mut rng: StdRng) {
        while !self.stop.load(Ordering::SeqCst) {
            let n = self.next.fetch_add(1, Ordering::SeqCst);
            let gated = rng.random_bool(0.3);
            let tool = if gated { "gated__echo" } else { "free__echo" };
            let params = json!({
                "name": tool,
                "arguments": {"n": n},
                "_meta": {"io.airlock/call_key": format!("crash-{n}")}
            });
            let Some(result) = self.until_answered(&mut rng, params).await else {
                self.abandoned.fetch_add(1, Ordering::SeqCst);
                continue;
            };
            self.acked.lock().unwrap().insert(n, gated);
            let status = &result["structuredContent"];
            if status["status"] == "awaiting_approval"
                && let Some(id) = status["invocation_id"].as_str()
            {
                self.approve(&mut rng, id).await;
                let wait = json!({
                    "name": "airlock_await_decision",
                    "arguments": {"invocation_id": id, "wait_seconds": 2}
                });
                let addr = self.pick(&mut rng);
                let _ = self.rpc(&addr, &wait).await;
            }
        }
    }

    async fn runner(&self, mut rng: StdRng) {
        while !self.stop.load(Ordering::SeqCst) {
            let addr = self.pick(&mut rng);
            let Some(run) = self
                .post_json(
                    &addr,
                    "/v1/agents/runner/run",
                    CLIENT,
                    json!({"input": "go"}),
                )
                .await
            else {
                tokio::time::sleep(Duration::from_millis(rng.random_range(20..120))).await;
                continue;
            };
            let Some(id) = run["run_id"].as_str().map(str::to_owned) else {
                continue;
            };
            self.runs.lock().unwrap().insert(id.clone(), None);
            for waiting in run["waiting"].as_array().into_iter().flatten() {
                if let Some(waiting) = waiting.as_str() {
                    self.approve(&mut rng, waiting).await;
                }
            }
            self.follow(&mut rng, &id).await;
        }
    }

    /// Reads run `id` on random replicas until it ended (bounded); records its status.
    async fn follow(&self, rng: &mut StdRng, id: &str) {
        let deadline = tokio::time::Instant::now() + FOLLOW_FOR;
        while tokio::time::Instant::now() < deadline {
            let addr = self.pick(rng);
            let read = self
                .http
                .get(format!("http://{addr}/v1/runs/{id}"))
                .bearer_auth(CLIENT)
                .send()
                .await;
            if let Ok(response) = read
                && let Ok(run) = response.json::<Value>().await
                && let Some(status) = run["status"].as_str()
            {
                self.runs
                    .lock()
                    .unwrap()
                    .insert(id.to_owned(), Some(status.to_owned()));
                if !matches!(status, "running" | "parked") {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(rng.random_range(50..200))).await;
        }
    }

    /// A JSON `POST` with bearer `token`; the body when answered 200.
    async fn post_json(&self, addr: &str, path: &str, token: &str, body: Value) -> Option<Value> {
        let response = self
            .http
            .post(format!("http://{addr}{path}"))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .ok()?;
        if response.status().as_u16() != 200 {
            return None;
        }
        response.json().await.ok()
    }

    fn pick(&self, rng: &mut StdRng) -> String {
        self.addrs[rng.random_range(0..self.addrs.len())].clone()
    }

    /// `tools/call` with `params`, sent again (same key) until some replica answers it.
    async fn until_answered(&self, rng: &mut StdRng, params: Value) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + GIVE_UP_AFTER;
        while tokio::time::Instant::now() < deadline {
            let addr = self.pick(rng);
            if let Some(result) = self.rpc(&addr, &params).await {
                return Some(result);
            }
            tokio::time::sleep(Duration::from_millis(rng.random_range(20..120))).await;
        }
        None
    }

    /// One `tools/call`; its result, or `None` for anything but a JSON-RPC result.
    async fn rpc(&self, addr: &str, params: &Value) -> Option<Value> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
        let response = self
            .http
            .post(format!("http://{addr}/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2025-11-25")
            .bearer_auth(CLIENT)
            .body(body.to_string())
            .send()
            .await
            .ok()?;
        if !response.status().is_success() {
            return None;
        }
        let reply: Value = serde_json::from_str(&response.text().await.ok()?).ok()?;
        reply.get("result").cloned()
    }

    /// Approves `id` through a random replica until one answers 200 or "already decided".
    async fn approve(&self, rng: &mut StdRng, id: &str) {
        let deadline = tokio::time::Instant::now() + GIVE_UP_AFTER;
        while tokio::time::Instant::now() < deadline {
            let addr = self.pick(rng);
            let sent = self
                .http
                .post(format!("http://{addr}/v1/invocations/{id}/approve"))
                .bearer_auth(ADMIN)
                .header("content-type", "application/json")
                .body("{}")
                .send()
                .await;
            match sent.map(|r| r.status().as_u16()) {
                Ok(200) => {
                    self.approved.fetch_add(1, Ordering::SeqCst);
                    return;
                }
                // Decided by an earlier attempt whose answer was lost, or expired.
                Ok(409 | 410) => return,
                _ => tokio::time::sleep(Duration::from_millis(rng.random_range(20..120))).await,
            }
        }
    }
}
