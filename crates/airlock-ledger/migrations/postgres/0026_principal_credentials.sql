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
    expires_at      BIGINT,
    issuer          TEXT,
    digest          TEXT NOT NULL,
    set_by          TEXT NOT NULL,
    set_at          BIGINT NOT NULL,
    PRIMARY KEY (connection, principal)
);
CREATE TABLE credential_events (
    seq         BIGSERIAL PRIMARY KEY,
    connection  TEXT NOT NULL,
    principal   TEXT NOT NULL,
    action      TEXT NOT NULL,
    kind        TEXT,
    digest      TEXT,
    by_whom     TEXT NOT NULL,
    at          BIGINT NOT NULL
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
    at     BIGINT NOT NULL
);

-- `awaiting_credential` is an open state: the partial index holds it (`row::open_rows!`).
DROP INDEX IF EXISTS invocations_open;
CREATE INDEX invocations_open
    ON invocations (state, expires_at)
    WHERE state IN ('pending', 'proposed', 'awaiting_approval', 'awaiting_answer', 'awaiting_credential', 'approved', 'running', 'in_doubt');

-- A call waiting for its principal's credential keeps its budget share: it runs once the
-- credential exists (docs/rules.md LEDGER-74).
CREATE OR REPLACE FUNCTION budget_counts(state TEXT, error_kind TEXT) RETURNS BOOLEAN
LANGUAGE sql IMMUTABLE AS $$
    SELECT state IN ('pending', 'proposed', 'awaiting_approval', 'awaiting_answer',
                     'awaiting_credential', 'approved', 'running', 'in_doubt', 'succeeded',
                     'resolved', 'input_required')
        OR (state = 'failed' AND COALESCE(error_kind IN ('timeout', 'upstream_error',
                                                         'bad_response', 'tool_failed',
                                                         'task_failed'), FALSE))
$$;
