-- The notification outbox (docs/rules.md LEDGER-30 … LEDGER-33): one row per event and
-- destination, inserted in the transaction of the state change that caused it, so a crash
-- loses none. `id` is the delivery id every attempt carries. `next_attempt_at` is when the
-- row may be claimed: a claim moves it past the claimer's lease, so two workers never hold
-- the same row at once; a delivered or failed row is never claimed again. Times are
-- microseconds since the Unix epoch, as everywhere in the ledger.
CREATE TABLE notifications (
    id               TEXT PRIMARY KEY,
    destination      TEXT NOT NULL,
    event            TEXT NOT NULL,
    invocation_id    TEXT NOT NULL,
    payload          TEXT NOT NULL,
    created_at       BIGINT NOT NULL,
    attempts         BIGINT NOT NULL,
    next_attempt_at  BIGINT NOT NULL,
    lease_owner      TEXT,
    delivered_at     BIGINT,
    failed_at        BIGINT,
    last_error       TEXT
);

-- Only rows still to deliver are indexed: delivered ones cost nothing to find the due.
CREATE INDEX notifications_due ON notifications (next_attempt_at)
    WHERE delivered_at IS NULL AND failed_at IS NULL;

CREATE INDEX notifications_invocation ON notifications (invocation_id, created_at);
