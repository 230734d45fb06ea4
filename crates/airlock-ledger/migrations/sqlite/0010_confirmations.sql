-- The confirmation gate (docs/rules.md POLICY-30..POLICY-36): per session at most one call of a
-- `confirm: true` action waiting for the person's consent, by tool and arguments fingerprint
-- (the arguments are kept for the notice the person reads). `granted_run` is the run the
-- person's literal yes started; `used_by_call` the one call that consent let through, so a
-- resumed run finds its own call consented again and no other call ever is.
CREATE TABLE confirmations (
    session_id    TEXT PRIMARY KEY REFERENCES sessions (id),
    run_id        TEXT NOT NULL REFERENCES runs (id),
    tool          TEXT NOT NULL,
    fingerprint   TEXT NOT NULL,
    arguments     TEXT NOT NULL,
    granted_run   TEXT REFERENCES runs (id),
    used_by_call  TEXT,
    created_at    INTEGER NOT NULL
);
