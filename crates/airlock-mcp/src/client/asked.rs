//! The upstream session's side of on-stream requests (docs/rules.md MCP-94): a session opened
//! for a call whose endpoint request can take the upstream's `elicitation/create`,
//! `sampling/createMessage` and `roots/list` tells the upstream the capabilities its client
//! declared and hands each such request to the [`Asker`], which relays it to the client.
//!
//! Guarantees: the upstream's request reaches the client as the MCP SDK read it — rebuilt from
//! its typed params, so nothing outside what MCP defines for it is handed on — and the client's
//! answer comes back the same way: a result that does not read as the method's result is an
//! error to the upstream, never passed on as sent.

#![allow(
    deprecated,
    reason = "sampling and roots are deprecated (SEP-2577) yet part of 2025-11-25"
)]

use rmcp::handler::client::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ErrorData, ListRootsResult,
};
use rmcp::service::{RequestContext, RoleClient};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::asking::Asker;

/// The client of one upstream session whose call's endpoint request takes requests.
pub(crate) struct Asked {
    config: ClientConfig,
    asker: Asker,
    /// The idempotency key of the session's call (its invocation id).
    call: Option<String>,
}

impl Asked {
    /// A client like `config`, declaring what `asker`'s client declared, for the call `call`.
    pub(crate) fn new(mut config: ClientConfig, asker: Asker, call: Option<String>) -> Self {
        let declared = Value::Object(asker.capabilities().clone());
        // The three capabilities read as rmcp's own types; one that does not stays undeclared.
        config.capabilities =
            serde_json::from_value::<ClientCapabilities>(declared).unwrap_or_default();
        Self {
            config,
            asker,
            call,
        }
    }

    /// Relays `method` with `params` and waits for the answer, for as long as the session
    /// lives: rmcp runs a handler as a task of its own and, when the session ends, only cancels
    /// its context; the wait must end then, or the question would wait forever.
    async fn relay<P: Serialize, R: DeserializeOwned>(
        &self,
        method: &'static str,
        params: P,
        context: &RequestContext<RoleClient>,
    ) -> Result<R, ErrorData> {
        let params = serde_json::to_value(params)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let asked = tokio::select! {
            asked = self.asker.ask(method, params, self.call.clone()) => asked,
            () = context.ct.cancelled() => {
                return Err(ErrorData::internal_error("the session ended before the client answered", None));
            }
        };
        match asked {
            Ok(result) => serde_json::from_value(result).map_err(|e| {
                ErrorData::internal_error(
                    format!("the client's answer is not a {method} result: {e}"),
                    None,
                )
            }),
            Err(error) => Err(serde_json::from_value(error).unwrap_or_else(|_| {
                ErrorData::internal_error("the client answered with a malformed error", None)
            })),
        }
    }
}

impl ClientHandler for Asked {
    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.relay("sampling/createMessage", params, &context).await
    }

    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let none = Value::Object(serde_json::Map::new());
        self.relay("roots/list", none, &context).await
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.relay("elicitation/create", request, &context).await
    }

    fn get_info(&self) -> ClientConfig {
        self.config.clone()
    }
}
