//! The port between airlock's MCP endpoint and whatever runs the tools (the runtime's gateway).
//!
//! Guarantees: these types are airlock's own vocabulary — no rmcp type appears here, so the
//! runtime implements [`ToolHost`] without naming the MCP SDK, and an SDK upgrade touches only
//! `server/`. The endpoint calls the host once per `tools/list`, `tools/call`, await or task
//! request; it keeps no state of its own between requests (a task is its ledger row) but the
//! log level a session-era client set (docs/rules.md MCP-64).
//!
//! [`OfferHost`] is the part of the port for what a scope offers beside tools: the resources,
//! resource templates, prompts and completion of the upstream servers behind it (MCP-54 to
//! MCP-62). Entries and results cross as JSON objects in their MCP wire form; every method has
//! a default that offers nothing, so a tools-only host implements it with an empty `impl`.
//! What a caller is shown and may read is the host's decision: the endpoint serves exactly
//! what it answers.

use std::fmt;
use std::time::Duration;

use airlock_spec::ScopeId;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use serde_json::{Map, Value};

mod ask;

pub use crate::offer::{OfferAnswer, OfferRequest};
pub use ask::{AskHost, ClientAnswer, ClientQuestion};

/// One listed entry (a resource, a resource template or a prompt), or a request's params or
/// result, in its wire form.
pub type Entry = Map<String, Value>;

/// The tools behind one endpoint URL, and what runs them. Implemented by the runtime.
///
/// Every method is called with the scope of the URL the request came in on and, for calls, the
/// authenticated [`Caller`]; the host records the principal on every invocation and must refuse
/// an await for an invocation that belongs to another principal or another channel.
pub trait ToolHost: OfferHost + AskHost + Send + Sync + 'static {
    /// The tools of `scope` that `caller` may see, in the order `tools/list` shows them. The
    /// hints are airlock's own declarations, never copied from an upstream server.
    fn list_tools(
        &self,
        scope: &ScopeId,
        caller: &Caller,
    ) -> Result<Vec<ToolDescriptor>, HostError>;

    /// The input schema of the tool `name` of `scope`, if both exist: what the endpoint checks
    /// a request against before the call. The default scans [`ToolHost::list_tools`] as
    /// `caller` sees it; a host with a direct lookup should override it (it runs on every
    /// 2026-07-28 `tools/call`).
    fn input_schema(
        &self,
        scope: &ScopeId,
        caller: &Caller,
        name: &str,
    ) -> Option<Map<String, Value>> {
        self.list_tools(scope, caller)
            .ok()?
            .into_iter()
            .find(|t| t.name == name)
            .map(|t| t.input_schema)
    }

    /// Whether the tool `name` of `scope`, as `caller` sees it, runs only as a task of its
    /// upstream (docs/rules.md DECL-82): a 2026-07-28 call from a client that does not follow
    /// tasks is refused before anything is recorded (MCP-80). `false` (the default) for a tool
    /// the caller cannot see, so a refusal never reveals one.
    fn requires_tasks(&self, scope: &ScopeId, caller: &Caller, name: &str) -> bool {
        let _ = (scope, caller, name);
        false
    }

    /// Runs (or parks, or refuses) one call of the tool `name` of `scope` on the MCP channel.
    /// `arguments` is always a JSON object. Every call the host accepts is a ledger row, so
    /// the answer names it (a parked call is later awaited, or followed as a task, by that id).
    fn call_tool<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        name: &'a str,
        arguments: Value,
    ) -> BoxFuture<'a, Result<HostCall, HostError>>;

    /// [`ToolHost::call_tool`] with the client's own [`CallKey`] (MCP-22): the same key from the
    /// same caller on the same scope answers the call it first recorded, never a second one. A
    /// host that keeps no ledger has nothing to match a key against; by default it ignores it.
    fn call_tool_keyed<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        name: &'a str,
        arguments: Value,
        key: Option<&'a CallKey>,
    ) -> BoxFuture<'a, Result<HostCall, HostError>> {
        let _ = key;
        self.call_tool(scope, caller, name, arguments)
    }

    /// Waits at most `wait` for the parked invocation `invocation_id` to be decided, then
    /// returns its result (exactly as the call would have), or the same
    /// [`HostOutcome::Parked`] payload again at the deadline. An unknown id, or one the caller
    /// may not see from `scope`, is [`HostError::NotFound`].
    fn await_decision<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        invocation_id: &'a str,
        wait: Duration,
    ) -> BoxFuture<'a, Result<HostCall, HostError>>;

    /// Withdraws the caller's own parked call (a task cancelled by its client): a call still
    /// waiting for a person is recorded as denied by the caller and becomes
    /// [`HostOutcome::Withdrawn`]; a call that already ran, runs or is in doubt is left as it
    /// is and returned unchanged. Visibility as for [`ToolHost::await_decision`].
    fn withdraw<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        invocation_id: &'a str,
    ) -> BoxFuture<'a, Result<HostCall, HostError>>;

    /// Sends the client's `responses` to the input requests of the caller's own call whose
    /// upstream runs it as a task (MCP-84). Visibility as for [`ToolHost::await_decision`]; a
    /// call whose upstream runs no task of its own is [`HostError::InvalidParams`], the
    /// default for a host that relays none.
    fn update_task<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        invocation_id: &'a str,
        responses: &'a Map<String, Value>,
    ) -> BoxFuture<'a, Result<(), HostError>> {
        let _ = (scope, caller, responses);
        let refused = HostError::InvalidParams(format!(
            "task {} does not wait for input",
            airlock_spec::visible_text(invocation_id)
        ));
        Box::pin(std::future::ready(Err(refused)))
    }

    /// What to ask the person at the client about the caller's call of `tool`, parked with
    /// `status`, if that person may settle it (docs/rules.md MCP-46, MCP-47): to confirm the
    /// exact call (a tool declared `approval: caller`), or to answer its question
    /// (`ask_human`). `None` (the default): only an approver decides, and the client gets the
    /// parked payload.
    fn caller_prompt(
        &self,
        scope: &ScopeId,
        tool: &str,
        status: ParkedStatus,
        arguments: &Value,
    ) -> Option<CallerPrompt> {
        let _ = (scope, tool, status, arguments);
        None
    }

    /// Settles the caller's own parked call `used.invocation_id` (a call of `used.tool`) with
    /// its person's answer, given through a sealed request state the endpoint has opened and
    /// checked; the state's one-time id is recorded in the same commit that decides and
    /// claims the call (MCP-49). A state used before is [`CallerRefusal::Replayed`]; a call
    /// somebody else decided first is answered as it stands. Visibility as for
    /// [`ToolHost::await_decision`].
    fn decide_as_caller<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        used: CallerUse,
    ) -> BoxFuture<'a, Result<HostCall, CallerRefusal>> {
        let _ = (scope, caller);
        let refused = HostError::NotFound(format!("invocation {}", used.invocation_id));
        Box::pin(async move { Err(CallerRefusal::Host(refused)) })
    }

    /// Runs the next round of the caller's relayed call (MCP-70): `round.previous` must be
    /// the caller's own round of `round.tool` that ended needing input. The round is a new
    /// call recorded without gating again, and the state's one-time id is recorded in the
    /// commit that records and claims it; a state used before is [`CallerRefusal::Replayed`].
    /// Visibility as for [`ToolHost::await_decision`].
    fn continue_round<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        round: RoundCall,
    ) -> BoxFuture<'a, Result<HostCall, CallerRefusal>> {
        let _ = (scope, caller);
        let refused = HostError::NotFound(format!("invocation {}", round.previous));
        Box::pin(async move { Err(CallerRefusal::Host(refused)) })
    }

    /// Whether the host is shutting down: [`ToolHost::await_decision`] then answers at once, so
    /// a request that would await again and again (a 2025 `tasks/result`) stops and tells its
    /// client to ask again. A host that never shuts down keeps the default.
    fn long_polls_ended(&self) -> bool {
        false
    }
}

/// One call as the ledger knows it: the row's id and times, and what became of it.
#[derive(Debug, Clone, PartialEq)]
pub struct HostCall {
    /// The invocation's id (also the task id of a task-augmented call).
    pub invocation_id: String,
    /// When the call was recorded (RFC 3339).
    pub created_at: String,
    /// When its row last changed (RFC 3339).
    pub updated_at: String,
    /// The person who decided it (approved, denied, answered, resolved or abandoned it), if
    /// anyone did; nobody for an expired call.
    pub decided_by: Option<String>,
    /// The arguments it ran with, when the person who approved it edited them (docs/rules.md
    /// DECIDE-20): the caller proposed others.
    pub approved_arguments: Option<Value>,
    /// What became of it.
    pub outcome: HostOutcome,
    /// While its upstream's task waits for the client's input: the upstream's input requests,
    /// by key, not yet read as relayable (MCP-83).
    pub task_input: Option<Map<String, Value>>,
}

impl HostCall {
    /// Whether the call is still waiting for a person (or running): not yet settled.
    #[must_use]
    pub fn is_parked(&self) -> bool {
        matches!(self.outcome, HostOutcome::Parked { .. })
    }
}

/// Who is calling: the principal the request's bearer token maps to (a configured token, or
/// an OAuth access token's claims).
#[derive(Debug, Clone, Default)]
pub struct Caller {
    /// The principal named in the endpoint's configuration for the token presented, or the
    /// configured claim (default `sub`) of an OAuth access token.
    pub principal: String,
    /// Groups the principal belongs to: from the token's configuration or its groups claim.
    pub groups: Vec<String>,
    /// What the client of the request being served can take back from the upstream calls the
    /// host makes for it: the host puts it on each [`crate::McpTarget`] it calls for the
    /// request. None outside a `tools/call` or an offer read.
    pub downstream: crate::Downstream,
}

/// Two callers are the same caller when principal and groups are: what a request's client can
/// take back is an attachment of one request, not part of who calls.
impl PartialEq for Caller {
    fn eq(&self, other: &Self) -> bool {
        self.principal == other.principal && self.groups == other.groups
    }
}

impl Eq for Caller {}

impl std::hash::Hash for Caller {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.principal.hash(state);
        self.groups.hash(state);
    }
}

/// Where a client puts its own call key: `params._meta["io.airlock/call_key"]` of a
/// `tools/call` (a reverse-DNS prefix, as MCP asks of `_meta` keys outside its own).
pub const CALL_KEY_META: &str = "io.airlock/call_key";

/// The longest call key accepted, in characters.
pub const MAX_CALL_KEY_CHARS: usize = 128;

/// A client's key for one call (MCP-22): 1 to [`MAX_CALL_KEY_CHARS`] ASCII letters, digits and
/// `-._~:+/=` (a UUID, a ULID, base64 or hex fit), so it is safe in any log or column.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CallKey(String);

impl CallKey {
    /// The key in a request's `_meta`, if it has one.
    ///
    /// # Errors
    /// Why the value under [`CALL_KEY_META`] is not a call key (a -32602 for the client).
    pub fn from_meta(meta: Option<&Map<String, Value>>) -> Result<Option<Self>, String> {
        match meta.and_then(|m| m.get(CALL_KEY_META)) {
            None => Ok(None),
            Some(Value::String(key)) => Self::new(key).map(Some),
            Some(_) => Err(format!("_meta[\"{CALL_KEY_META}\"] must be a string")),
        }
    }

    /// `key` as a call key.
    ///
    /// # Errors
    /// Why it is not one: empty, too long, or a character outside the allowed set.
    pub fn new(key: &str) -> Result<Self, String> {
        let allowed = |c: char| c.is_ascii_alphanumeric() || "-._~:+/=".contains(c);
        let chars = key.chars().count();
        if (1..=MAX_CALL_KEY_CHARS).contains(&chars) && key.chars().all(allowed) {
            return Ok(Self(key.to_owned()));
        }
        Err(format!(
            "_meta[\"{CALL_KEY_META}\"] must be 1 to {MAX_CALL_KEY_CHARS} characters, each an ASCII letter, a digit or one of -._~:+/="
        ))
    }

    /// The key as the client sent it.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// One tool as `tools/list` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDescriptor {
    /// The name a client calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON Schema of its arguments (an object schema).
    pub input_schema: Map<String, Value>,
    /// It does not change anything (`readOnlyHint`).
    pub read_only: bool,
    /// It may destroy or overwrite (`destructiveHint`).
    pub destructive: bool,
    /// Calling it again with the same arguments changes nothing more (`idempotentHint`).
    pub idempotent: bool,
    /// The JSON Schema of its `structuredContent` (`outputSchema`), when it declares one.
    pub output_schema: Option<Map<String, Value>>,
}

/// Why a call has not run (yet): the state of its parked invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParkedStatus {
    /// A person has to approve it first.
    AwaitingApproval,
    /// It may or may not have run; a person has to settle it.
    InDoubt,
    /// It asked a person a question that has not been answered.
    AwaitingAnswer,
    /// Its principal has no credential for the connection it goes through yet; it runs once
    /// they provide one (the parked reply's `note` says how).
    AwaitingCredential,
    /// A person approved it and it is running now; its result is not in yet.
    Running,
}

impl ParkedStatus {
    /// The stable wire name: `awaiting_approval`, `in_doubt`, `awaiting_answer`,
    /// `awaiting_credential` or `running`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AwaitingApproval => "awaiting_approval",
            Self::InDoubt => "in_doubt",
            Self::AwaitingAnswer => "awaiting_answer",
            Self::AwaitingCredential => "awaiting_credential",
            Self::Running => "running",
        }
    }
}

impl fmt::Display for ParkedStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What became of a call or an await.
#[derive(Debug, Clone, PartialEq)]
pub enum HostOutcome {
    /// The tool ran; `is_error` says whether it failed (its text then says why).
    Completed {
        /// The text the model reads.
        text: String,
        /// The structured result, when the tool has one.
        structured: Option<Value>,
        /// The content blocks as the upstream returned them (MCP content JSON), served to the
        /// client unchanged; empty: the result is `text` alone.
        content: Vec<Value>,
        /// The tool failed.
        is_error: bool,
    },
    /// The call waits as rows for a person; nothing has run.
    Parked {
        /// Why it waits.
        status: ParkedStatus,
        /// The id to await it with.
        invocation_id: String,
        /// The tool called.
        tool: String,
        /// When the wait ends unanswered (RFC 3339), if it does.
        expires_at: Option<String>,
        /// What the caller can do meanwhile, when something other than a decision is awaited
        /// (how to provide a missing credential).
        note: Option<String>,
        /// Whether the person at the client may confirm it ([`ToolHost::caller_prompt`]): its
        /// tool is declared `approval: caller` and nothing about the call wants an approver
        /// instead (a limit over its cap, docs/rules.md POLICY-59). Not part of the reply.
        confirmable: bool,
    },
    /// A person (or a policy) declined the call.
    Denied {
        /// Why.
        reason: String,
    },
    /// Nobody decided before the wait ran out; nothing ran.
    Expired {
        /// What the model reads as the refusal (`approval expired`).
        reason: String,
    },
    /// A person gave up on the call while it was in doubt: it never runs, and whether it ran
    /// once is unknown.
    Abandoned {
        /// The person's reason.
        reason: String,
    },
    /// The call cannot be made on this channel (for example a proposed write).
    Refused {
        /// The message for the model.
        message: String,
    },
    /// The caller withdrew the call while it waited (a cancelled task); nothing ran.
    Withdrawn,
    /// A relayed round (MCP-68): the tool's upstream needs the client's input first. The
    /// next round is the client's retry.
    InputRequired {
        /// The upstream's `inputRequests`, as it sent them (checked before they are relayed).
        requests: Map<String, Value>,
        /// The upstream's own `requestState`, sealed inside airlock's, never sent bare.
        upstream_state: Option<String>,
    },
    /// The upstream ran the call as a task of its own and that task failed at the protocol
    /// level, not as a tool error (docs/rules.md MCP-78): a task that is `failed`.
    TaskFailed {
        /// What the upstream said (cut to [`crate::MAX_FAILURE_CHARS`]).
        message: String,
    },
}

/// A request the host could not serve at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// No tool of that name in the scope (a JSON-RPC invalid-params error).
    #[error("unknown tool: {0}")]
    UnknownTool(String),
    /// No agent of that name (a JSON-RPC invalid-params error).
    #[error("unknown scope: {0}")]
    UnknownScope(String),
    /// The request's params are not acceptable (a JSON-RPC invalid-params error): a call key
    /// already used for a different call.
    #[error("invalid params: {0}")]
    InvalidParams(String),
    /// No invocation the caller may see with that id (a tool error the model reads).
    #[error("not found: {0}")]
    NotFound(String),
    /// No resource the caller may read at that URI (a JSON-RPC invalid-params error naming the
    /// URI in its data, MCP-57).
    #[error("resource not found: {0}")]
    ResourceNotFound(String),
    /// Serving the request needs client capabilities the client did not declare (by name:
    /// `elicitation`, `sampling`, `roots`): -32021, HTTP 400 on 2026-07-28 (docs/rules.md
    /// MCP-80). Only the endpoint's round relay raises it; a host never does.
    #[error("missing client capabilities: {}", .0.join(", "))]
    MissingClientCapabilities(Vec<String>),
    /// The upstream server failed or refused the request; the message is the client's own
    /// error's (never a secret), sent as a JSON-RPC internal error.
    #[error("upstream: {0}")]
    Upstream(String),
    /// The host is broken; the detail is logged, never sent to the client.
    #[error("internal error: {0}")]
    Internal(String),
}

/// What the person at the client is asked about a parked call (MCP-46, MCP-47).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallerPrompt {
    /// Confirm the exact call: run it, or not.
    Confirm,
    /// Answer a question.
    Answer {
        /// The question, as the caller wrote it.
        question: String,
    },
}

/// The person's answer to a [`CallerPrompt`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallerDecision {
    /// Run the call.
    Approve,
    /// Do not run it (or not answer); the reason is recorded.
    Decline {
        /// Why, in the endpoint's words.
        reason: String,
    },
    /// The answer to the question.
    Answer {
        /// The person's text.
        text: String,
    },
}

/// One use of a sealed request state, opened and checked by the endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerUse {
    /// The state's one-time id (never the state itself).
    pub state_id: String,
    /// The call the state was sealed for.
    pub invocation_id: String,
    /// That call's tool.
    pub tool: String,
    /// What the person decided.
    pub decision: CallerDecision,
}

/// The next round of a relayed call, its sealed state opened and checked by the endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundCall {
    /// The state's one-time id (never the state itself).
    pub state_id: String,
    /// The round the state was sealed for.
    pub previous: String,
    /// The tool called.
    pub tool: String,
    /// The arguments, the same as the previous round's (the state binds their digest).
    pub arguments: Value,
}

/// Why [`ToolHost::decide_as_caller`] or [`ToolHost::continue_round`] went no further.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallerRefusal {
    /// The state was used before.
    #[error("the request state was already used")]
    Replayed,
    /// The host could not serve the request.
    #[error(transparent)]
    Host(#[from] HostError),
}

/// Which of the capabilities beside tools a scope declares: only those it has something for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Offers {
    /// Some resource or resource template.
    pub resources: bool,
    /// Some prompt.
    pub prompts: bool,
    /// Some upstream that completes its prompts' or templates' arguments.
    pub completions: bool,
    /// Some skill (the SEP-2640 extension, MCP-88).
    pub skills: bool,
    /// Some resource whose updates can be listened to (2026-07-28 `subscriptions/listen`,
    /// MCP-92).
    pub subscribe: bool,
}

/// One of the lists a scope serves beside `tools/list`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listed {
    /// `resources/list`.
    Resources,
    /// `resources/templates/list`.
    Templates,
    /// `prompts/list`.
    Prompts,
    /// `skills/list` (MCP-88).
    Skills,
}

/// What a scope offers beside tools, and what reaches it. Implemented by the runtime.
pub trait OfferHost {
    /// The capabilities `scope` has entries for (declared to every caller alike, as `tools`).
    fn offers(&self, scope: &ScopeId) -> Offers {
        let _ = scope;
        Offers::default()
    }

    /// The entries of `list` that `caller` may see in `scope`, as served (names and URIs
    /// already namespaced).
    ///
    /// # Errors
    /// An unknown scope.
    fn list_offered(
        &self,
        scope: &ScopeId,
        caller: &Caller,
        list: Listed,
    ) -> Result<Vec<Entry>, HostError> {
        let _ = (scope, caller, list);
        Ok(Vec::new())
    }

    /// Reads the resource `uri` (a served URI) for `caller`: a listed resource, or a URI one
    /// of the listed templates matches. Anything else is [`HostError::ResourceNotFound`].
    fn read_resource<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        uri: &'a str,
    ) -> BoxFuture<'a, Result<OfferAnswer, HostError>> {
        let _ = (scope, caller);
        Box::pin(async move { Err(HostError::ResourceNotFound(uri.to_owned())) })
    }

    /// `prompts/get` with `params` as the client sent them (the served prompt name), without
    /// its `inputResponses` and `requestState`: the endpoint relays them (MCP-81).
    fn get_prompt<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        params: Entry,
    ) -> BoxFuture<'a, Result<OfferAnswer, HostError>> {
        let _ = (scope, caller);
        let name = params
            .get("name")
            .and_then(|n| n.as_str())
            .unwrap_or_default();
        let unknown = HostError::InvalidParams(format!("unknown prompt: {name}"));
        Box::pin(async move { Err(unknown) })
    }

    /// The next round of the caller's `request` whose upstream asked for input (MCP-81):
    /// `round.previous` must be the caller's own get of the prompt, or read of the URI,
    /// `round.tool` (with the prompt's arguments `round.arguments`) that ended needing input;
    /// as [`ToolHost::continue_round`] otherwise. By default there is no such request.
    fn continue_offer<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        request: OfferRequest,
        round: RoundCall,
    ) -> BoxFuture<'a, Result<OfferAnswer, CallerRefusal>> {
        let _ = (scope, caller, request);
        let missing = HostError::NotFound(format!("invocation {}", round.previous));
        Box::pin(async move { Err(missing.into()) })
    }

    /// The served URIs among `uris` whose resources change, as their upstreams tell, for as
    /// long as the stream is held (MCP-92): only URIs `caller` may read. By default, none.
    fn watch_resources(
        &self,
        scope: &ScopeId,
        caller: &Caller,
        uris: Vec<String>,
    ) -> BoxStream<'static, String> {
        let _ = (scope, caller, uris);
        Box::pin(futures::stream::empty())
    }

    /// `completion/complete` with `params` as the client sent them (a served prompt name or
    /// template URI in `ref`).
    fn complete<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        params: Entry,
    ) -> BoxFuture<'a, Result<Entry, HostError>> {
        let _ = (scope, caller, params);
        Box::pin(async move { Err(HostError::InvalidParams("nothing to complete".into())) })
    }
}
