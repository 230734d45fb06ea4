-- Request states the MCP endpoint sealed for a person at the client (docs/rules.md LEDGER-46):
-- each is used at most once, recorded in the commit that decides (and claims) its call, so a
-- replayed state finds its nonce here and is refused. Nothing secret is kept: the nonce is a
-- random id inside the sealed state, never the state itself.
CREATE TABLE request_states (
    nonce          TEXT PRIMARY KEY,
    invocation_id  TEXT NOT NULL REFERENCES invocations (id),
    used_by        TEXT NOT NULL,
    used_at        INTEGER NOT NULL
);
