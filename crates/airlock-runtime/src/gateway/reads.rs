//! A read on the MCP endpoint (a resource read, a prompt got) as a ledger row: recorded and
//! claimed in one commit, never gated, finished with what came back (docs/rules.md
//! LEDGER-59, LEDGER-60).
//!
//! Guarantees: the row is written before anything is sent upstream, so every read that reached
//! an upstream has its row, under the caller's principal, on channel `mcp` in a session of the
//! request's scope; the row is `succeeded` with a summary of the answer (never its bytes) or
//! `failed` with the error, as a read-only call's would be. A read never parks: it is recorded
//! `approval: never`, and `[[access]]` was applied before (an entry the caller may not see is
//! not found, and leaves no row). A read that continues one whose upstream asked for input
//! (a relayed prompt round, MCP-81) is recorded with `follows`, so the retry's state is used in
//! the commit that records it (LEDGER-67). A read a freeze covers (everything, the scope's
//! agent, the caller, the connection its server is reached through) is recorded denied by the
//! freeze and nothing is sent (POLICY-52).

use std::future::Future;

use airlock_ledger::{InvocationId, NewInvocation, NewSession, RoundUse, SessionId, SourceKind};
use airlock_spec::{Effect, ScopeId};
use serde_json::Value;

use super::{Gateway, GatewayError};
use crate::error::{ToolError, ToolErrorKind};
use crate::freeze::{self, Covered};
use crate::session;

/// What a read is recorded as: its method (the row's tool), and its arguments.
pub(crate) struct Read<'a> {
    pub(crate) scope: &'a ScopeId,
    pub(crate) principal: &'a str,
    /// `resources/read` or `prompts/get`.
    pub(crate) method: &'static str,
    /// As the caller asked (served names and URIs).
    pub(crate) arguments: Value,
    /// The read whose input round this one continues, and the state's use.
    pub(crate) follows: Option<RoundUse>,
    /// The connection the server read from is reached through.
    pub(crate) connection: &'a str,
}

impl Gateway {
    /// What the scopes' upstreams offer beside tools.
    pub(crate) fn offered(&self) -> &crate::offered::Offered {
        &self.offered
    }

    /// Records `read`, runs `work`, and stores `summary` of its answer (or its error); the
    /// read's row id and its answer.
    pub(crate) async fn record_read<T, W>(
        &self,
        read: Read<'_>,
        work: W,
        summary: fn(&T) -> Value,
    ) -> Result<(InvocationId, Result<T, ToolError>), GatewayError>
    where
        W: Future<Output = Result<T, ToolError>>,
    {
        let digest = self
            .scopes
            .get(read.scope)
            .map(|s| s.digest.clone())
            .ok_or_else(|| GatewayError::UnknownScope(read.scope.clone()))?;
        let session = SessionId::new();
        let opened = NewSession {
            channel: "mcp".to_owned(),
            principal: Some(read.principal.to_owned()),
            metadata: session::metadata(read.scope),
        };
        let mut new = NewInvocation::new(session, "mcp", read.method, read.arguments, digest);
        new.source_kind = SourceKind::Mcp;
        // A freeze of everything, the scope's agent, the caller or the connection refuses a
        // read as it refuses a call: recorded denied, nothing sent (POLICY-52).
        let covered = Covered {
            agent: freeze::agent_of(read.scope),
            principal: Some(read.principal),
            tool: read.method,
            connection: Some(read.connection),
        };
        let frozen = self.freezes.covering(&covered);
        new.refusal = frozen.as_ref().map(freeze::refusal);
        // Reading twice changes nothing: a read left running by a crash is not in doubt.
        new.effect = Effect::Idempotent;
        new.principal = Some(read.principal.to_owned());
        let row = if read.follows.is_some() {
            // Recorded on the lane of the read it follows (LEDGER-62): the session goes first.
            new.follows = read.follows;
            self.store.create_session(session, opened).await?;
            let recorded = self.store.record_and_claim(new, &self.owner, self.lease);
            recorded.await?.invocation
        } else {
            // One commit lane: the session is written right before the row that needs it.
            let (opened, recorded) = futures::join!(
                self.store.create_session(session, opened),
                self.store.record_and_claim(new, &self.owner, self.lease)
            );
            opened?;
            recorded?.invocation
        };
        if let Some(frozen) = frozen {
            let refused = ToolError::new(ToolErrorKind::Unavailable, freeze::reason(&frozen));
            return Ok((row.id, Err(refused)));
        }
        let answer = work.await;
        let stored = match &answer {
            Ok(answer) => Ok(summary(answer)),
            Err(error) => Err(error.clone()),
        };
        self.finish(row.id, stored).await?;
        Ok((row.id, answer))
    }
}
