//! [`Confirmations`] for [`Ledger`]: what a session holds for the person's consent.
//!
//! Guarantees: a session's held call changes only on the session's lane, so holding, answering
//! and taking it serialize with each other; a client's answer to a relayed request settles its
//! row on the row's lane, read fresh (another replica may hold it).

use serde_json::Value;

use super::Ledger;
use crate::commit::writer::Prefetch;
use crate::store::{Confirmations, LedgerFuture};
use crate::transitions::confirmations::{self, Answered, Confirmation};
use crate::transitions::lease;
use crate::vocabulary::error::ToolError;
use crate::vocabulary::ids::{InvocationId, RunId, SessionId};
use crate::vocabulary::model::Invocation;

impl Confirmations for Ledger {
    fn answer_relayed(
        &self,
        id: InvocationId,
        principal: &str,
        outcome: Result<Value, ToolError>,
    ) -> LedgerFuture<'_, Invocation> {
        let principal = principal.to_owned();
        // Another replica may hold the row: it is read as the database has it now.
        Box::pin(self.writer.submit(id.0, Prefetch::Fresh(id), move |tx, b| {
            let (principal, outcome) = (principal.clone(), outcome.clone());
            Box::pin(async move { lease::answer_relayed(tx, b, (id, &principal), outcome).await })
        }))
    }

    fn hold_confirmation(&self, held: Confirmation) -> LedgerFuture<'_, ()> {
        let key = held.session_id.0;
        Box::pin(self.writer.submit(key, Prefetch::Nothing, move |tx, b| {
            let held = held.clone();
            Box::pin(async move { confirmations::hold(tx, b, &held).await })
        }))
    }

    fn answer_confirmation(
        &self,
        session: SessionId,
        run: RunId,
        consent: bool,
    ) -> LedgerFuture<'_, Answered> {
        Box::pin(
            self.writer
                .submit(session.0, Prefetch::Nothing, move |tx, _| {
                    Box::pin(confirmations::answer(tx, session, run, consent))
                }),
        )
    }

    fn take_confirmation(
        &self,
        session: SessionId,
        run: RunId,
        held: (String, String),
        call_id: String,
    ) -> LedgerFuture<'_, bool> {
        Box::pin(
            self.writer
                .submit(session.0, Prefetch::Nothing, move |tx, _| {
                    let (held, call_id) = (held.clone(), call_id.clone());
                    Box::pin(async move {
                        confirmations::take(tx, session, run, (&held.0, &held.1), &call_id).await
                    })
                }),
        )
    }

    fn held_confirmation(&self, session: SessionId) -> LedgerFuture<'_, Option<Confirmation>> {
        Box::pin(confirmations::held(&self.pool, session))
    }
}
