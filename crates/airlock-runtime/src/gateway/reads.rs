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

use airlock_ledger::{
    Invocation, InvocationId, NewInvocation, NewSession, RoundUse, SessionId, SourceKind,
};
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
        let who = (read.scope, read.principal);
        let (opened, mut new) = endpoint_row(self, who, ("mcp", read.method), read.arguments)?;
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
        // Recorded on the lane of the read it follows, if any (LEDGER-62).
        new.follows = read.follows;
        let row = record_with_session(self, opened, new).await?;
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

/// The row of a request on the MCP endpoint that is not a tool call (a read, a request relayed
/// to the client): in a session of its own on channel `mcp` of `scope`, under `principal`,
/// with call id and tool as `(call_id, tool)`; the session to open with it.
pub(super) fn endpoint_row(
    gateway: &Gateway,
    (scope, principal): (&ScopeId, &str),
    (call_id, tool): (&str, &str),
    arguments: Value,
) -> Result<(NewSession, NewInvocation), GatewayError> {
    let digest = gateway
        .scopes
        .get(scope)
        .map(|s| s.digest.clone())
        .ok_or_else(|| GatewayError::UnknownScope(scope.clone()))?;
    let opened = session::on_mcp(scope, principal);
    let mut new = NewInvocation::new(SessionId::new(), call_id, tool, arguments, digest);
    new.source_kind = SourceKind::Mcp;
    new.principal = Some(principal.to_owned());
    Ok((opened, new))
}

/// Records and claims `new` with its new session `opened`, in one job and so one commit
/// (LEDGER-90).
pub(super) async fn record_with_session(
    gateway: &Gateway,
    opened: NewSession,
    mut new: NewInvocation,
) -> Result<Invocation, GatewayError> {
    new.opens = Some(opened);
    let recorded = gateway
        .store
        .record_and_claim(new, &gateway.owner, gateway.lease);
    Ok(recorded.await?.invocation)
}
