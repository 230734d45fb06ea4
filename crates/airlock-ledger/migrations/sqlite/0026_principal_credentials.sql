-- Credentials per principal (docs/rules.md LEDGER-81 … LEDGER-84).
--
-- `principal_credentials` holds each principal's sealed credential for a connection (sealed by
-- the serving process with the vault key; the database never sees a secret in the clear), one
-- row per (connection, principal): revoking deletes it. `credential_events` keeps every set and
-- revoke with who and when (the audit, and what every replica watches to drop its copies).
-- `credential_waits` names the connection and principal a call parked `awaiting_credential`
-- waits for; `invocations.credential_use` records which credential the call's last attempt
-- carried (connection, principal, kind, issuer and a keyed digest of the token, never the
-- token), written by the update that finishes it.
CREATE TABLE principal_credentials (
    connection      TEXT NOT NULL,
    principal       TEXT NOT NULL,
    kind            TEXT NOT NULL,
    sealed          TEXT NOT NULL,
    refresh_sealed  TEXT,
    expires_at      INTEGER,
    issuer          TEXT,
    digest          TEXT NOT NULL,
    set_by          TEXT NOT NULL,
    set_at          INTEGER NOT NULL,
    PRIMARY KEY (connection, principal)
);
CREATE TABLE credential_events (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    connection  TEXT NOT NULL,
    principal   TEXT NOT NULL,
    action      TEXT NOT NULL,
    kind        TEXT,
    digest      TEXT,
    by_whom     TEXT NOT NULL,
    at          INTEGER NOT NULL
);
CREATE TABLE credential_waits (
    invocation_id  TEXT PRIMARY KEY,
    connection     TEXT NOT NULL,
    principal      TEXT NOT NULL
);
CREATE INDEX credential_waits_by_key ON credential_waits (connection, principal);
ALTER TABLE invocations ADD COLUMN credential_use TEXT;
-- A connect flow's state is used once (LEDGER-85): its nonce is inserted before its code is
-- redeemed.
CREATE TABLE connect_states (
    nonce  TEXT PRIMARY KEY,
    at     INTEGER NOT NULL
);

-- `awaiting_credential` is an open state: the partial index holds it (`row::open_rows!`).
DROP INDEX IF EXISTS invocations_open;
CREATE INDEX invocations_open
    ON invocations (state, expires_at)
    WHERE state IN ('pending', 'proposed', 'awaiting_approval', 'awaiting_answer', 'awaiting_credential', 'approved', 'running', 'in_doubt');

-- A call waiting for its principal's credential keeps its budget share: it runs once the
-- credential exists (docs/rules.md LEDGER-74).
DROP TRIGGER budget_call_released;
CREATE TRIGGER budget_call_released AFTER UPDATE OF state ON invocations
WHEN NOT (NEW.state IN ('pending', 'proposed', 'awaiting_approval', 'awaiting_answer',
                        'awaiting_credential', 'approved', 'running', 'in_doubt', 'succeeded',
                        'resolved', 'input_required')
          OR (NEW.state = 'failed' AND COALESCE(NEW.error_kind IN ('timeout',
                  'upstream_error', 'bad_response', 'tool_failed', 'task_failed'), 0)))
BEGIN
    UPDATE budget_shares SET open = 0 WHERE invocation_id = NEW.id AND open = 1;
END;
