//! PostgreSQL's announcer: the lanes' `NOTIFY`s sent off their path, in commit order, and
//! their jobs acknowledged once sent (docs/rules.md OPS-43, OPS-57; see the writer's `settle`).

use tokio::sync::mpsc;

use crate::commit::job::Job;

/// A committed batch's announcements and the jobs to acknowledge once they are sent.
pub(crate) struct Notice {
    pub(crate) messages: Vec<String>,
    pub(crate) jobs: Vec<Box<dyn Job>>,
}

/// Most batches one NOTIFY statement announces.
const NOTICES_PER_STATEMENT: usize = 64;

/// Sends the lanes' announcements — whatever queued meanwhile in one statement, so one round
/// trip however many batches committed while the last one was out, in commit order — then
/// acknowledges their jobs. Ends when every lane has ended.
pub(crate) async fn pg_announcer(pool: sqlx::PgPool, mut rx: mpsc::UnboundedReceiver<Notice>) {
    while let Some(first) = rx.recv().await {
        let mut notices = vec![first];
        while notices.len() < NOTICES_PER_STATEMENT {
            match rx.try_recv() {
                Ok(notice) => notices.push(notice),
                Err(_) => break,
            }
        }
        let messages: Vec<String> = notices
            .iter_mut()
            .flat_map(|n| std::mem::take(&mut n.messages))
            .collect();
        if !messages.is_empty()
            && let Err(error) = notify(&pool, messages).await
        {
            tracing::warn!(%error, "ledger NOTIFY failed; other processes' waiters wake at their deadline");
        }
        for notice in notices {
            notice.jobs.into_iter().for_each(Job::reply);
        }
    }
}

/// One statement, so one round trip: its implicit transaction commits with the local
/// `synchronous_commit = off` the same statement set.
async fn notify(pool: &sqlx::PgPool, messages: Vec<String>) -> Result<(), sqlx::Error> {
    sqlx::query(
        "SELECT set_config('synchronous_commit', 'off', true), pg_notify('airlock_ledger', m) \
         FROM unnest($1::text[]) AS m",
    )
    .bind(messages)
    .execute(pool)
    .await
    .map(|_| ())
}
