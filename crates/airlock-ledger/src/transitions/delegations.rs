//! Delegations (docs/rules.md LEDGER-79): a decider hands their role to another principal
//! until a time.
//!
//! Guarantees: a delegation starts at the ledger's time, ends at a later one, names two
//! different principals, and is never deleted (the rows are the audit of who could decide for
//! whom, when); a delegation in force is one whose end is after the ledger's time.

use time::OffsetDateTime;

use crate::sql::db::DbPool;
use crate::sql::tx::LedgerTx;
use crate::transitions::batch::Batch;
use crate::vocabulary::clock::{from_micros, to_micros};
use crate::vocabulary::error::LedgerError;

/// `from` hands their role as a decider to `to` until `until`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delegation {
    /// Whose role it is.
    pub from: String,
    /// Who takes it.
    pub to: String,
    /// When it ends.
    pub until: OffsetDateTime,
}

/// Records that `from` hands their role to `to` for `lasts`, from the ledger's time (its clock,
/// not a replica's).
pub(crate) async fn delegate(
    tx: &mut LedgerTx,
    batch: &Batch,
    (from, to, lasts): (&str, &str, std::time::Duration),
) -> Result<Delegation, LedgerError> {
    let until = time::Duration::try_from(lasts)
        .ok()
        .and_then(|lasts| batch.now.checked_add(lasts))
        .unwrap_or(batch.now);
    let delegation = Delegation {
        from: from.to_owned(),
        to: to.to_owned(),
        until,
    };
    if delegation.from == delegation.to {
        return Err(LedgerError::Invalid(
            "a delegation hands a role to someone else".to_owned(),
        ));
    }
    if delegation.until <= batch.now {
        return Err(LedgerError::Invalid(
            "a delegation ends after it starts".to_owned(),
        ));
    }
    tx.inner
        .execute(
            "INSERT INTO delegations (from_principal, to_principal, starts_at, ends_at) \
             VALUES ($1, $2, $3, $4)",
            &[
                delegation.from.clone().into(),
                delegation.to.clone().into(),
                to_micros(batch.now).into(),
                to_micros(delegation.until).into(),
            ],
        )
        .await?;
    Ok(delegation)
}

/// The delegations to `to` in force at `now`.
pub(crate) async fn to(
    pool: &DbPool,
    to: &str,
    now: OffsetDateTime,
) -> Result<Vec<Delegation>, LedgerError> {
    let rows = pool
        .fetch_all(
            "SELECT from_principal, to_principal, ends_at FROM delegations \
             WHERE to_principal = $1 AND ends_at > $2 AND starts_at <= $2 \
             ORDER BY from_principal",
            &[to.to_owned().into(), to_micros(now).into()],
        )
        .await?;
    rows.iter()
        .map(|r| {
            let ends = r.req_int("ends_at")?;
            Ok(Delegation {
                from: r.req_text("from_principal")?,
                to: r.req_text("to_principal")?,
                until: from_micros(ends).ok_or_else(|| LedgerError::Corrupt {
                    entity: "delegation",
                    id: to.to_owned(),
                    reason: format!("column ends_at: {ends} is no time"),
                })?,
            })
        })
        .collect()
}
