//! The next round of a relayed MCP call (docs/rules.md MCP-70, LEDGER-61, LEDGER-62): the retry
//! that continues a round whose upstream needed the client's input (the round as the endpoint
//! relays it is read in `view`).
//!
//! Guarantees: a round is continued only from the caller's own round of the same tool, made
//! through the MCP endpoint of the same scope, that ended `input_required`. The next round is
//! its own row in its own session, recorded without being gated again (the chain of sealed
//! states proves the first round's verdict), and the retry's state is used in the commit that
//! records and claims it, so of any number of retries with one state exactly one runs; the
//! others are replays. The access policy still applies to every round.

use airlock_ledger::{InvocationState, LedgerError, RoundUse, SessionId};
use airlock_mcp::{Caller, CallerRefusal, HostCall, HostError, RoundCall};
use airlock_spec::ScopeId;

use super::McpHost;
use super::internal;
use super::view::host_call;
use crate::gateway::{CallContext, GatewayError};
use crate::session;

impl McpHost {
    pub(super) async fn mcp_continue_round(
        &self,
        scope: &ScopeId,
        caller: &Caller,
        round: RoundCall,
    ) -> Result<HostCall, CallerRefusal> {
        let previous = self.mcp_row(scope, caller, &round.previous).await?;
        if previous.tool != round.tool || previous.state != InvocationState::InputRequired {
            let id = &round.previous;
            let why = format!("invocation {id} is not a round of this tool that asked for input");
            return Err(HostError::NotFound(why).into());
        }
        let principal = Some(caller.principal.clone());
        let ctx = CallContext {
            scope: scope.clone(),
            session: SessionId::new(),
            call_id: "mcp".to_owned(),
            principal,
            groups: Some(caller.groups.clone()),
            channel: "mcp",
            downstream: caller.downstream.clone(),
        };
        let new = session::on_mcp(scope, &caller.principal);
        let follows = RoundUse {
            nonce: round.state_id,
            previous: previous.id,
            by: caller.principal.clone(),
        };
        match self
            .gateway
            .call_round(&ctx, (&round.tool, round.arguments), follows, new)
            .await
        {
            Ok(outcome) => Ok(host_call(&outcome)),
            Err(GatewayError::Ledger(LedgerError::RequestStateUsed { .. })) => {
                Err(CallerRefusal::Replayed)
            }
            Err(GatewayError::UnknownTool(name)) => Err(HostError::UnknownTool(name).into()),
            Err(e) => Err(internal(&e).into()),
        }
    }
}
