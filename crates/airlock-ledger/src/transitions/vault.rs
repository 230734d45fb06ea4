//! Credentials per principal (docs/rules.md LEDGER-81 … LEDGER-83): each principal's sealed
//! credential for a connection, and the calls that wait for one. Which credential an attempt
//! carried is on the call's own row (LEDGER-84, `CredentialUse`).
//!
//! Guarantees: the ledger stores only what the serving process sealed (it never sees a secret
//! in the clear) and a digest of the token for the audit; setting a credential releases, in
//! the same transaction, every call of that principal waiting for it on that connection
//! (`awaiting_credential → approved`, each a compare-and-swap), so each runs once, claimed like
//! any approved call; a call parked while a credential was being set finds it in its own
//! transaction and is released at once, so no call waits for a credential that exists; every
//! set and revoke is an event row (who, when, which digest), which is also what every replica
//! watches to drop its copies.

use time::OffsetDateTime;

use crate::sql::db::{DbPool, DbRow};
use crate::sql::tx::LedgerTx;
use crate::transitions::batch::Batch;
use crate::transitions::lease;
use crate::vocabulary::clock::{from_micros, to_micros};
use crate::vocabulary::error::{LedgerError, ToolError, ToolErrorKind};
use crate::vocabulary::ids::InvocationId;
use crate::vocabulary::model::Invocation;
use crate::vocabulary::state::InvocationState as S;

/// A principal's credential for a connection, as stored: sealed by the serving process.
#[derive(Clone, PartialEq, Eq)]
pub struct SealedCredential {
    /// The connection (`[connections.<name>]`).
    pub connection: String,
    /// Whose it is.
    pub principal: String,
    /// `secret` (set by the person) or `oauth` (a connected account).
    pub kind: String,
    /// The secret or access token, sealed.
    pub sealed: String,
    /// An OAuth refresh token, sealed.
    pub refresh_sealed: Option<String>,
    /// When the access token expires, if it does.
    pub expires_at: Option<OffsetDateTime>,
    /// Who issued it (an OAuth issuer's token endpoint), if anyone.
    pub issuer: Option<String>,
    /// A digest of the secret (the audit's; never the secret).
    pub digest: String,
    /// Who set it.
    pub set_by: String,
    /// When (the ledger's time when written).
    pub set_at: OffsetDateTime,
}

impl std::fmt::Debug for SealedCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealedCredential")
            .field("connection", &self.connection)
            .field("principal", &self.principal)
            .field("kind", &self.kind)
            .field("digest", &self.digest)
            .finish_non_exhaustive()
    }
}

/// Stores `credential` (replacing the one before) and releases the calls waiting for it;
/// returns the released calls' ids.
pub(crate) async fn set(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    credential: &SealedCredential,
) -> Result<Vec<InvocationId>, LedgerError> {
    let c = credential;
    tx.inner
        .execute(
            "INSERT INTO principal_credentials (connection, principal, kind, sealed, \
             refresh_sealed, expires_at, issuer, digest, set_by, set_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
             ON CONFLICT (connection, principal) DO UPDATE SET kind = excluded.kind, \
             sealed = excluded.sealed, refresh_sealed = excluded.refresh_sealed, \
             expires_at = excluded.expires_at, issuer = excluded.issuer, \
             digest = excluded.digest, set_by = excluded.set_by, set_at = excluded.set_at",
            &[
                c.connection.clone().into(),
                c.principal.clone().into(),
                c.kind.clone().into(),
                c.sealed.clone().into(),
                c.refresh_sealed.clone().into(),
                c.expires_at.map(to_micros).into(),
                c.issuer.clone().into(),
                c.digest.clone().into(),
                c.set_by.clone().into(),
                to_micros(batch.now).into(),
            ],
        )
        .await?;
    let key = (c.connection.as_str(), c.principal.as_str());
    event(
        tx,
        batch,
        key,
        ("set", Some(&c.kind), Some(&c.digest)),
        &c.set_by,
    )
    .await?;
    release(tx, batch, key).await
}

/// Removes the credentials of `principal` (on `connection`, or on every connection); returns
/// how many there were.
pub(crate) async fn revoke(
    tx: &mut LedgerTx,
    batch: &Batch,
    connection: Option<&str>,
    principal: &str,
    by: &str,
) -> Result<u32, LedgerError> {
    let rows = tx
        .inner
        .fetch_all(
            "SELECT connection, digest FROM principal_credentials \
             WHERE principal = $1 AND ($2 IS NULL OR connection = $2) ORDER BY connection",
            &[
                principal.to_owned().into(),
                connection.map(str::to_owned).into(),
            ],
        )
        .await?;
    for row in &rows {
        let (conn, digest) = (row.req_text("connection")?, row.req_text("digest")?);
        tx.inner
            .execute(
                "DELETE FROM principal_credentials WHERE connection = $1 AND principal = $2",
                &[conn.clone().into(), principal.to_owned().into()],
            )
            .await?;
        let key = (conn.as_str(), principal);
        event(tx, batch, key, ("revoked", None, Some(&digest)), by).await?;
    }
    Ok(u32::try_from(rows.len()).unwrap_or(u32::MAX))
}

/// Parks the running call `id` (nothing was sent) until its principal has a credential for
/// `connection`; `message` is what its caller reads meanwhile. Released at once when the
/// credential was set since the executor looked.
pub(crate) async fn await_credential(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    (id, owner): (InvocationId, &str),
    connection: &str,
    message: &str,
) -> Result<Invocation, LedgerError> {
    let inv = batch.load_required(tx, id).await?;
    let Some(principal) = inv.principal.clone() else {
        return Err(LedgerError::Invalid(
            "a call without a principal cannot wait for a principal's credential".to_owned(),
        ));
    };
    if inv.state != S::Running || inv.lease.as_ref().is_none_or(|l| l.owner != owner) {
        return Err(lease::lease_lost(&inv, owner));
    }
    let mut next = inv.clone();
    next.state = S::AwaitingCredential;
    next.error = Some(ToolError::new(ToolErrorKind::CredentialMissing, message));
    next.expires_at = Some(batch.now + batch.approval_ttl);
    let parked = batch
        .save_or(tx, &inv, next, |now| lease::lease_lost(now, owner))
        .await?;
    tx.inner
        .execute(
            "INSERT INTO credential_waits (invocation_id, connection, principal) \
             VALUES ($1, $2, $3) ON CONFLICT (invocation_id) DO UPDATE SET \
             connection = excluded.connection, principal = excluded.principal",
            &[
                id.to_string().into(),
                connection.to_owned().into(),
                principal.clone().into(),
            ],
        )
        .await?;
    if stored(tx, connection, &principal).await? {
        release(tx, batch, (connection, &principal)).await?;
        return batch.load_required(tx, id).await;
    }
    Ok(parked)
}

/// The calls waiting for (connection, principal) become `approved`; their waits are removed.
async fn release(
    tx: &mut LedgerTx,
    batch: &mut Batch,
    (connection, principal): (&str, &str),
) -> Result<Vec<InvocationId>, LedgerError> {
    let waits = tx
        .inner
        .fetch_all(
            "SELECT invocation_id FROM credential_waits WHERE connection = $1 AND principal = $2 \
             ORDER BY invocation_id",
            &[connection.to_owned().into(), principal.to_owned().into()],
        )
        .await?;
    let mut released = Vec::with_capacity(waits.len());
    for wait in &waits {
        let text = wait.req_text("invocation_id")?;
        let id = text
            .parse::<InvocationId>()
            .map_err(|e| LedgerError::Corrupt {
                entity: "credential wait",
                id: text.clone(),
                reason: e.to_string(),
            })?;
        tx.inner
            .execute(
                "DELETE FROM credential_waits WHERE invocation_id = $1",
                &[text.into()],
            )
            .await?;
        let inv = batch.load_required(tx, id).await?;
        if inv.state != S::AwaitingCredential {
            continue;
        }
        let mut next = inv.clone();
        next.state = S::Approved;
        next.expires_at = None;
        next.error = None;
        if batch.save(tx, &inv, next).await?.is_none() {
            return Err(LedgerError::Database(crate::support::deferred::lost_race()));
        }
        released.push(id);
    }
    Ok(released)
}

async fn stored(tx: &mut LedgerTx, connection: &str, principal: &str) -> Result<bool, LedgerError> {
    let row = tx
        .inner
        .fetch_optional(
            "SELECT 1 AS one FROM principal_credentials WHERE connection = $1 AND principal = $2",
            &[connection.to_owned().into(), principal.to_owned().into()],
        )
        .await?;
    Ok(row.is_some())
}

async fn event(
    tx: &mut LedgerTx,
    batch: &Batch,
    (connection, principal): (&str, &str),
    (action, kind, digest): (&str, Option<&String>, Option<&String>),
    by: &str,
) -> Result<(), LedgerError> {
    tx.inner
        .execute(
            "INSERT INTO credential_events (connection, principal, action, kind, digest, \
             by_whom, at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[
                connection.to_owned().into(),
                principal.to_owned().into(),
                action.to_owned().into(),
                kind.cloned().into(),
                digest.cloned().into(),
                by.to_owned().into(),
                to_micros(batch.now).into(),
            ],
        )
        .await?;
    Ok(())
}

/// Marks the connect state `nonce` used; `false` when it was used before (LEDGER-85).
pub(crate) async fn use_connect_state(
    tx: &mut LedgerTx,
    batch: &Batch,
    nonce: &str,
) -> Result<bool, LedgerError> {
    let inserted = tx
        .inner
        .execute(
            "INSERT INTO connect_states (nonce, at) VALUES ($1, $2) ON CONFLICT (nonce) DO NOTHING",
            &[nonce.to_owned().into(), to_micros(batch.now).into()],
        )
        .await?;
    Ok(inserted == 1)
}

/// The stored credential of (connection, principal).
pub(crate) async fn get(
    pool: &DbPool,
    connection: &str,
    principal: &str,
) -> Result<Option<SealedCredential>, LedgerError> {
    let row = pool
        .fetch_optional(
            "SELECT connection, principal, kind, sealed, refresh_sealed, expires_at, issuer, \
             digest, set_by, set_at FROM principal_credentials \
             WHERE connection = $1 AND principal = $2",
            &[connection.to_owned().into(), principal.to_owned().into()],
        )
        .await?;
    row.as_ref().map(read).transpose()
}

/// Every stored credential (of `principal`, when given), sealed, by connection then principal.
pub(crate) async fn list(
    pool: &DbPool,
    principal: Option<&str>,
) -> Result<Vec<SealedCredential>, LedgerError> {
    let rows = pool
        .fetch_all(
            "SELECT connection, principal, kind, sealed, refresh_sealed, expires_at, issuer, \
             digest, set_by, set_at FROM principal_credentials \
             WHERE ($1 IS NULL OR principal = $1) ORDER BY connection, principal",
            &[principal.map(str::to_owned).into()],
        )
        .await?;
    rows.iter().map(read).collect()
}

/// How many sets and revokes were ever made: changes whenever any credential does.
pub(crate) async fn epoch(pool: &DbPool) -> Result<i64, LedgerError> {
    let row = pool
        .fetch_optional("SELECT COUNT(*) AS n FROM credential_events", &[])
        .await?;
    Ok(row.map(|r| r.req_int("n")).transpose()?.unwrap_or(0))
}

fn read(row: &DbRow) -> Result<SealedCredential, LedgerError> {
    let time = |col: &str, v: i64| {
        from_micros(v).ok_or_else(|| LedgerError::Corrupt {
            entity: "principal credential",
            id: String::new(),
            reason: format!("column {col}: {v} is no time"),
        })
    };
    Ok(SealedCredential {
        connection: row.req_text("connection")?,
        principal: row.req_text("principal")?,
        kind: row.req_text("kind")?,
        sealed: row.req_text("sealed")?,
        refresh_sealed: row.text("refresh_sealed")?,
        expires_at: row
            .int("expires_at")?
            .map(|v| time("expires_at", v))
            .transpose()?,
        issuer: row.text("issuer")?,
        digest: row.req_text("digest")?,
        set_by: row.req_text("set_by")?,
        set_at: time("set_at", row.req_int("set_at")?)?,
    })
}
