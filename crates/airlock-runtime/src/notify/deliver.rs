//! The delivery worker (docs/rules.md NOTIFY-8, NOTIFY-11, NOTIFY-12, LEDGER-31 … LEDGER-33):
//! claims due notices from the ledger's outbox, sends each, and settles it — delivered, retried
//! after a backoff, or given up with a log line after [`MAX_ATTEMPTS`] or on a final answer.
//!
//! Guarantees. A notice is sent only while this worker holds its lease ([`LEASE`], longer than
//! the egress deadline), so two workers — in one process or in replicas — never send the same
//! delivery at the same time; a crash before the mark leaves it due again once the lease ends,
//! and the retry carries the same delivery id, so a receiver drops the repeat. Woken when this
//! process commits notices, and every [`POLL`] for other processes' notices and for retries.
//! Stopping is that crash made orderly: the worker ends at once, even mid-send, so a shutdown
//! never waits on a receiver (docs/rules.md OPS-9). Every attempt is a request of its own
//! through the egress guard: the destination is checked again each time, and a redirect is a
//! failed attempt whose `Location` is never followed.

use std::sync::Arc;
use std::time::Duration;

use airlock_egress::GuardedClient;
use airlock_ledger::roles::Outbox;
use airlock_ledger::{Notice, NotifyEvent, SessionId, Store};
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio_util::sync::CancellationToken;

use super::{Notifications, SLACK, Undelivered, slack, webhook};
use crate::gateway::EVENTS;
use crate::session;

/// How long a claimed notice is this worker's: longer than the egress guard's deadline.
pub const LEASE: Duration = Duration::from_secs(90);
/// How often the worker looks without being woken.
pub const POLL: Duration = Duration::from_secs(1);
/// Attempts before a notice is given up (9 to 17 minutes of backoff in all).
pub const MAX_ATTEMPTS: u32 = 12;
/// Notices claimed per look.
const BATCH: u32 = 16;
/// The first retry's delay; each later one doubles, up to [`MAX_DELAY`].
const FIRST_DELAY: Duration = Duration::from_millis(500);
const MAX_DELAY: Duration = Duration::from_secs(600);

/// The delay before attempt `attempts + 1`: exponential, capped, with jitter from the
/// delivery id (between half and all of it), so receivers coming back are not hit at once.
#[must_use]
pub fn backoff(attempts: u32, delivery: uuid::Uuid) -> Duration {
    let doubled = FIRST_DELAY.saturating_mul(1 << attempts.saturating_sub(1).min(20));
    let full = doubled.min(MAX_DELAY);
    // UUIDv7's low bits are random: a fraction in [0.5, 1).
    let spread = 0.5 + f64::from((delivery.as_u128() & 0xffff) as u16) / 131_072.0;
    full.mul_f64(spread)
}

/// Runs until `stop` is cancelled, then ends at once: a notice it is sending keeps its lease
/// and is sent again after it, under the same delivery id (LEDGER-31). Spawn it once per
/// serving process; `owner` names its leases.
pub async fn deliver(
    store: Arc<dyn Store>,
    egress: GuardedClient,
    notifications: Arc<Notifications>,
    owner: String,
    stop: CancellationToken,
) {
    let mut woken = store.notices();
    let worker = Worker {
        store,
        egress,
        notifications,
        owner,
    };
    let mut tick = tokio::time::interval(POLL);
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            _ = tick.tick() => {}
            Ok(()) = woken.changed() => {}
        }
        woken.borrow_and_update();
        if stop.run_until_cancelled(worker.drain()).await.is_none() {
            break;
        }
    }
}

struct Worker {
    store: Arc<dyn Store>,
    egress: GuardedClient,
    notifications: Arc<Notifications>,
    owner: String,
}

impl Worker {
    /// Claims and delivers until nothing is due.
    async fn drain(&self) {
        let outbox: &dyn Outbox = self.store.as_ref();
        loop {
            let notices = match outbox.claim_notices(&self.owner, LEASE, BATCH).await {
                Ok(notices) => notices,
                Err(error) => {
                    tracing::error!(%error, "claiming notifications failed");
                    return;
                }
            };
            let full = notices.len() == BATCH as usize;
            for notice in notices {
                self.one(outbox, notice).await;
            }
            if !full {
                return;
            }
        }
    }

    async fn one(&self, outbox: &dyn Outbox, notice: Notice) {
        let outcome = self.send(outbox, &notice).await;
        let (id, destination) = (notice.id, notice.destination.as_str());
        let settled = match outcome {
            Ok(reference) => outbox.notice_delivered(id, &self.owner, reference).await,
            Err(undelivered) => {
                let last = undelivered.give_up || notice.attempts >= MAX_ATTEMPTS;
                let retry = (!last).then(|| backoff(notice.attempts, id));
                if last {
                    let (event, invocation) = (notice.event.as_str(), &notice.invocation_id);
                    let why = undelivered.reason.as_str();
                    tracing::warn!(target: EVENTS, %id, event, %invocation, destination, attempts = notice.attempts, why, "notification failed");
                } else {
                    tracing::debug!(%id, destination, why = %undelivered.reason, "notification to retry");
                }
                outbox
                    .notice_undelivered(id, &self.owner, retry, undelivered.reason)
                    .await
            }
        };
        if let Err(error) = settled {
            tracing::error!(%id, %error, "settling a notification failed; it is sent again after its lease");
        }
    }

    /// One attempt; the reference to keep on success.
    async fn send(
        &self,
        outbox: &dyn Outbox,
        notice: &Notice,
    ) -> Result<Option<String>, Undelivered> {
        let data = self.data(notice).await;
        if notice.destination == SLACK {
            return self.slack(outbox, notice, &data).await;
        }
        let hook = self
            .notifications
            .webhooks
            .iter()
            .find(|w| w.destination == notice.destination)
            .ok_or_else(|| Undelivered::give_up("no such destination is configured any more"))?;
        let id = notice.id.to_string();
        let created = notice.created_at.format(&Rfc3339).unwrap_or_default();
        let body = webhook::body(notice.event.as_str(), &id, &created, &data)?;
        let now = OffsetDateTime::now_utc().unix_timestamp();
        let request = webhook::request(&hook.url, &hook.keys, &id, now, body);
        // A call of its own per attempt (NOTIFY-11): the receiver's name is resolved and its
        // addresses judged again each time, so one that turned private is refused; the guard
        // follows no redirect.
        let response = self
            .egress
            .send(request)
            .await
            .map_err(|e| Undelivered::egress(&e))?;
        if response.status().is_success() {
            Ok(None)
        } else {
            Err(Undelivered::status(response.status().as_u16()))
        }
    }

    async fn slack(
        &self,
        outbox: &dyn Outbox,
        notice: &Notice,
        data: &Value,
    ) -> Result<Option<String>, Undelivered> {
        let out = self
            .notifications
            .slack
            .as_ref()
            .ok_or_else(|| Undelivered::give_up("Slack is not configured any more"))?;
        if matches!(notice.event, NotifyEvent::Parked | NotifyEvent::Proposed) {
            return out.post(&self.egress, slack::card(data)).await.map(Some);
        }
        let reference = outbox
            .notice_reference(notice.invocation_id, SLACK)
            .await
            .map_err(|e| Undelivered::retry(e.to_string()))?
            .ok_or_else(|| Undelivered::retry("its card is not posted yet"))?;
        let at = notice.created_at.format(&Rfc3339).unwrap_or_default();
        out.update(&self.egress, &reference, slack::outcome(data, &at))
            .await
            .map(|()| None)
    }

    /// The notice's data, with what the session says (scope, channel) and the inbox link.
    async fn data(&self, notice: &Notice) -> Value {
        let mut data = notice.payload.clone();
        let opened = match data.get("session_id").and_then(Value::as_str) {
            Some(id) => match id.parse::<SessionId>() {
                Ok(id) => self.store.get_session(id).await.ok(),
                Err(_) => None,
            },
            None => None,
        };
        let scope = opened
            .as_ref()
            .and_then(session::scope)
            .map(|s| s.to_string());
        let inbox = self
            .notifications
            .inbox_url(&notice.invocation_id.to_string());
        if let Value::Object(map) = &mut data {
            map.insert("scope".into(), scope.into());
            map.insert("channel".into(), opened.map(|s| s.channel).into());
            map.insert("inbox_url".into(), inbox.into());
        }
        data
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_within_its_jitter_and_is_capped() {
        let id = uuid::Uuid::now_v7();
        for attempts in 1..=MAX_ATTEMPTS {
            let full = FIRST_DELAY
                .saturating_mul(1 << (attempts - 1))
                .min(MAX_DELAY);
            let d = backoff(attempts, id);
            assert!(d >= full / 2 && d <= full, "{attempts}: {d:?} of {full:?}");
        }
        assert!(backoff(60, id) <= MAX_DELAY);
    }
}
