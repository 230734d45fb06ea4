-- A proposal is decided by a person now (docs/rules.md AGENT-31): `proposed` is no longer
-- terminal, so it joins the open rows (`row::open_rows!`) the partial index holds.
DROP INDEX IF EXISTS invocations_open;
CREATE INDEX invocations_open
    ON invocations (state, expires_at)
    WHERE state IN ('pending', 'proposed', 'awaiting_approval', 'awaiting_answer', 'approved', 'running', 'in_doubt');

-- One open run per session (docs/rules.md AGENT-32), held by the database so two processes
-- starting a run in one session at the same instant cannot both start. A sub-agent's run has
-- a session of its own, so a nested run never collides with its caller.
CREATE UNIQUE INDEX runs_one_open_per_session
    ON runs (session_id) WHERE status IN ('running', 'parked');
