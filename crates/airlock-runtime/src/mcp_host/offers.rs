//! The gateway as the endpoint's [`OfferHost`]: what the scope's upstream servers offer beside
//! tools, filtered by `[[access]]`, each read through the egress guard and into the ledger
//! (docs/rules.md MCP-54..MCP-61, LEDGER-59, LEDGER-60).
//!
//! Guarantees: `[[access]]` matches an entry's served name as it matches a tool's (a resource
//! or template by its served `name`, a prompt by its served name), so `crm__*` grants a
//! connection's tools, resources and prompts alike; an entry the caller may not see is listed
//! to nobody but callers who may, and reading, getting or completing it is answered exactly as
//! for an entry that does not exist. A resource read and a prompt got are ledger rows
//! ([`Read`]); a completion is not (it reads nothing the caller keeps). The URIs in what an
//! upstream answers are served mapped, as its lists are. A prompt whose 2026-07-28 upstream
//! asks for input ends its row `input_required`, and the next round is a read of its own that
//! follows it (MCP-81, LEDGER-67). A skill's file is read only when its bytes are those its
//! skill's entry lists (MCP-90).

use std::future::Future;

use airlock_ledger::{INPUT_REQUIRED_KEY, InvocationState, LedgerError, RoundUse};
use airlock_mcp::{Answered, OfferAnswer, OfferRequest, RoundCall};
use airlock_mcp::{Caller, CallerRefusal, Entry, HostError, Listed, OfferHost, Offers};
use airlock_spec::ScopeId;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use serde_json::{Map, Value, json};

use super::McpHost;
use super::{internal, unknown_scope};
use crate::error::{ToolError, mcp_error};
use crate::gateway::{GatewayError, Read};
use crate::offered::Source;

impl McpHost {
    /// Whether `caller` may see the entry served as `name` in `scope`.
    fn sees(&self, scope: &ScopeId, caller: &Caller, name: &str) -> bool {
        self.gateway
            .may_see(scope, Some(&caller.principal), Some(&caller.groups), name)
    }
}

impl McpHost {
    /// `prompts/get` of the served prompt `params` names, recorded as a read (continuing the
    /// read `follows` names, if any).
    async fn got_prompt(
        &self,
        scope: &ScopeId,
        caller: &Caller,
        mut params: Entry,
        follows: Option<RoundUse>,
    ) -> Result<OfferAnswer, CallerRefusal> {
        let name = text(&params, "name").to_owned();
        let visible = |name: &str| self.sees(scope, caller, name);
        let Some((source, upstream_name)) = self.gateway.offered().prompt(scope, &name, &visible)
        else {
            return Err(HostError::InvalidParams(format!("unknown prompt: {name}")).into());
        };
        let client = &source.client;
        let arguments = params.get("arguments").cloned().unwrap_or(Value::Null);
        params.insert("name".into(), Value::String(upstream_name));
        let work = async {
            // The round of the request this read serves, if it relays one (MCP-81).
            let target = source
                .target
                .clone()
                .with_downstream(caller.downstream.clone());
            let got = client.get_prompt(&target, params).await;
            got.map(|r| served(source, r, served_messages))
                .map_err(mcp_error)
        };
        let read = Read {
            scope,
            principal: &caller.principal,
            method: OfferRequest::Prompt.method(),
            arguments: json!({ "name": name, "arguments": arguments }),
            follows,
            connection: &source.connection,
        };
        self.recorded(read, work, prompt_summary).await
    }

    /// `resources/read` of the served `uri`, recorded as a read (continuing the read `follows`
    /// names, if any).
    async fn got_resource(
        &self,
        scope: &ScopeId,
        caller: &Caller,
        uri: &str,
        follows: Option<RoundUse>,
    ) -> Result<OfferAnswer, CallerRefusal> {
        let visible = |name: &str| self.sees(scope, caller, name);
        let Some((source, upstream)) = self.gateway.offered().resource(scope, uri, &visible) else {
            return Err(HostError::ResourceNotFound(uri.to_owned()).into());
        };
        let client = &source.client;
        let mut params = Map::new();
        params.insert("uri".into(), Value::String(upstream.clone()));
        let work = async {
            let target = source
                .target
                .clone()
                .with_downstream(caller.downstream.clone());
            let read = client.read_resource(&target, params).await;
            let read = read.map_err(mcp_error)?;
            // A skill's file is handed on only as its pinned entry lists it (MCP-90).
            if let Answered::Complete(contents) = &read {
                source.verified(&upstream, contents)?;
            }
            Ok(served(source, read, served_contents))
        };
        let read = Read {
            scope,
            principal: &caller.principal,
            method: OfferRequest::Resource.method(),
            arguments: json!({ "uri": uri }),
            follows,
            connection: &source.connection,
        };
        self.recorded(read, work, read_summary).await
    }

    /// `read` recorded around `work`; an upstream asking for input ends the row
    /// `input_required` (MCP-81, LEDGER-67).
    async fn recorded<W>(
        &self,
        read: Read<'_>,
        work: W,
        summary: fn(&Answered) -> Value,
    ) -> Result<OfferAnswer, CallerRefusal>
    where
        W: Future<Output = Result<Answered, ToolError>>,
    {
        let (row, answer) = match self.gateway.record_read(read, work, summary).await {
            Ok(recorded) => recorded,
            Err(GatewayError::Ledger(LedgerError::RequestStateUsed { .. })) => {
                return Err(CallerRefusal::Replayed);
            }
            Err(e) => return Err(internal(&e).into()),
        };
        match answer.map_err(|e| upstream_failure(&e))? {
            Answered::Complete(complete) => Ok(OfferAnswer::Complete(complete)),
            Answered::InputRequired {
                requests,
                upstream_state,
            } => Ok(OfferAnswer::InputRequired {
                invocation_id: row.to_string(),
                requests,
                upstream_state,
            }),
        }
    }

    /// The caller's own `request` of `round.previous`, if it asked for input: the row the next
    /// round follows (LEDGER-67).
    async fn followed(
        &self,
        scope: &ScopeId,
        caller: &Caller,
        request: OfferRequest,
        round: &RoundCall,
    ) -> Result<RoundUse, HostError> {
        let previous = self.mcp_row(scope, caller, &round.previous).await?;
        let key = match request {
            OfferRequest::Prompt => "name",
            OfferRequest::Resource => "uri",
        };
        let same = previous.tool == request.method()
            && previous.arguments[key].as_str() == Some(round.tool.as_str());
        if !same || previous.state != InvocationState::InputRequired {
            let why = format!(
                "invocation {} is not a {} of this entry that asked for input",
                round.previous,
                request.method()
            );
            return Err(HostError::NotFound(why));
        }
        Ok(RoundUse {
            nonce: round.state_id.clone(),
            previous: previous.id,
            by: caller.principal.clone(),
        })
    }
}

/// A first request's refusal: only a retry can be a replay.
fn host_only(refused: CallerRefusal) -> HostError {
    match refused {
        CallerRefusal::Host(error) => error,
        CallerRefusal::Replayed => HostError::Internal("a first request replayed".into()),
    }
}

impl OfferHost for McpHost {
    fn offers(&self, scope: &ScopeId) -> Offers {
        self.gateway.offered().offers(scope)
    }

    fn list_offered(
        &self,
        scope: &ScopeId,
        caller: &Caller,
        list: Listed,
    ) -> Result<Vec<Entry>, HostError> {
        if self.gateway.scope(scope).is_none() {
            return Err(unknown_scope(scope));
        }
        let visible = |name: &str| self.sees(scope, caller, name);
        Ok(self.gateway.offered().list(scope, list, &visible))
    }

    fn read_resource<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        uri: &'a str,
    ) -> BoxFuture<'a, Result<OfferAnswer, HostError>> {
        Box::pin(async move {
            let read = self.got_resource(scope, caller, uri, None).await;
            read.map_err(host_only)
        })
    }

    fn get_prompt<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        params: Entry,
    ) -> BoxFuture<'a, Result<OfferAnswer, HostError>> {
        Box::pin(async move {
            let got = self.got_prompt(scope, caller, params, None).await;
            got.map_err(host_only)
        })
    }

    fn continue_offer<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        request: OfferRequest,
        round: RoundCall,
    ) -> BoxFuture<'a, Result<OfferAnswer, CallerRefusal>> {
        Box::pin(async move {
            let follows = self.followed(scope, caller, request, &round).await?;
            match request {
                OfferRequest::Prompt => {
                    let mut params = Map::new();
                    params.insert("name".into(), Value::String(round.tool));
                    if round.arguments.is_object() {
                        params.insert("arguments".into(), round.arguments);
                    }
                    self.got_prompt(scope, caller, params, Some(follows)).await
                }
                OfferRequest::Resource => {
                    let uri = &round.tool;
                    self.got_resource(scope, caller, uri, Some(follows)).await
                }
            }
        })
    }

    fn watch_resources(
        &self,
        scope: &ScopeId,
        caller: &Caller,
        uris: Vec<String>,
    ) -> BoxStream<'static, String> {
        let visible = |name: &str| self.sees(scope, caller, name);
        let updates = self.gateway.offered().watch(scope, &uris, &visible);
        let next = |mut updates: tokio::sync::mpsc::Receiver<String>| async move {
            updates.recv().await.map(|uri| (uri, updates))
        };
        Box::pin(futures::stream::unfold(updates, next))
    }

    fn complete<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        mut params: Entry,
    ) -> BoxFuture<'a, Result<Entry, HostError>> {
        Box::pin(async move {
            let visible = |name: &str| self.sees(scope, caller, name);
            let mut reference = match params.get("ref") {
                Some(Value::Object(reference)) => reference.clone(),
                _ => return Err(HostError::InvalidParams("`ref` must be an object".into())),
            };
            let offered = self.gateway.offered();
            let (source, key, upstream_ref) = match text(&reference, "type") {
                "ref/prompt" => {
                    let found = offered.prompt(scope, text(&reference, "name"), &visible);
                    found.map(|(s, name)| (s, "name", name))
                }
                "ref/resource" => {
                    let found = offered.template(scope, text(&reference, "uri"), &visible);
                    found.map(|(s, uri)| (s, "uri", uri))
                }
                _ => None,
            }
            .ok_or_else(|| {
                HostError::InvalidParams("`ref` names no prompt or resource template here".into())
            })?;
            if !source.completes() {
                // The upstream completes nothing: no suggestion is an honest answer.
                return Ok(no_suggestion());
            }
            reference.insert(key.into(), Value::String(upstream_ref));
            params.insert("ref".into(), Value::Object(reference));
            let client = &source.client;
            let done = client.complete(&source.target, params).await;
            done.map_err(|e| upstream_failure(&mcp_error(e)))
        })
    }
}

fn text<'a>(entry: &'a Entry, key: &str) -> &'a str {
    entry.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn no_suggestion() -> Entry {
    let mut done = Map::new();
    done.insert("completion".into(), json!({ "values": [] }));
    done
}

/// The upstream's failure as the client reads it: the message and its kind, never a secret.
fn upstream_failure(error: &ToolError) -> HostError {
    HostError::Upstream(format!("{} ({})", error.message, error.kind))
}

/// `result` with each content's URI served mapped.
fn served_contents(source: &Source, mut result: Entry) -> Entry {
    if let Some(Value::Array(contents)) = result.get_mut("contents") {
        contents.iter_mut().for_each(|c| map_uri(source, c));
    }
    result
}

/// `result` with the URI of each embedded resource and resource link served mapped.
fn served_messages(source: &Source, mut result: Entry) -> Entry {
    if let Some(Value::Array(messages)) = result.get_mut("messages") {
        for content in messages.iter_mut().filter_map(|m| m.get_mut("content")) {
            match content.get_mut("resource") {
                Some(resource) => map_uri(source, resource),
                None => map_uri(source, content),
            }
        }
    }
    result
}

fn map_uri(source: &Source, holder: &mut Value) {
    if let Some(Value::String(uri)) = holder.get_mut("uri") {
        *uri = source.served_uri(uri);
    }
}

/// What the row of a resource read keeps: each content's URI, type and size, not its bytes.
fn read_summary(answer: &Answered) -> Value {
    let Answered::Complete(result) = answer else {
        return asked_summary(answer);
    };
    let contents = result.get("contents").and_then(Value::as_array);
    let summary: Vec<Value> = contents
        .into_iter()
        .flatten()
        .map(|c| {
            let (kind, body) = match (c.get("text"), c.get("blob")) {
                (Some(Value::String(t)), _) => ("text", t.len()),
                (_, Some(Value::String(b))) => ("blob", b.len()),
                _ => ("empty", 0),
            };
            json!({ "uri": c.get("uri"), "mimeType": c.get("mimeType"), "kind": kind, "chars": body })
        })
        .collect();
    json!({ "contents": summary })
}

/// What the row of a prompt got keeps: how many messages came back.
fn prompt_summary(answer: &Answered) -> Value {
    let Answered::Complete(result) = answer else {
        return asked_summary(answer);
    };
    let messages = result
        .get("messages")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    json!({ "messages": messages })
}

/// When the upstream asked for input: what it asked and its own state, which end the row
/// `input_required` and are what the next round continues (LEDGER-67).
fn asked_summary(answer: &Answered) -> Value {
    let Answered::InputRequired {
        requests,
        upstream_state,
    } = answer
    else {
        return Value::Null;
    };
    json!({ INPUT_REQUIRED_KEY: {
        "inputRequests": requests,
        "requestState": upstream_state,
    }})
}

/// An answer as served (`mapped` maps its URIs); a request for input as the upstream sent it.
fn served(source: &Source, answer: Answered, mapped: fn(&Source, Entry) -> Entry) -> Answered {
    match answer {
        Answered::Complete(complete) => Answered::Complete(mapped(source, complete)),
        asked @ Answered::InputRequired { .. } => asked,
    }
}
