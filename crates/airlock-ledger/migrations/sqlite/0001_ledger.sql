-- The ledger schema (SQLite). Column types are deliberately portable (TEXT ids and JSON,
-- INTEGER microseconds since the Unix epoch) so both backends read back identical values and
-- the audit chain hashes the same bytes.
CREATE TABLE sessions (
    id          TEXT PRIMARY KEY,
    channel     TEXT NOT NULL,
    principal   TEXT,
    metadata    TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);

CREATE TABLE runs (
    id                    TEXT PRIMARY KEY,
    session_id            TEXT NOT NULL REFERENCES sessions (id),
    agent                 TEXT NOT NULL,
    status                TEXT NOT NULL,
    status_reason         TEXT,
    definitions_digest    TEXT NOT NULL,
    definitions_snapshot  TEXT NOT NULL,
    version               INTEGER NOT NULL,
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL
);

CREATE TABLE invocations (
    id                  TEXT PRIMARY KEY,
    session_id          TEXT NOT NULL REFERENCES sessions (id),
    run_id              TEXT REFERENCES runs (id),
    call_id             TEXT NOT NULL,
    tool                TEXT NOT NULL,
    arguments           TEXT NOT NULL,
    arguments_hash      TEXT NOT NULL,
    source_kind         TEXT NOT NULL,
    effect              TEXT NOT NULL,
    approval            TEXT NOT NULL,
    mode                TEXT NOT NULL,
    kind                TEXT NOT NULL,
    state               TEXT NOT NULL,
    version             INTEGER NOT NULL,
    result              TEXT,
    error_kind          TEXT,
    error_message       TEXT,
    idempotency_key     TEXT NOT NULL,
    principal           TEXT,
    definitions_digest  TEXT NOT NULL,
    approval_ref        TEXT,
    decided_by          TEXT,
    decision            TEXT,
    decision_reason     TEXT,
    decided_at          INTEGER,
    resolved_by         TEXT,
    resolution          TEXT,
    resolution_note     TEXT,
    resolved_at         INTEGER,
    expires_at          INTEGER,
    lease_owner         TEXT,
    lease_deadline      INTEGER,
    attempts            INTEGER NOT NULL,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    UNIQUE (session_id, call_id)
);

-- approval `once`: only rows a person approved count, looked up by principal or by session.
CREATE INDEX invocations_once_principal
    ON invocations (tool, arguments_hash, definitions_digest, principal) WHERE decision = 'approved';
CREATE INDEX invocations_once_session
    ON invocations (session_id, tool, arguments_hash, definitions_digest) WHERE decision = 'approved';
-- the sweeper and the approval inbox
CREATE INDEX invocations_state_expiry ON invocations (state, expires_at);
CREATE INDEX invocations_state_lease ON invocations (state, lease_deadline);
-- listings in order
CREATE INDEX invocations_session_order ON invocations (session_id, created_at, id);
CREATE INDEX invocations_run_order ON invocations (run_id, created_at, id);

-- The audit chain: append-only, one gapless hash chain per writer lane.
CREATE TABLE ledger_events (
    lane       INTEGER NOT NULL,
    seq        INTEGER NOT NULL,
    entity     TEXT NOT NULL,
    entity_id  TEXT NOT NULL,
    version    INTEGER NOT NULL,
    state      TEXT NOT NULL,
    row_hash   TEXT NOT NULL,
    prev_hash  TEXT NOT NULL,
    hash       TEXT NOT NULL,
    at         INTEGER NOT NULL,
    PRIMARY KEY (lane, seq)
);
