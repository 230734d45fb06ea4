//! What the client of one endpoint request can take back from the upstream calls made for it:
//! an input round (MCP 2026-07-28 `input_required`, MCP-68), the upstream's own task (MCP-76),
//! progress and log notices (MCP-63), and the caller's own OAuth token for a connection that
//! exchanges it. The endpoint builds one per request and hands it, in
//! the [`crate::Caller`], to the host; the host puts it on each [`crate::McpTarget`] it calls
//! for that request; the client reads it from there.
//!
//! Guarantees: it travels as a value, never as ambient state, so a call made from a spawned
//! task, a later decision or an agent run carries exactly what its caller gave it — and one with
//! none ([`Downstream::default`]) relays nothing: its upstream is told airlock's own (empty)
//! client capabilities, is never offered a task, and its notices go nowhere.

use secrecy::SecretString;

use crate::asking::Asker;
use crate::relay::Relay;
use crate::rounds::Round;

/// What one endpoint request's client can take back from the upstream calls made for it.
#[derive(Debug, Clone, Default)]
pub struct Downstream {
    /// The round a 2026-07-28 request relays, with the capabilities its client declared.
    pub(crate) round: Option<Round>,
    /// Where the upstream's progress and log notices go, when the client asked for them.
    pub(crate) relay: Option<Relay>,
    /// Whether the upstream may answer with a task of its own (a 2026-07-28 client that follows
    /// tasks, MCP-76).
    pub(crate) offers_task: bool,
    /// Where the upstream's own requests go (elicitation, sampling, roots), for a session-era
    /// client that takes them on its call's stream (MCP-94).
    pub(crate) asker: Option<Asker>,
    /// The request's own OAuth access token, when its caller signed in with one: what a
    /// connection that exchanges each caller's token exchanges (docs/rules.md CALL-14). It
    /// goes with the request's calls and nowhere else.
    pub(crate) subject: Option<SecretString>,
}

impl Downstream {
    /// The OAuth access token the request's caller signed in with, if it did.
    #[must_use]
    pub fn subject_token(&self) -> Option<&SecretString> {
        self.subject.as_ref()
    }

    /// This, for a request whose caller signed in with `subject` (the endpoint sets it for a
    /// caller admitted by an OAuth access token).
    #[must_use]
    pub fn signed_in_with(mut self, subject: Option<SecretString>) -> Self {
        self.subject = subject;
        self
    }

    /// This, relaying `round` instead of the one it had (a retry's next round).
    pub(crate) fn with_round(mut self, round: Option<Round>) -> Self {
        self.round = round;
        self
    }

    /// Whether calls made with it relay an input round.
    #[must_use]
    pub fn relays_round(&self) -> bool {
        self.round.is_some()
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;
    use std::sync::Arc;

    use airlock_egress::{EgressPolicy, GuardedClient, StaticResolver};
    use airlock_testkit::{Script, Server};
    use serde_json::json;

    use super::*;
    use crate::relay::{LOG_LEVEL_META, Level};
    use crate::{McpClient, McpTarget, ToolCall};

    /// A call made from a spawned task — as an approval's continuation or a background task
    /// runs — still carries what its request's client can take back: its upstream is asked for
    /// progress. Ambient (task-local) state was dropped by exactly such a spawn.
    #[tokio::test]
    async fn a_spawned_call_keeps_what_its_request_can_take_back() {
        let server = Server::start(Script::default()).await;
        let policy = EgressPolicy {
            allow_cidrs: vec!["127.0.0.1/32".parse().unwrap()],
            ..EgressPolicy::default()
        };
        let resolver =
            StaticResolver::new().with("mcp.upstream.io", [IpAddr::from([127, 0, 0, 1])]);
        let guard = GuardedClient::builder(policy)
            .resolver(Arc::new(resolver))
            .build()
            .unwrap();
        let client = Arc::new(McpClient::new(guard));
        let (relay, _notices) = Relay::new(true, Some(Level::Info));
        let downstream = Downstream {
            relay: Some(relay),
            ..Downstream::default()
        };
        let target = McpTarget::new(server.url()).with_downstream(downstream);
        let call = ToolCall::new("echo", json!({}));
        let spawned = tokio::spawn(async move { client.call_tool(&target, &call).await });
        spawned.await.unwrap().unwrap();
        let asked = server
            .seen()
            .into_iter()
            .find(|seen| seen.method == "tools/call")
            .expect("the call reached its upstream");
        // Asked for progress (the session's client numbers its token) and for log messages.
        let meta = &asked.body["params"]["_meta"];
        assert!(!meta["progressToken"].is_null(), "{}", asked.body);
        assert_eq!(meta[LOG_LEVEL_META], "info", "{}", asked.body);
    }
}
