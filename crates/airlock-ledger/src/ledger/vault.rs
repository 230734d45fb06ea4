//! [`Vault`] for [`Ledger`]: setting and revoking credentials on one fixed lane (rare, an
//! operator's or a person's act, like freezes); parking a call for its credential and finishing
//! it with the credential it carried on the call's own lane, like every write of a call.

use serde_json::Value;

use super::Ledger;
use crate::commit::writer::Prefetch;
use crate::store::{LedgerFuture, Vault};
use crate::transitions::lease;
use crate::transitions::vault::{self, SealedCredential};
use crate::vocabulary::credential::CredentialUse;
use crate::vocabulary::error::ToolError;
use crate::vocabulary::ids::InvocationId;
use crate::vocabulary::model::Invocation;

impl Vault for Ledger {
    fn set_credential(&self, credential: SealedCredential) -> LedgerFuture<'_, Vec<InvocationId>> {
        Box::pin(
            self.writer
                .submit(uuid::Uuid::nil(), Prefetch::Nothing, move |tx, b| {
                    let credential = credential.clone();
                    Box::pin(async move { vault::set(tx, b, &credential).await })
                }),
        )
    }

    fn revoke_credential(
        &self,
        connection: Option<String>,
        principal: String,
        by: String,
    ) -> LedgerFuture<'_, u32> {
        Box::pin(
            self.writer
                .submit(uuid::Uuid::nil(), Prefetch::Nothing, move |tx, b| {
                    let (connection, principal, by) =
                        (connection.clone(), principal.clone(), by.clone());
                    Box::pin(async move {
                        vault::revoke(tx, b, connection.as_deref(), &principal, &by).await
                    })
                }),
        )
    }

    fn use_connect_state(&self, nonce: String) -> LedgerFuture<'_, bool> {
        Box::pin(
            self.writer
                .submit(uuid::Uuid::nil(), Prefetch::Nothing, move |tx, b| {
                    let nonce = nonce.clone();
                    Box::pin(async move { vault::use_connect_state(tx, b, &nonce).await })
                }),
        )
    }

    fn credential(
        &self,
        connection: String,
        principal: String,
    ) -> LedgerFuture<'_, Option<SealedCredential>> {
        Box::pin(async move { vault::get(&self.pool, &connection, &principal).await })
    }

    fn credentials(&self, principal: Option<String>) -> LedgerFuture<'_, Vec<SealedCredential>> {
        Box::pin(async move { vault::list(&self.pool, principal.as_deref()).await })
    }

    fn credentials_epoch(&self) -> LedgerFuture<'_, i64> {
        Box::pin(vault::epoch(&self.pool))
    }

    fn await_credential(
        &self,
        id: InvocationId,
        owner: &str,
        connection: String,
        message: String,
    ) -> LedgerFuture<'_, Invocation> {
        let owner = owner.to_owned();
        let hint = Prefetch::Running(id, owner.clone());
        Box::pin(self.writer.submit(id.0, hint, move |tx, b| {
            let (owner, connection, message) = (owner.clone(), connection.clone(), message.clone());
            Box::pin(async move {
                vault::await_credential(tx, b, (id, &owner), &connection, &message).await
            })
        }))
    }

    fn finish_with_credential(
        &self,
        id: InvocationId,
        owner: &str,
        outcome: Result<Value, ToolError>,
        used: CredentialUse,
    ) -> LedgerFuture<'_, Invocation> {
        let owner = owner.to_owned();
        let hint = Prefetch::Running(id, owner.clone());
        Box::pin(self.writer.submit(id.0, hint, move |tx, b| {
            let (owner, outcome, used) = (owner.clone(), outcome.clone(), used.clone());
            Box::pin(async move { lease::finish(tx, b, (id, &owner), outcome, Some(&used)).await })
        }))
    }
}
