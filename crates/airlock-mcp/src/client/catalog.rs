//! What an upstream MCP server offers beside its tools — resources, resource templates, prompts,
//! completion and skills (the SEP-2640 extension, MCP-88) — and the client requests that reach
//! them.
//!
//! Guarantees: every request is one short session through the egress guard, exactly as a
//! `tools/call` ([`McpClient::call_tool`]): the same pin, deadline and byte cap, never a panic,
//! every failure an [`McpCallError`]. Discovery lists only what the server declares a
//! capability for (every page of each list); the entries are kept as the server sent them, in
//! their wire form, so the endpoint can serve them without an SDK type crossing the crate.
//! Requests and results cross as JSON objects for the same reason. A `prompts/get` or
//! `resources/read` relaying a round goes to a 2026-07-28 upstream as one request (`direct`)
//! and may come back asking for input ([`Answered::InputRequired`], MCP-81); any other request
//! asking for input fails.

use rmcp::model::{CompleteRequestParams, GetPromptRequestParams, ReadResourceRequestParams};
use rmcp::model::{GetPromptResponse, GetPromptResult, ProtocolVersion};
use rmcp::model::{ReadResourceResponse, ReadResourceResult, Skill};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::client::McpClient;
use crate::client::direct;
use crate::client::target::McpTarget;
use crate::error::{CallErrorKind, McpCallError};
use crate::rounds::Round;

pub use crate::host::Entry;

/// What an upstream listed beside its tools at discovery.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RemoteCatalog {
    /// `resources/list`, every page (empty when the server declares no `resources`).
    pub resources: Vec<Entry>,
    /// `resources/templates/list`, every page.
    pub templates: Vec<Entry>,
    /// `prompts/list`, every page (empty when the server declares no `prompts`).
    pub prompts: Vec<Entry>,
    /// The server declares `completions`.
    pub completions: bool,
    /// `skills/list`, every page (empty when the server does not declare the skills
    /// extension, SEP-2640).
    pub skills: Vec<Entry>,
    /// The server declares `resources.subscribe` and speaks 2026-07-28: its resource updates
    /// can be listened to ([`McpClient::listen_resources`], MCP-92).
    pub subscribe: bool,
}

impl RemoteCatalog {
    /// Whether the server offers nothing beside its tools.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.resources.is_empty()
            && self.templates.is_empty()
            && self.prompts.is_empty()
            && !self.completions
            && self.skills.is_empty()
    }
}

impl McpClient {
    /// Lists the resources, resource templates, prompts and skills the upstream declares, in one
    /// session; a capability it does not declare is not asked for, and an upstream this client
    /// saw declare none of them is not asked at all.
    ///
    /// # Errors
    /// As [`McpClient::call_tool`]; boot code prefixes the message with the server's name.
    pub async fn discover_catalog(
        &self,
        target: &McpTarget,
    ) -> Result<RemoteCatalog, McpCallError> {
        if self.offers_nothing(&target.url) {
            // Its handshake at boot's tools/list declared nothing more: no second session.
            return Ok(RemoteCatalog::default());
        }
        let listed = self
            .session(target, |peer| async move {
                let caps = peer.peer_info().map(|i| i.capabilities.clone());
                let caps = caps.unwrap_or_default();
                let (mut resources, mut templates, mut prompts, mut skills) =
                    (None, None, None, None);
                if caps.resources.is_some() {
                    resources = Some(peer.list_all_resources().await?);
                    templates = Some(peer.list_all_resource_templates().await?);
                }
                if caps.prompts.is_some() {
                    prompts = Some(peer.list_all_prompts().await?);
                }
                if caps.supports_skills() {
                    skills = Some(servable(peer.list_all_skills().await?));
                }
                Ok((caps, resources, templates, prompts, skills))
            })
            .await?;
        let (caps, resources, templates, prompts, skills) = listed;
        let subscribable = caps.resources.as_ref().and_then(|r| r.subscribe);
        Ok(RemoteCatalog {
            resources: wire_entries(resources)?,
            templates: wire_entries(templates)?,
            prompts: wire_entries(prompts)?,
            completions: caps.completions.is_some(),
            skills: wire_entries(skills)?,
            // Relayed only from an upstream that speaks 2026-07-28 (MCP-92).
            subscribe: subscribable == Some(true) && self.speaks_modern(target),
        })
    }

    /// `resources/read` of `params` (`{"uri": …}`); the result as the server sent it. Made for
    /// a 2026-07-28 endpoint request that relays a round (MCP-81), to an upstream that speaks
    /// 2026-07-28, it is one request carrying the round, and the upstream may ask for input.
    ///
    /// # Errors
    /// As [`McpClient::call_tool`]; a server that asks for input outside a round is a protocol
    /// error.
    pub async fn read_resource(
        &self,
        target: &McpTarget,
        params: Entry,
    ) -> Result<Answered, McpCallError> {
        if let Some(round) =
            (target.downstream.round.clone()).filter(|_| self.speaks_modern(target))
        {
            let asked = Relayed::<ReadResourceResult>::new("resources/read", "uri");
            return self.relaying(target, params, &round, asked).await;
        }
        let params: ReadResourceRequestParams = from_wire(params)?;
        let read = self
            .session(target, |peer| async move {
                peer.read_resource_once(params).await
            })
            .await?;
        match read {
            ReadResourceResponse::Complete(result) => to_wire(&result).map(Answered::Complete),
            _ => Err(asks_input()),
        }
    }

    /// `prompts/get` of `params` (`{"name": …, "arguments": …}`). Made for a 2026-07-28
    /// endpoint request that relays a round (MCP-81), to an upstream that speaks 2026-07-28,
    /// it is one request carrying the round, and the upstream may ask for input.
    ///
    /// # Errors
    /// As [`McpClient::read_resource`].
    pub async fn get_prompt(
        &self,
        target: &McpTarget,
        params: Entry,
    ) -> Result<Answered, McpCallError> {
        if let Some(round) =
            (target.downstream.round.clone()).filter(|_| self.speaks_modern(target))
        {
            let asked = Relayed::<GetPromptResult>::new("prompts/get", "name");
            return self.relaying(target, params, &round, asked).await;
        }
        let params: GetPromptRequestParams = from_wire(params)?;
        let got = self
            .session(
                target,
                |peer| async move { peer.get_prompt_once(params).await },
            )
            .await?;
        match got {
            GetPromptResponse::Complete(result) => to_wire(&result).map(Answered::Complete),
            _ => Err(asks_input()),
        }
    }

    /// `asked.method` of `params` as one 2026-07-28 request relaying `round` (MCP-81): the
    /// client's capabilities, answers and the upstream's previous state go as for a
    /// `tools/call` round.
    ///
    /// # Errors
    /// As [`McpClient::call_tool`]; a result that is not a `T` is a bad reply.
    async fn relaying<T: Serialize + DeserializeOwned>(
        &self,
        target: &McpTarget,
        mut params: Entry,
        round: &Round,
        asked: Relayed<T>,
    ) -> Result<Answered, McpCallError> {
        let name = params.get(asked.name_key).and_then(Value::as_str);
        let name = name.unwrap_or_default().to_owned();
        let meta = direct::modern_meta(false, Some(round));
        params.insert("_meta".to_owned(), Value::Object(meta));
        if let Some(responses) = &round.responses {
            params.insert("inputResponses".to_owned(), responses.clone());
        }
        if let Some(state) = &round.upstream_state {
            params.insert("requestState".to_owned(), Value::String(state.clone()));
        }
        let version = ProtocolVersion::V_2026_07_28.to_string();
        let sent = direct::Exchange {
            version: &version,
            method: asked.method,
            name: Some(&name),
        };
        let answer = direct::exchange(&self.guard, target, sent, params).await?;
        round.note(&answer);
        let result = direct::result_of(&answer).map_err(direct::answered)?;
        if result["resultType"] == "input_required" {
            let requests = result["inputRequests"].as_object().cloned();
            let upstream_state = result["requestState"].as_str().map(str::to_owned);
            return Ok(Answered::InputRequired {
                requests: requests.unwrap_or_default(),
                upstream_state,
            });
        }
        let result = result.as_object().cloned().unwrap_or_default();
        let read: T = from_wire(result).map_err(|_| {
            direct::answered(McpCallError::new(
                CallErrorKind::BadReply,
                format!("the MCP server's answer to {} cannot be read", asked.method),
            ))
        })?;
        to_wire(&read)
            .map(Answered::Complete)
            .map_err(direct::answered)
    }

    /// `completion/complete` of `params` (`{"ref": …, "argument": …}`).
    ///
    /// # Errors
    /// As [`McpClient::call_tool`].
    pub async fn complete(&self, target: &McpTarget, params: Entry) -> Result<Entry, McpCallError> {
        let params: CompleteRequestParams = from_wire(params)?;
        let done = self
            .session(target, |peer| async move { peer.complete(params).await })
            .await?;
        to_wire(&done)
    }
}

/// A request [`McpClient::relaying`] sends: its method, the params' key `Mcp-Name` carries,
/// and (as `T`) the result it expects.
struct Relayed<T> {
    method: &'static str,
    name_key: &'static str,
    result: std::marker::PhantomData<T>,
}

impl<T> Relayed<T> {
    fn new(method: &'static str, name_key: &'static str) -> Self {
        Self {
            method,
            name_key,
            result: std::marker::PhantomData,
        }
    }
}

/// What an upstream's `prompts/get` or `resources/read` came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Answered {
    /// The prompt or the resource's contents, in their wire form.
    Complete(Entry),
    /// The upstream asks for input first: its `inputRequests` and own `requestState`.
    InputRequired {
        /// As the upstream sent them.
        requests: Entry,
        /// The upstream's state of this round.
        upstream_state: Option<String>,
    },
}

fn asks_input() -> McpCallError {
    McpCallError::new(
        CallErrorKind::Protocol,
        "the MCP server asked for input, which airlock does not relay for this request",
    )
}

/// The skills of `listed` the extension's structural rules allow (a `SKILL.md` URI ending in
/// the frontmatter's valid `name`, files within its directory, well-formed digests), each URI
/// once: anything else is logged and dropped, so one malformed entry never breaks a listing.
fn servable(listed: Vec<Skill>) -> Vec<Skill> {
    let mut seen = std::collections::HashSet::new();
    listed
        .into_iter()
        .filter(|skill| match skill.validate() {
            Ok(()) => seen.insert(skill.uri.clone()),
            Err(e) => {
                tracing::warn!(uri = %skill.uri, error = %e, "an upstream's skill breaks the skills extension's rules; not served");
                false
            }
        })
        .collect()
}

fn wire_entries<T: Serialize>(listed: Option<Vec<T>>) -> Result<Vec<Entry>, McpCallError> {
    listed.unwrap_or_default().iter().map(to_wire).collect()
}

/// `value`'s wire form: what the server sent, as airlock reads it.
fn to_wire<T: Serialize>(value: &T) -> Result<Entry, McpCallError> {
    match serde_json::to_value(value) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(McpCallError::new(
            CallErrorKind::BadReply,
            "the MCP server's answer cannot be read",
        )),
    }
}

/// A request's params from their wire form.
fn from_wire<T: DeserializeOwned>(params: Entry) -> Result<T, McpCallError> {
    serde_json::from_value(Value::Object(params)).map_err(|e| {
        McpCallError::new(
            CallErrorKind::Config,
            format!("the request cannot be sent: {e}"),
        )
    })
}
