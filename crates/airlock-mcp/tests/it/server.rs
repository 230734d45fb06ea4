//! airlock's MCP endpoint on 127.0.0.1 in front of a scripted `ToolHost`: raw HTTP with literal
//! JSON-RPC bodies (`wire`, and `tasks` for both MCP Tasks shapes), and the official TypeScript
//! SDK as a real client (`sdk`); content blocks and output schemas (`content`).

mod content;
mod mrtr;
mod oauth;
mod sdk;
mod tasks;
mod wire;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use airlock_mcp::{
    Caller, CallerPrompt, CallerRefusal, CallerUse, EndpointConfig, HostCall, HostError,
    HostOutcome, ParkedStatus, RequestStates, RoundCall, ToolDescriptor, ToolHost,
};
use airlock_spec::ScopeId;
use futures::future::BoxFuture;
use secrecy::SecretString;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub(crate) const TOKEN: &str = "test-token-alice";

/// What the host was asked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Asked {
    Call {
        scope: ScopeId,
        principal: String,
        name: String,
        arguments: Value,
    },
    Await {
        principal: String,
        invocation_id: String,
        wait: Duration,
    },
    Withdraw {
        scope: ScopeId,
        principal: String,
        invocation_id: String,
    },
    /// The person at the client decided, through a request state.
    Decide { principal: String, used: CallerUse },
    /// The next round of a relayed call (MCP-70).
    Round { principal: String, round: RoundCall },
}

/// A host with fixed tools and scripted outcomes, recording every call.
#[derive(Default)]
pub(crate) struct FakeHost {
    pub(crate) asked: Mutex<Vec<Asked>>,
    /// The caller of every `tools/call`, groups included.
    pub(crate) callers: Mutex<Vec<Caller>>,
    /// The `held` tool: told when a call starts, waits to be released, then says how it ended.
    pub(crate) held: Held,
}

/// What the `held` tool signals: a call that waits for the test, to see what survives it.
#[derive(Default)]
pub(crate) struct Held {
    pub(crate) started: tokio::sync::Notify,
    pub(crate) release: tokio::sync::Notify,
    /// `Ok(())`: a call ran to its end; `Err(())`: one was dropped before it.
    pub(crate) ended: tokio::sync::Mutex<Option<tokio::sync::oneshot::Sender<Result<(), ()>>>>,
}

/// Sends `Err(())` (dropped before its end) unless disarmed.
struct DroppedGuard<'a>(Option<&'a Held>);

impl Drop for DroppedGuard<'_> {
    fn drop(&mut self) {
        if let Some(held) = self.0.take()
            && let Ok(mut ended) = held.ended.try_lock()
            && let Some(tx) = ended.take()
        {
            let _ = tx.send(Err(()));
        }
    }
}

/// `outcome` as the ledger row `id` would carry it.
fn tracked(id: &str, outcome: HostOutcome) -> HostCall {
    HostCall {
        invocation_id: id.into(),
        created_at: "2026-11-30T10:00:00Z".into(),
        updated_at: "2026-11-30T10:00:01Z".into(),
        decided_by: (id == "inv-1").then(|| "bob".to_owned()),
        approved_arguments: None,
        outcome,
        task_input: None,
    }
}

fn parked(id: &str) -> HostOutcome {
    HostOutcome::Parked {
        status: ParkedStatus::AwaitingApproval,
        invocation_id: id.into(),
        tool: "deploy".into(),
        expires_at: None,
        note: None,
        confirmable: true,
    }
}

fn schema() -> Map<String, Value> {
    let Value::Object(map) = json!({"type": "object", "properties": {"msg": {"type": "string"}}})
    else {
        unreachable!()
    };
    map
}

/// The `outputSchema` of the `blocks` tool of agent `rich`.
pub(crate) fn output_schema() -> Map<String, Value> {
    let Value::Object(map) = json!({"type": "object", "properties": {"n": {"type": "integer"}}})
    else {
        unreachable!()
    };
    map
}

impl airlock_mcp::OfferHost for FakeHost {}
impl airlock_mcp::AskHost for FakeHost {}

impl ToolHost for FakeHost {
    fn list_tools(
        &self,
        scope: &ScopeId,
        _caller: &Caller,
    ) -> Result<Vec<ToolDescriptor>, HostError> {
        if *scope == ScopeId::Agent("nope".into()) {
            return Err(HostError::UnknownScope("nope".into()));
        }
        let tool = |name: &str, read_only, destructive, idempotent| ToolDescriptor {
            name: name.into(),
            description: format!("the {name} tool"),
            input_schema: schema(),
            read_only,
            destructive,
            idempotent,
            output_schema: None,
        };
        let mut echo = tool("echo", true, false, true);
        // `msg` is mirrored into the `Mcp-Param-Msg` header by 2026-07-28 clients.
        echo.input_schema["properties"]["msg"]["x-mcp-header"] = json!("Msg");
        if *scope == ScopeId::Agent("rich".into()) {
            let mut blocks = tool("blocks", true, false, true);
            blocks.output_schema = Some(output_schema());
            return Ok(vec![blocks]);
        }
        let mut tools = vec![echo, tool("deploy", false, true, false)];
        if let ScopeId::Agent(name) = scope {
            tools.retain(|t| t.name == "echo");
            tools[0].description = format!("echo for {name}");
        }
        Ok(tools)
    }

    /// `deploy`, waiting for approval, may be confirmed by the person at the client.
    fn caller_prompt(
        &self,
        _scope: &ScopeId,
        tool: &str,
        status: ParkedStatus,
        _arguments: &Value,
    ) -> Option<CallerPrompt> {
        (tool == "deploy" && status == ParkedStatus::AwaitingApproval)
            .then_some(CallerPrompt::Confirm)
    }

    fn decide_as_caller<'a>(
        &'a self,
        _scope: &'a ScopeId,
        caller: &'a Caller,
        used: CallerUse,
    ) -> BoxFuture<'a, Result<HostCall, CallerRefusal>> {
        self.asked.lock().unwrap().push(Asked::Decide {
            principal: caller.principal.clone(),
            used,
        });
        let done = HostOutcome::Completed {
            text: "deployed".into(),
            structured: None,
            content: Vec::new(),
            is_error: false,
        };
        Box::pin(async move { Ok(tracked("inv-1", done)) })
    }

    fn continue_round<'a>(
        &'a self,
        _scope: &'a ScopeId,
        caller: &'a Caller,
        round: RoundCall,
    ) -> BoxFuture<'a, Result<HostCall, CallerRefusal>> {
        self.asked.lock().unwrap().push(Asked::Round {
            principal: caller.principal.clone(),
            round,
        });
        let done = HostOutcome::Completed {
            text: "answered".into(),
            structured: None,
            content: Vec::new(),
            is_error: false,
        };
        Box::pin(async move { Ok(tracked("inv-2", done)) })
    }

    fn call_tool<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        name: &'a str,
        arguments: Value,
    ) -> BoxFuture<'a, Result<HostCall, HostError>> {
        self.asked.lock().unwrap().push(Asked::Call {
            scope: scope.clone(),
            principal: caller.principal.clone(),
            name: name.into(),
            arguments: arguments.clone(),
        });
        self.callers.lock().unwrap().push(caller.clone());
        if name == "held" {
            return Box::pin(self.held_call());
        }
        let outcome = match name {
            "echo" => Ok(HostOutcome::Completed {
                text: arguments.to_string(),
                structured: Some(json!({ "echo": arguments })),
                content: Vec::new(),
                is_error: false,
            }),
            // The blocks given, as an upstream's content (MCP-33).
            "blocks" => Ok(HostOutcome::Completed {
                text: "[the blocks as placeholders]".into(),
                structured: Some(json!({"n": 1})),
                content: arguments["content"].as_array().cloned().unwrap_or_default(),
                is_error: false,
            }),
            "fail" => Ok(HostOutcome::Completed {
                text: "upstream said 500".into(),
                structured: None,
                content: Vec::new(),
                is_error: true,
            }),
            "deploy" => Ok(HostOutcome::Parked {
                status: ParkedStatus::AwaitingApproval,
                invocation_id: "inv-1".into(),
                tool: "deploy".into(),
                expires_at: Some("2030-01-01T00:00:00Z".into()),
                note: None,
                confirmable: true,
            }),
            // A round whose upstream asks the client (MCP-68).
            "ask" => Ok(HostOutcome::InputRequired {
                requests: json!({"q": {"method": "elicitation/create", "params": {
                    "message": "Name?", "requestedSchema": {"type": "object", "properties": {}}}}})
                .as_object()
                .cloned()
                .unwrap_or_default(),
                upstream_state: Some("upstream-secret-state".into()),
            }),
            "wipe" => Ok(HostOutcome::Denied {
                reason: "policy: never on Fridays".into(),
            }),
            "propose" => Ok(HostOutcome::Refused {
                message: "proposals cannot be made through the MCP endpoint".into(),
            }),
            "broken" => Err(HostError::Internal("db password is hunter2".into())),
            other => Err(HostError::UnknownTool(other.into())),
        };
        Box::pin(async move { outcome.map(|o| tracked("inv-1", o)) })
    }

    fn await_decision<'a>(
        &'a self,
        _scope: &'a ScopeId,
        caller: &'a Caller,
        invocation_id: &'a str,
        wait: Duration,
    ) -> BoxFuture<'a, Result<HostCall, HostError>> {
        self.asked.lock().unwrap().push(Asked::Await {
            principal: caller.principal.clone(),
            invocation_id: invocation_id.into(),
            wait,
        });
        let outcome = match invocation_id {
            "inv-1" => Ok(HostOutcome::Completed {
                text: "deployed".into(),
                structured: Some(json!({"deployed": "prod"})),
                content: Vec::new(),
                is_error: false,
            }),
            "inv-blocks" => Ok(HostOutcome::Completed {
                text: "[image: image/png, 69 bytes]".into(),
                structured: None,
                content: crate::sdk_upstream::every_block()
                    .as_array()
                    .cloned()
                    .unwrap_or_default(),
                is_error: false,
            }),
            "inv-waiting" => Ok(parked("inv-waiting")),
            "inv-denied" => Ok(HostOutcome::Denied {
                reason: "bob said no".into(),
            }),
            "inv-withdrawn" => Ok(HostOutcome::Withdrawn),
            other => Err(HostError::NotFound(format!(
                "no invocation {other} of yours on the MCP channel"
            ))),
        };
        let id = invocation_id.to_owned();
        Box::pin(async move { outcome.map(|o| tracked(&id, o)) })
    }

    fn withdraw<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        invocation_id: &'a str,
    ) -> BoxFuture<'a, Result<HostCall, HostError>> {
        self.asked.lock().unwrap().push(Asked::Withdraw {
            scope: scope.clone(),
            principal: caller.principal.clone(),
            invocation_id: invocation_id.into(),
        });
        let outcome = match invocation_id {
            "inv-waiting" | "inv-withdrawn" => Ok(HostOutcome::Withdrawn),
            "inv-running" => Ok(HostOutcome::Parked {
                status: ParkedStatus::Running,
                invocation_id: "inv-running".into(),
                tool: "deploy".into(),
                expires_at: None,
                note: None,
                confirmable: false,
            }),
            other => Err(HostError::NotFound(format!("invocation {other}"))),
        };
        let id = invocation_id.to_owned();
        Box::pin(async move { outcome.map(|o| tracked(&id, o)) })
    }
}

impl FakeHost {
    /// The `held` tool's call: started, released by the test, ended.
    async fn held_call(&self) -> Result<HostCall, HostError> {
        let mut guard = DroppedGuard(Some(&self.held));
        self.held.started.notify_one();
        self.held.release.notified().await;
        guard.0 = None;
        if let Some(tx) = self.held.ended.lock().await.take() {
            let _ = tx.send(Ok(()));
        }
        let done = HostOutcome::Completed {
            text: "held".into(),
            structured: None,
            content: Vec::new(),
            is_error: false,
        };
        Ok(tracked("inv-held", done))
    }
}

/// A running endpoint.
pub(crate) struct Endpoint {
    pub(crate) port: u16,
    pub(crate) host: Arc<FakeHost>,
}

impl Endpoint {
    /// The endpoint with one token (principal `alice`) and loopback hosts.
    pub(crate) async fn start() -> Self {
        Self::start_with(
            vec![(SecretString::from(TOKEN), "alice".to_owned())],
            vec![],
        )
        .await
    }

    pub(crate) async fn start_with(
        tokens: Vec<(SecretString, String)>,
        allowed_hosts: Vec<String>,
    ) -> Self {
        Self::start_on(tokens, allowed_hosts, None).await
    }

    /// [`Endpoint::start`] that sends input requests, sealing their states with `states`.
    pub(crate) async fn start_asking(states: RequestStates) -> Self {
        let tokens = vec![(SecretString::from(TOKEN), "alice".to_owned())];
        Self::start_on(tokens, vec![], Some(states)).await
    }

    async fn start_on(
        tokens: Vec<(SecretString, String)>,
        allowed_hosts: Vec<String>,
        request_states: Option<RequestStates>,
    ) -> Self {
        let host = Arc::new(FakeHost::default());
        let app = airlock_mcp::router(
            host.clone(),
            EndpointConfig {
                tokens: tokens
                    .into_iter()
                    .map(|(token, principal)| airlock_mcp::EndpointToken {
                        token,
                        principal,
                        groups: Vec::new(),
                        scopes: None,
                    })
                    .collect(),
                allowed_hosts,
                tracer: None,
                request_states,
                oauth: None,
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { port, host }
    }

    /// The endpoint with the token of `start` and OAuth access tokens checked by the resource
    /// server `oauth` makes from the endpoint's base URL (`http://127.0.0.1:PORT`).
    pub(crate) async fn start_oauth(
        oauth: impl FnOnce(String) -> airlock_mcp::ResourceServer,
    ) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let host = Arc::new(FakeHost::default());
        let app = airlock_mcp::router(
            host.clone(),
            EndpointConfig {
                tokens: vec![airlock_mcp::EndpointToken {
                    token: SecretString::from(TOKEN),
                    principal: "alice".to_owned(),
                    groups: Vec::new(),
                    scopes: None,
                }],
                allowed_hosts: vec![],
                tracer: None,
                request_states: None,
                oauth: Some(oauth(format!("http://127.0.0.1:{port}"))),
            },
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { port, host }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub(crate) fn asked(&self) -> Vec<Asked> {
        self.host.asked.lock().unwrap().clone()
    }

    /// Sends `head` (request line and headers, `\r\n`-separated, without `Content-Length`) and
    /// `body` as literal bytes, and reads the whole answer.
    pub(crate) async fn raw(&self, head: &str, body: &str) -> Reply {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).await.unwrap();
        let request = format!(
            "{head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut bytes = Vec::new();
        stream.read_to_end(&mut bytes).await.unwrap();
        Reply::parse(&String::from_utf8(bytes).unwrap())
    }

    /// A POST to `path` with the usual MCP headers (token, Host, Accept, Content-Type) and
    /// `extra` header lines.
    pub(crate) async fn post(&self, path: &str, extra: &[&str], body: &str) -> Reply {
        let mut head = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {TOKEN}\r\n\
             Accept: application/json, text/event-stream\r\nContent-Type: application/json",
            self.port
        );
        for line in extra {
            head.push_str("\r\n");
            head.push_str(line);
        }
        self.raw(&head, body).await
    }
}

/// An HTTP answer.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    /// Lower-case names.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
}

impl Reply {
    fn parse(text: &str) -> Self {
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .unwrap()
            .split(' ')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        let headers: Vec<(String, String)> = lines
            .map(|l| {
                let (k, v) = l.split_once(':').unwrap();
                (k.trim().to_ascii_lowercase(), v.trim().to_owned())
            })
            .collect();
        let chunked = headers
            .iter()
            .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
        let body = if chunked {
            dechunk(body)
        } else {
            body.to_owned()
        };
        Self {
            status,
            headers,
            body,
        }
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n").unwrap();
        let size = usize::from_str_radix(size.trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.push_str(&rest[..size]);
        body = &rest[size + 2..];
    }
}
