//! The clients of the rolling-upgrade test: MCP clients sending plain (`free__echo`, at most
//! once) and gated (`gated__echo`, approval always) calls, and one client starting agent runs
//! of `runner`, to the previous release's replica or the current one — each client has a home
//! replica and goes to the other only when its home does not answer (as a load balancer
//! draining a stopped replica would).
//!
//! Guarantees: every call carries a call key of its own (`upgrade-<n>`, MCP-22) and is sent
//! again under it, to either replica, until one answers, so a call lost with a stopping
//! replica's connection is the same call on the other — never a second one. Every answered call
//! and started run is recorded (an acknowledgement the ledger must hold afterwards), with the
//! replica that answered; gated calls and runs are decided on the old or the new replica by
//! turns, and every fourth gated call and every third run is left parked, for the new release
//! to decide once the old one is gone. A replica that does not answer while it is not being
//! stopped is a failure, recorded: going to the other replica must not hide an old release
//! that broke on the newer schema.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::replicas::{ADMIN, CLIENT};

/// How long a client keeps sending one call (or decision, or run start) again.
const GIVE_UP_AFTER: Duration = Duration::from_secs(60);
/// One request's deadline.
const REQUEST_DEADLINE: Duration = Duration::from_secs(15);
/// The replicas, by index: the previous release's and the current one's.
pub(crate) const OLD: usize = 0;
pub(crate) const NEW: usize = 1;

/// An acknowledged call.
#[derive(Clone, Debug)]
pub(crate) struct Acked {
    pub(crate) gated: bool,
    /// The replica that answered it.
    pub(crate) on: usize,
    /// The invocation id, when the answer named one (a parked call's does).
    pub(crate) id: Option<String>,
}

/// What the clients share and what they learned.
pub(crate) struct Load {
    addrs: [String; 2],
    http: reqwest::Client,
    next: AtomicU64,
    stop: AtomicBool,
    /// Set just before the old replica is sent SIGTERM: from then on it may not answer.
    old_stopping: AtomicBool,
    /// Requests a replica did not answer while it was not being stopped.
    pub(crate) failures: Mutex<Vec<String>>,
    /// Requests the old replica did not answer once it was being stopped (sent again to the
    /// new one).
    pub(crate) refused_by_old: AtomicU64,
    /// Acknowledged calls by their argument `n`.
    pub(crate) acked: Mutex<BTreeMap<u64, Acked>>,
    /// Started runs: run id → the invocation its start left waiting.
    pub(crate) runs: Mutex<BTreeMap<String, String>>,
    /// Decisions that landed, per replica (calls and runs' calls).
    pub(crate) decided: [AtomicU64; 2],
    /// Runs started, per replica.
    pub(crate) started: [AtomicU64; 2],
    /// Parked calls left for the new release (gated calls and runs' calls).
    pub(crate) left_parked: Mutex<Vec<String>>,
}

impl Load {
    pub(crate) fn new(old: &str, new: &str) -> Self {
        Self {
            addrs: [old.to_owned(), new.to_owned()],
            http: reqwest::Client::builder()
                .timeout(REQUEST_DEADLINE)
                .build()
                .unwrap(),
            next: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            old_stopping: AtomicBool::new(false),
            failures: Mutex::default(),
            refused_by_old: AtomicU64::new(0),
            acked: Mutex::default(),
            runs: Mutex::default(),
            decided: [AtomicU64::new(0), AtomicU64::new(0)],
            started: [AtomicU64::new(0), AtomicU64::new(0)],
            left_parked: Mutex::default(),
        }
    }

    /// Clients finish what they have in hand and start nothing else.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// The old replica is about to be stopped: it may stop answering.
    pub(crate) fn stopping_old(&self) {
        self.old_stopping.store(true, Ordering::SeqCst);
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Acknowledged calls and started runs so far.
    pub(crate) fn progress(&self) -> (usize, usize) {
        (
            self.acked.lock().unwrap().len(),
            self.runs.lock().unwrap().len(),
        )
    }

    /// An MCP client at home on replica `home`: calls until stopped.
    pub(crate) async fn client(&self, home: usize) {
        while !self.stopped() {
            let n = self.next.fetch_add(1, Ordering::SeqCst);
            let gated = n.is_multiple_of(3);
            let tool = if gated { "gated__echo" } else { "free__echo" };
            let (result, on) = self
                .until_answered(home, &format!("call n={n}"), |addr| call(addr, tool, n))
                .await
                .unwrap_or_else(|| panic!("call n={n} answered by no replica"));
            let status = &result["structuredContent"];
            let id = status["invocation_id"].as_str().map(str::to_owned);
            if gated {
                assert_eq!(status["status"], "awaiting_approval", "n={n}: {result}");
            } else {
                assert_ne!(result["isError"], true, "n={n}: {result}");
            }
            let acked = Acked {
                gated,
                on,
                id: id.clone(),
            };
            self.acked.lock().unwrap().insert(n, acked);
            if let Some(id) = id {
                self.decide_or_leave(n.is_multiple_of(4), n / 3, &id).await;
            }
        }
    }

    /// One client starting runs of `runner` on the old and the new replica by turns, until
    /// stopped; every third is left parked. Each start parks on the run's gated call.
    pub(crate) async fn runner(&self) {
        let mut r = 0u64;
        while !self.stopped() {
            let home = usize::from(r % 2 == 1);
            let (run, on) = self
                .until_answered(home, &format!("run {r}"), |addr| self.start_run(addr))
                .await
                .unwrap_or_else(|| panic!("run {r} started on no replica"));
            assert_eq!(run["status"], "parked", "run {r}: {run}");
            let id = run["run_id"].as_str().unwrap().to_owned();
            let waiting = run["waiting"][0].as_str().unwrap().to_owned();
            self.started[on].fetch_add(1, Ordering::SeqCst);
            self.runs.lock().unwrap().insert(id, waiting.clone());
            self.decide_or_leave(r.is_multiple_of(3), r, &waiting).await;
            r += 1;
        }
    }

    /// Leaves parked call `id` for the new release, or approves it on the old replica (`turn`
    /// even) or the new one (odd) — on the other when that one does not answer.
    async fn decide_or_leave(&self, leave: bool, turn: u64, id: &str) {
        if leave {
            self.left_parked.lock().unwrap().push(id.to_owned());
            return;
        }
        let home = usize::from(turn % 2 == 1);
        let (_, on) = self
            .until_answered(home, &format!("approve {id}"), |addr| {
                self.approve(addr, id)
            })
            .await
            .unwrap_or_else(|| panic!("{id} approved on no replica"));
        self.decided[on].fetch_add(1, Ordering::SeqCst);
    }

    /// `send` to replica `home`, then to the other, by turns until one answers (bounded); the
    /// answer and the replica that gave it. Each unanswered try of a replica not being stopped
    /// is recorded in [`Load::failures`] as `what`.
    async fn until_answered<'a, F, Fut>(
        &'a self,
        home: usize,
        what: &str,
        send: F,
    ) -> Option<(Value, usize)>
    where
        F: Fn(&'a str) -> Fut,
        Fut: Future<Output = Option<Value>>,
    {
        let deadline = tokio::time::Instant::now() + GIVE_UP_AFTER;
        let mut on = home;
        while tokio::time::Instant::now() < deadline {
            if let Some(answer) = send(&self.addrs[on]).await {
                return Some((answer, on));
            }
            if on == NEW || !self.old_stopping.load(Ordering::SeqCst) {
                let replica = if on == NEW { "new" } else { "old" };
                let failure = format!("{what}: no answer from the {replica} replica");
                self.failures.lock().unwrap().push(failure);
            } else {
                self.refused_by_old.fetch_add(1, Ordering::SeqCst);
            }
            on = 1 - on;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        None
    }

    /// A run of `runner`; its start's answer when 200.
    async fn start_run(&self, addr: &str) -> Option<Value> {
        let response = self
            .http
            .post(format!("http://{addr}/v1/agents/runner/run"))
            .bearer_auth(CLIENT)
            .header("content-type", "application/json")
            .body(json!({"input": "record"}).to_string())
            .send()
            .await
            .ok()?;
        if response.status().as_u16() != 200 {
            return None;
        }
        response.json().await.ok()
    }

    /// Approves `id`: `Some` when answered 200, or 409 (decided by an earlier attempt whose
    /// answer was lost with a stopping replica's connection).
    async fn approve(&self, addr: &str, id: &str) -> Option<Value> {
        approve(&self.http, addr, id).await
    }
}

/// A `tools/call` of `tool` with argument `n` under call key `upgrade-<n>`, to the replica at
/// `addr`; its result, or `None` for anything but a JSON-RPC result.
pub(crate) async fn call(addr: &str, tool: &str, n: u64) -> Option<Value> {
    let params = json!({
        "name": tool,
        "arguments": {"n": n},
        "_meta": {"io.airlock/call_key": format!("upgrade-{n}")}
    });
    rpc(addr, &params).await
}

/// One `tools/call` with `params`; its result, or `None` for anything but a JSON-RPC result.
async fn rpc(addr: &str, params: &Value) -> Option<Value> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
    let response = crate::support::mcp_request(&format!("http://{addr}"))
        .timeout(REQUEST_DEADLINE)
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

/// Approves `id` on the replica at `addr` as [`Load::approve`] does.
pub(crate) async fn approve(http: &reqwest::Client, addr: &str, id: &str) -> Option<Value> {
    let response = http
        .post(format!("http://{addr}/v1/invocations/{id}/approve"))
        .bearer_auth(ADMIN)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .ok()?;
    match response.status().as_u16() {
        200 | 409 => Some(response.json().await.unwrap_or(Value::Null)),
        _ => None,
    }
}
