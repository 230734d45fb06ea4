-- Bounded grants (docs/rules.md LEDGER-77): a person approving a call may let later calls of
-- the same principal through without asking again — identical ones or any of the tool's, in
-- one session or any, for a number of uses and always until a time. A later call uses one in
-- the transaction that records it; the approved call it was given with names it.
CREATE TABLE approval_grants (
    source_id           TEXT PRIMARY KEY,
    tool                TEXT NOT NULL,
    principal           TEXT NOT NULL,
    arguments_hash      TEXT,
    session_id          TEXT,
    definitions_digest  TEXT NOT NULL,
    uses_left           INTEGER,
    expires_at          INTEGER NOT NULL,
    granted_by          TEXT NOT NULL,
    granted_at          INTEGER NOT NULL
);
CREATE INDEX approval_grants_by_tool ON approval_grants (tool, principal, expires_at);
