//! [`Outbox`] for [`Ledger`]: claiming, settling and reading the notifications the state
//! machine wrote (docs/rules.md LEDGER-31 … LEDGER-34).
//!
//! Guarantees. A claim moves a row's `next_attempt_at` past the claimer's lease in the
//! claiming statement, so of any number of claimers (processes, replicas) exactly one holds a
//! row at a time: on SQLite the writer's `BEGIN IMMEDIATE` serializes claims, on PostgreSQL
//! `FOR UPDATE SKIP LOCKED` does. A row is delivered by one compare-and-set on
//! (`lease_owner`, undelivered), so it has exactly one `delivered` transition; a holder whose
//! lease ran out and was re-claimed can no longer settle it. Claims and settlements go through
//! the writer lanes like every other write.

use std::time::Duration;

use airlock_spec::NotifyEvent;
use sqlx::AssertSqlSafe;
use time::OffsetDateTime;
use tokio::sync::watch;
use uuid::Uuid;

use crate::commit::writer::Prefetch;
use crate::ledger::Ledger;
use crate::sql::db::{DbRow, DbTx};
use crate::store::{LedgerFuture, Outbox};
use crate::support::notice::{Notice, NoticeRecord};
use crate::vocabulary::clock::{from_micros, to_micros};
use crate::vocabulary::error::LedgerError;
use crate::vocabulary::ids::InvocationId;

/// Columns a claim returns and a listing reads.
const NOTICE_COLUMNS: &str = "id, destination, event, invocation_id, payload, created_at, \
     attempts, next_attempt_at, delivered_at, failed_at, last_error";

/// Rows still to deliver whose time has come (`$3`).
const DUE: &str = "delivered_at IS NULL AND failed_at IS NULL AND next_attempt_at <= $3";

/// The claim: up to `$4` due rows, each taken under `$1`'s lease until `$2`.
fn claim_sql(tx: &DbTx) -> String {
    let lock = match tx {
        DbTx::Sqlite(_) | DbTx::SqliteRead(_) => "",
        // Another replica's claim in progress is skipped, not waited for.
        DbTx::Postgres(_) => " FOR UPDATE SKIP LOCKED",
    };
    format!(
        "UPDATE notifications SET lease_owner = $1, next_attempt_at = $2, attempts = attempts + 1 \
         WHERE id IN (SELECT id FROM notifications WHERE {DUE} \
         ORDER BY next_attempt_at LIMIT $4{lock}) AND {DUE} RETURNING {NOTICE_COLUMNS}"
    )
}

fn corrupt(id: &str, reason: impl std::fmt::Display) -> LedgerError {
    LedgerError::Corrupt {
        entity: "notification",
        id: id.to_owned(),
        reason: reason.to_string(),
    }
}

fn time_of(id: &str, micros: i64) -> Result<OffsetDateTime, LedgerError> {
    from_micros(micros).ok_or_else(|| corrupt(id, "a time out of range"))
}

fn read_record(row: &DbRow) -> Result<NoticeRecord, LedgerError> {
    let id = row.req_text("id")?;
    let event = row.req_text("event")?;
    let notice = Notice {
        id: id.parse().map_err(|e| corrupt(&id, e))?,
        destination: row.req_text("destination")?,
        event: event.parse::<NotifyEvent>().map_err(|e| corrupt(&id, e))?,
        invocation_id: row
            .req_text("invocation_id")?
            .parse()
            .map_err(|e| corrupt(&id, e))?,
        payload: serde_json::from_str(&row.req_text("payload")?).map_err(|e| corrupt(&id, e))?,
        created_at: time_of(&id, row.req_int("created_at")?)?,
        attempts: u32::try_from(row.req_int("attempts")?).unwrap_or(u32::MAX),
    };
    let optional = |col: &str| -> Result<Option<OffsetDateTime>, LedgerError> {
        row.int(col)?.map(|us| time_of(&id, us)).transpose()
    };
    Ok(NoticeRecord {
        delivered_at: optional("delivered_at")?,
        failed_at: optional("failed_at")?,
        next_attempt_at: time_of(&id, row.req_int("next_attempt_at")?)?,
        last_error: row.text("last_error")?,
        notice,
    })
}

fn lease_micros(lease: Duration) -> i64 {
    i64::try_from(lease.as_micros()).unwrap_or(i64::MAX / 2)
}

impl Outbox for Ledger {
    fn claim_notices(
        &self,
        owner: &str,
        lease: Duration,
        limit: u32,
    ) -> LedgerFuture<'_, Vec<Notice>> {
        let owner = owner.to_owned();
        Box::pin(
            self.writer
                .submit(Uuid::now_v7(), Prefetch::Nothing, move |tx, b| {
                    let owner = owner.clone();
                    Box::pin(async move {
                        let now = to_micros(b.now);
                        let until = now.saturating_add(lease_micros(lease));
                        let sql = claim_sql(&tx.inner);
                        let binds = [
                            owner.into(),
                            until.into(),
                            now.into(),
                            i64::from(limit).into(),
                        ];
                        let rows = tx.inner.fetch_all(AssertSqlSafe(sql), &binds).await?;
                        let mut out = Vec::with_capacity(rows.len());
                        for row in &rows {
                            out.push(read_record(row)?.notice);
                        }
                        out.sort_by_key(|n| n.id);
                        Ok(out)
                    })
                }),
        )
    }

    fn notice_delivered(
        &self,
        id: Uuid,
        owner: &str,
        reference: Option<String>,
    ) -> LedgerFuture<'_, bool> {
        let owner = owner.to_owned();
        Box::pin(self.writer.submit(id, Prefetch::Nothing, move |tx, b| {
            let (owner, reference) = (owner.clone(), reference.clone());
            Box::pin(async move {
                let now = to_micros(b.now);
                let row = tx
                    .inner
                    .fetch_optional(
                        "UPDATE notifications SET delivered_at = $1, lease_owner = NULL, \
                         last_error = NULL WHERE id = $2 AND lease_owner = $3 \
                         AND delivered_at IS NULL AND failed_at IS NULL \
                         RETURNING invocation_id, destination",
                        &[now.into(), id.to_string().into(), owner.into()],
                    )
                    .await?;
                let Some(row) = row else { return Ok(false) };
                if let Some(reference) = reference {
                    tx.inner
                        .execute(
                            "INSERT INTO notification_refs \
                             (invocation_id, destination, reference, created_at) \
                             VALUES ($1, $2, $3, $4) ON CONFLICT (invocation_id, destination) \
                             DO UPDATE SET reference = excluded.reference",
                            &[
                                row.req_text("invocation_id")?.into(),
                                row.req_text("destination")?.into(),
                                reference.into(),
                                now.into(),
                            ],
                        )
                        .await?;
                }
                Ok(true)
            })
        }))
    }

    fn notice_undelivered(
        &self,
        id: Uuid,
        owner: &str,
        retry_in: Option<Duration>,
        error: String,
    ) -> LedgerFuture<'_, bool> {
        let owner = owner.to_owned();
        Box::pin(self.writer.submit(id, Prefetch::Nothing, move |tx, b| {
            let (owner, error) = (owner.clone(), error.clone());
            Box::pin(async move {
                let now = to_micros(b.now);
                let (next, failed) = match retry_in {
                    Some(wait) => (now.saturating_add(lease_micros(wait)), None),
                    None => (now, Some(now)),
                };
                // RETURNING, not a count: on SQLite the count of a transaction's first
                // statement (behind its `BEGIN`) reads 0.
                let settled = tx
                    .inner
                    .fetch_optional(
                        "UPDATE notifications SET next_attempt_at = $1, failed_at = $2, \
                         last_error = $3, lease_owner = NULL WHERE id = $4 AND lease_owner = $5 \
                         AND delivered_at IS NULL AND failed_at IS NULL RETURNING id",
                        &[
                            next.into(),
                            failed.into(),
                            error.into(),
                            id.to_string().into(),
                            owner.into(),
                        ],
                    )
                    .await?;
                Ok(settled.is_some())
            })
        }))
    }

    fn notice_reference(
        &self,
        invocation: InvocationId,
        destination: &str,
    ) -> LedgerFuture<'_, Option<String>> {
        let destination = destination.to_owned();
        Box::pin(async move {
            let row = self
                .pool
                .fetch_optional(
                    "SELECT reference FROM notification_refs \
                     WHERE invocation_id = $1 AND destination = $2",
                    &[invocation.to_string().into(), destination.into()],
                )
                .await?;
            Ok(row.map(|r| r.req_text("reference")).transpose()?)
        })
    }

    fn notices_of(&self, invocation: InvocationId) -> LedgerFuture<'_, Vec<NoticeRecord>> {
        Box::pin(async move {
            let rows = self
                .pool
                .fetch_all(
                    AssertSqlSafe(format!(
                        "SELECT {NOTICE_COLUMNS} FROM notifications WHERE invocation_id = $1 \
                         ORDER BY created_at, id"
                    )),
                    &[invocation.to_string().into()],
                )
                .await?;
            rows.iter().map(read_record).collect()
        })
    }

    fn notices(&self) -> watch::Receiver<()> {
        self.wakeups.notices()
    }
}
