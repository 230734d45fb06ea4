//! Freezes (docs/rules.md LEDGER-73): what an operator froze, stored where every replica reads
//! it, and the history of every freeze and unfreeze.
//!
//! Guarantees: one freeze per target; freezing a frozen target again keeps the first freeze
//! (its reason, who and when) and writes nothing; unfreezing writes the lifted freeze's event
//! in the same transaction that removes it, so the history never misses a change; every
//! freeze and unfreeze is an event with who, when and why.

use time::OffsetDateTime;

use crate::sql::db::{DbPool, DbRow};
use crate::sql::tx::LedgerTx;
use crate::transitions::batch::Batch;
use crate::vocabulary::clock::{from_micros, to_micros};
use crate::vocabulary::error::LedgerError;

/// What a freeze stops: every call, or those of one agent, principal, connection or tool.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FreezeTarget {
    /// Every call of the deployment.
    Everything,
    /// The calls made in one agent's scope (its runs and its MCP endpoint).
    Agent(String),
    /// The calls of one principal.
    Principal(String),
    /// The calls of every tool on one connection (a connection file's, or a
    /// `[connections.<name>]` entry's).
    Connection(String),
    /// The calls of one tool, by its full name.
    Tool(String),
}

impl FreezeTarget {
    /// The stored word of its kind.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Everything => "everything",
            Self::Agent(_) => "agent",
            Self::Principal(_) => "principal",
            Self::Connection(_) => "connection",
            Self::Tool(_) => "tool",
        }
    }

    /// The name it freezes (empty for everything).
    #[must_use]
    pub fn name(&self) -> &str {
        match self {
            Self::Everything => "",
            Self::Agent(n) | Self::Principal(n) | Self::Connection(n) | Self::Tool(n) => n,
        }
    }

    /// The target a stored (kind, name) pair, or a caller's, names.
    ///
    /// # Errors
    /// `Invalid` naming the kinds, for an unknown kind or a missing (or superfluous) name.
    pub fn parse(kind: &str, name: &str) -> Result<Self, LedgerError> {
        let named = |make: fn(String) -> Self| {
            if name.is_empty() {
                Err(LedgerError::Invalid(format!(
                    "a `{kind}` freeze needs a name"
                )))
            } else {
                Ok(make(name.to_owned()))
            }
        };
        match kind {
            "everything" if name.is_empty() => Ok(Self::Everything),
            "everything" => Err(LedgerError::Invalid(
                "an `everything` freeze takes no name".to_owned(),
            )),
            "agent" => named(Self::Agent),
            "principal" => named(Self::Principal),
            "connection" => named(Self::Connection),
            "tool" => named(Self::Tool),
            other => Err(LedgerError::Invalid(format!(
                "unknown freeze kind `{other}` (everything, agent, principal, connection, tool)"
            ))),
        }
    }
}

impl std::fmt::Display for FreezeTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Everything => f.write_str("everything"),
            other => write!(f, "{} `{}`", other.kind(), other.name()),
        }
    }
}

/// One freeze in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Freeze {
    /// What it stops.
    pub target: FreezeTarget,
    /// Why, as the operator said it (shown to callers and people).
    pub reason: String,
    /// Who froze it.
    pub by: String,
    /// When (set by the ledger's clock when written).
    pub at: OffsetDateTime,
}

/// The longest reason a freeze may give (LEDGER-73).
const MAX_REASON: usize = 1_000;

pub(crate) async fn freeze(
    tx: &mut LedgerTx,
    batch: &Batch,
    freeze: &Freeze,
) -> Result<Freeze, LedgerError> {
    if freeze.reason.trim().is_empty() {
        return Err(LedgerError::Invalid("a freeze needs a reason".to_owned()));
    }
    if freeze.reason.chars().count() > MAX_REASON {
        // Every refused caller and every person asked to decide is shown it.
        return Err(LedgerError::Invalid(format!(
            "a freeze's reason is at most {MAX_REASON} characters"
        )));
    }
    let (kind, name) = (freeze.target.kind(), freeze.target.name());
    if let Some(standing) = find(tx, kind, name).await? {
        return Ok(standing);
    }
    tx.inner
        .execute(
            "INSERT INTO freezes (kind, name, reason, frozen_by, frozen_at) \
             VALUES ($1, $2, $3, $4, $5)",
            &[
                kind.into(),
                name.to_owned().into(),
                freeze.reason.clone().into(),
                freeze.by.clone().into(),
                to_micros(batch.now).into(),
            ],
        )
        .await?;
    event(
        tx,
        batch,
        &freeze.target,
        "freeze",
        &freeze.reason,
        &freeze.by,
    )
    .await?;
    Ok(Freeze {
        at: batch.now,
        ..freeze.clone()
    })
}

pub(crate) async fn unfreeze(
    tx: &mut LedgerTx,
    batch: &Batch,
    target: &FreezeTarget,
    by: &str,
) -> Result<Option<Freeze>, LedgerError> {
    let (kind, name) = (target.kind(), target.name());
    let Some(lifted) = find(tx, kind, name).await? else {
        return Ok(None);
    };
    tx.inner
        .execute(
            "DELETE FROM freezes WHERE kind = $1 AND name = $2",
            &[kind.into(), name.to_owned().into()],
        )
        .await?;
    event(tx, batch, target, "unfreeze", &lifted.reason, by).await?;
    Ok(Some(lifted))
}

/// Every freeze in force, oldest first.
pub(crate) async fn all(pool: &DbPool) -> Result<Vec<Freeze>, LedgerError> {
    let rows = pool
        .fetch_all(
            "SELECT kind, name, reason, frozen_by, frozen_at FROM freezes \
             ORDER BY frozen_at, kind, name",
            &[],
        )
        .await?;
    rows.iter().map(read).collect()
}

async fn find(tx: &mut LedgerTx, kind: &str, name: &str) -> Result<Option<Freeze>, LedgerError> {
    let row = tx
        .inner
        .fetch_optional(
            "SELECT kind, name, reason, frozen_by, frozen_at FROM freezes \
             WHERE kind = $1 AND name = $2",
            &[kind.into(), name.to_owned().into()],
        )
        .await?;
    row.as_ref().map(read).transpose()
}

async fn event(
    tx: &mut LedgerTx,
    batch: &Batch,
    target: &FreezeTarget,
    action: &str,
    reason: &str,
    by: &str,
) -> Result<(), LedgerError> {
    tx.inner
        .execute(
            "INSERT INTO freeze_events (kind, name, action, reason, by_whom, at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                target.kind().into(),
                target.name().to_owned().into(),
                action.to_owned().into(),
                reason.to_owned().into(),
                by.to_owned().into(),
                to_micros(batch.now).into(),
            ],
        )
        .await?;
    Ok(())
}

fn read(row: &DbRow) -> Result<Freeze, LedgerError> {
    let at = row.req_int("frozen_at")?;
    Ok(Freeze {
        target: FreezeTarget::parse(&row.req_text("kind")?, &row.req_text("name")?)?,
        reason: row.req_text("reason")?,
        by: row.req_text("frozen_by")?,
        at: from_micros(at)
            .ok_or_else(|| LedgerError::Invalid(format!("stored freeze time {at}")))?,
    })
}
